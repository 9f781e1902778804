#include "textflag.h"

// NEON kernel for W4A4 (nvfp4a4.go's layout and lane order) on CPUs with
// the dot-product extension (SDOT, ARMv8.2; Jetson Orin's Cortex-A78AE and
// Thor's Neoverse V3AE have it). Go's assembler has no mnemonics for SDOT,
// SCVTF, FCVTL and FMUL on vectors: they are WORD-encoded, with the
// instruction in the comment. Per 64-value block: the code bytes' low
// nibbles (lanes 0-7) and high nibbles (lanes 8-15) are looked up (TBL) as
// doubled E2M1 integers, SDOT gives each lane's exact sum of four
// products, SCVTF makes it a float, and FMLA adds it times the lane scale
// (exact product, one rounding), as the twin does. Scale bytes become
// floats by the F16 trick of nvfp4_amd64.s (UE4M3 * 2^-8; 0x7F zeroed),
// times the activation's SF/4 and 256.

DATA nvfp4NeonTab<>+0(SB)/8, $0x0c08060403020100
DATA nvfp4NeonTab<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL nvfp4NeonTab<>(SB), RODATA|NOPTR, $16

DATA nvfp4NeonLow<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvfp4NeonLow<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nvfp4NeonLow<>(SB), RODATA|NOPTR, $16

// TBL control: scale bytes b0..b3 to the halfwords b0 b0 b1 b1 b2 b2 b3 b3
// (index 0xFF reads as 0).
DATA nvfp4NeonDup<>+0(SB)/8, $0xff01ff01ff00ff00
DATA nvfp4NeonDup<>+8(SB)/8, $0xff03ff03ff02ff02
GLOBL nvfp4NeonDup<>(SB), RODATA|NOPTR, $16

DATA nvfp4NeonW7F<>+0(SB)/8, $0x007f007f007f007f
DATA nvfp4NeonW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL nvfp4NeonW7F<>(SB), RODATA|NOPTR, $16

DATA nvfp4NeonF256<>+0(SB)/8, $0x4380000043800000
DATA nvfp4NeonF256<>+8(SB)/8, $0x4380000043800000
GLOBL nvfp4NeonF256<>(SB), RODATA|NOPTR, $16

// func dotNVFP4FP4LanesNEON(row *byte, act *fp4Act, nblk int, lanes *[16]float32)
TEXT ·dotNVFP4FP4LanesNEON(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	MOVD $nvfp4NeonTab<>(SB), R5
	VLD1 (R5), [V20.B16]
	MOVD $nvfp4NeonLow<>(SB), R5
	VLD1 (R5), [V21.B16]
	MOVD $nvfp4NeonDup<>(SB), R5
	VLD1 (R5), [V22.B16]
	MOVD $nvfp4NeonW7F<>(SB), R5
	VLD1 (R5), [V23.B16]
	MOVD $nvfp4NeonF256<>(SB), R5
	VLD1 (R5), [V24.S4]
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	CBZ R2, done

loop:
	// lane scales: V14 for lanes 0-3 and 8-11, V15 for 4-7 and 12-15
	FMOVS (R0), F10
	VTBL V22.B16, [V10.B16], V11.B16
	VAND V23.B16, V11.B16, V11.B16
	VCMEQ V23.H8, V11.H8, V12.H8
	VSHL $7, V11.H8, V11.H8
	VEOR V13.B16, V13.B16, V13.B16
	VBIF V12.B16, V11.B16, V13.B16
	WORD $0x0e2179ae // FCVTL V14.4S, V13.4H
	WORD $0x4e2179af // FCVTL2 V15.4S, V13.8H
	VLD1.P 64(R1), [V4.B16, V5.B16, V6.B16, V7.B16]
	VLD1.P 32(R1), [V16.S4, V17.S4]
	WORD $0x6e30ddce // FMUL V14.4S, V14.4S, V16.4S
	WORD $0x6e38ddce // FMUL V14.4S, V14.4S, V24.4S
	WORD $0x6e31ddef // FMUL V15.4S, V15.4S, V17.4S
	WORD $0x6e38ddef // FMUL V15.4S, V15.4S, V24.4S

	// codes: low nibbles of bytes 0-15, 16-31, then high nibbles
	ADD $4, R0, R0
	VLD1.P 32(R0), [V8.B16, V9.B16]
	VAND V21.B16, V8.B16, V18.B16
	VAND V21.B16, V9.B16, V19.B16
	VUSHR $4, V8.B16, V29.B16
	VUSHR $4, V9.B16, V30.B16
	VTBL V18.B16, [V20.B16], V18.B16
	VTBL V19.B16, [V20.B16], V19.B16
	VTBL V29.B16, [V20.B16], V29.B16
	VTBL V30.B16, [V20.B16], V30.B16

	VEOR V25.B16, V25.B16, V25.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	VEOR V28.B16, V28.B16, V28.B16
	WORD $0x4e849659 // SDOT V25.4S, V18.16B, V4.16B
	WORD $0x4e85967a // SDOT V26.4S, V19.16B, V5.16B
	WORD $0x4e8697bb // SDOT V27.4S, V29.16B, V6.16B
	WORD $0x4e8797dc // SDOT V28.4S, V30.16B, V7.16B
	WORD $0x4e21db39 // SCVTF V25.4S, V25.4S
	WORD $0x4e21db5a // SCVTF V26.4S, V26.4S
	WORD $0x4e21db7b // SCVTF V27.4S, V27.4S
	WORD $0x4e21db9c // SCVTF V28.4S, V28.4S
	VFMLA V25.S4, V14.S4, V0.S4
	VFMLA V26.S4, V15.S4, V1.S4
	VFMLA V27.S4, V14.S4, V2.S4
	VFMLA V28.S4, V15.S4, V3.S4

	SUB $1, R2, R2
	CBNZ R2, loop

done:
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R3)
	RET
