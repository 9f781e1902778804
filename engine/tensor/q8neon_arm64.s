#include "textflag.h"

// NEON kernels for Q8_0 (weights Q8_0 x Q8_0 activations) and NVFP4 W4A8
// (NVFP4 weights x Q8_0 activations), for CPUs with the dot-product
// extension (SDOT; useNEONDot). Go's assembler has no mnemonics for SDOT,
// SCVTF, FCVTL and vector FMUL: they are WORD-encoded (encodings from
// llvm-mc), with the instruction in the comment. Both kernels keep the
// twin's eight lanes (dotQ8 in kernels.go, dotNVFP4Q8 in nvfp4.go) in
// V0 (lanes 0-3) and V1 (lanes 4-7) in the twin's order: SDOT gives lane
// l the exact sum of the four products of quants 4l..4l+3, SCVTF makes it
// an F32 (exact: |isum| <= 4*128*128 < 2^24), and FMLA adds it times the
// scale with one rounding, the fma32 the twins emulate.

// func dotQ8LanesNEON(row *byte, act *q8Act, nblk int, lanes *[8]float32)
// Per block: d = F16(weight scale) * act.d (FMULS, rounded as the twin's
// float32 product), then lane = fma(d, float(isum), lane).
TEXT ·dotQ8LanesNEON(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	CBZ R2, q8done

q8loop:
	FMOVS (R0), F13                // scale (low half) and two quants
	WORD $0x0e2179ae               // FCVTL V14.4S, V13.4H
	ADD $2, R0, R0
	VLD1.P 32(R0), [V2.B16, V3.B16]
	VLD1.P 32(R1), [V4.B16, V5.B16]
	FMOVS.P 4(R1), F6
	FMULS F6, F14, F7
	VDUP V7.S[0], V7.S4
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	WORD $0x4e849450               // SDOT V16.4S, V2.16B, V4.16B
	WORD $0x4e859471               // SDOT V17.4S, V3.16B, V5.16B
	WORD $0x4e21da10               // SCVTF V16.4S, V16.4S
	WORD $0x4e21da31               // SCVTF V17.4S, V17.4S
	VFMLA V16.S4, V7.S4, V0.S4
	VFMLA V17.S4, V7.S4, V1.S4
	SUB $1, R2, R2
	CBNZ R2, q8loop

q8done:
	VST1 [V0.S4, V1.S4], (R3)
	RET

// ggml's kvalues_fp4 (doubled E2M1 values) as a TBL table.
DATA nvq8NeonTab<>+0(SB)/8, $0x0c08060403020100
DATA nvq8NeonTab<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL nvq8NeonTab<>(SB), RODATA|NOPTR, $16

DATA nvq8NeonLow<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvq8NeonLow<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nvq8NeonLow<>(SB), RODATA|NOPTR, $16

// TBL control: scale bytes b0..b3 to the halfwords b0 b1 b2 b3 0 0 0 0
// (index 0xFF reads as 0).
DATA nvq8NeonDup<>+0(SB)/8, $0xff03ff02ff01ff00
DATA nvq8NeonDup<>+8(SB)/8, $0xffffffffffffffff
GLOBL nvq8NeonDup<>(SB), RODATA|NOPTR, $16

DATA nvq8NeonW7F<>+0(SB)/8, $0x007f007f007f007f
DATA nvq8NeonW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL nvq8NeonW7F<>(SB), RODATA|NOPTR, $16

// 128.0 = 2^8 (undoing the F16 trick) * 0.5 (ggml's halving); exact.
DATA nvq8NeonF128<>+0(SB)/8, $0x4300000043000000
DATA nvq8NeonF128<>+8(SB)/8, $0x4300000043000000
GLOBL nvq8NeonF128<>(SB), RODATA|NOPTR, $16

// func dotNVFP4Q8LanesNEON(row *byte, act *q8Act, nblk int, lanes *[8]float32)
// Per NVFP4 block (two q8Act blocks x0, x1): the scale bytes become
// nvScale*0.5 exactly (UE4M3 low 7 bits shifted into an F16, 0x7F zeroed,
// FCVTL, times 128), then d_s = that * x.d rounded to F32 (x0.d for
// sub-blocks 0-1, x1.d for 2-3), as the twin's float32 product. The codes'
// low and high nibbles go through TBL; ZIP1/ZIP2 on doublewords put each
// sub-block's 16 values in value order (8 low nibbles, then 8 high). Lanes
// 0-3 get sub-block 0 then 2, lanes 4-7 sub-block 1 then 3, as the twin.
TEXT ·dotNVFP4Q8LanesNEON(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	MOVD $nvq8NeonTab<>(SB), R5
	VLD1 (R5), [V20.B16]
	MOVD $nvq8NeonLow<>(SB), R5
	VLD1 (R5), [V21.B16]
	MOVD $nvq8NeonDup<>(SB), R5
	VLD1 (R5), [V22.B16]
	MOVD $nvq8NeonW7F<>(SB), R5
	VLD1 (R5), [V23.B16]
	MOVD $nvq8NeonF128<>(SB), R5
	VLD1 (R5), [V24.S4]
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	CBZ R2, nvdone

nvloop:
	// scales: V14 = nvScale[b_s]*0.5, s = 0..3
	FMOVS (R0), F10
	VTBL V22.B16, [V10.B16], V11.B16
	VAND V23.B16, V11.B16, V11.B16
	VCMEQ V23.H8, V11.H8, V12.H8
	VSHL $7, V11.H8, V11.H8
	VEOR V13.B16, V13.B16, V13.B16
	VBIF V12.B16, V11.B16, V13.B16
	WORD $0x0e2179ae               // FCVTL V14.4S, V13.4H
	WORD $0x6e38ddce               // FMUL V14.4S, V14.4S, V24.4S
	// activations: V4 V5 = x0.q, F28 = x0.d, V6 V7 = x1.q, F29 = x1.d
	VLD1.P 32(R1), [V4.B16, V5.B16]
	FMOVS.P 4(R1), F28
	VLD1.P 32(R1), [V6.B16, V7.B16]
	FMOVS.P 4(R1), F29
	VDUP V28.S[0], V30.S4
	VMOV V29.S[0], V30.S[2]
	VMOV V29.S[0], V30.S[3]
	WORD $0x6e3eddce               // FMUL V14.4S, V14.4S, V30.4S
	VDUP V14.S[0], V15.S4
	VDUP V14.S[1], V16.S4
	VDUP V14.S[2], V17.S4
	VDUP V14.S[3], V18.S4

	// codes
	ADD $4, R0, R0
	VLD1.P 32(R0), [V8.B16, V9.B16]
	VAND V21.B16, V8.B16, V10.B16
	VUSHR $4, V8.B16, V11.B16
	VAND V21.B16, V9.B16, V12.B16
	VUSHR $4, V9.B16, V13.B16
	VTBL V10.B16, [V20.B16], V10.B16
	VTBL V11.B16, [V20.B16], V11.B16
	VTBL V12.B16, [V20.B16], V12.B16
	VTBL V13.B16, [V20.B16], V13.B16
	VZIP1 V11.D2, V10.D2, V25.D2   // sub-block 0
	VZIP2 V11.D2, V10.D2, V26.D2   // sub-block 1
	VZIP1 V13.D2, V12.D2, V27.D2   // sub-block 2
	VZIP2 V13.D2, V12.D2, V2.D2    // sub-block 3

	VEOR V3.B16, V3.B16, V3.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	WORD $0x4e849723               // SDOT V3.4S, V25.16B, V4.16B
	WORD $0x4e859749               // SDOT V9.4S, V26.16B, V5.16B
	WORD $0x4e86976a               // SDOT V10.4S, V27.16B, V6.16B
	WORD $0x4e87944b               // SDOT V11.4S, V2.16B, V7.16B
	WORD $0x4e21d863               // SCVTF V3.4S, V3.4S
	WORD $0x4e21d929               // SCVTF V9.4S, V9.4S
	WORD $0x4e21d94a               // SCVTF V10.4S, V10.4S
	WORD $0x4e21d96b               // SCVTF V11.4S, V11.4S
	VFMLA V3.S4, V15.S4, V0.S4
	VFMLA V9.S4, V16.S4, V1.S4
	VFMLA V10.S4, V17.S4, V0.S4
	VFMLA V11.S4, V18.S4, V1.S4

	SUB $1, R2, R2
	CBNZ R2, nvloop

nvdone:
	VST1 [V0.S4, V1.S4], (R3)
	RET
