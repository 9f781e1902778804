#include "textflag.h"

// NEON kernels for the F16 and BF16 dot products (the twins dotF16 and
// dotBF16 in kernels.go). Per block of eight columns the weights are
// widened to F32 (FCVTL/FCVTL2 for F16, exact; BF16 by interleaving with
// zero halfwords, i.e. h<<16), multiplied by the activations (FMUL, one
// rounding, as the twin's float32(w*x)) and added to the lanes (FADD):
// lanes 0-3 in V0, 4-7 in V1, the twin's lanes in the twin's order. FCVTL,
// FMUL and FADD on vectors are WORD-encoded (encodings from llvm-mc).

// func dotF16LanesNEON(w *uint16, x *float32, nblk int, lanes *[8]float32)
TEXT ·dotF16LanesNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	CBZ R2, f16done

f16loop:
	VLD1.P 16(R0), [V2.H8]
	VLD1.P 32(R1), [V5.S4, V6.S4]
	WORD $0x0e217843               // FCVTL V3.4S, V2.4H
	WORD $0x4e217844               // FCVTL2 V4.4S, V2.8H
	WORD $0x6e25dc63               // FMUL V3.4S, V3.4S, V5.4S
	WORD $0x6e26dc84               // FMUL V4.4S, V4.4S, V6.4S
	WORD $0x4e23d400               // FADD V0.4S, V0.4S, V3.4S
	WORD $0x4e24d421               // FADD V1.4S, V1.4S, V4.4S
	SUB $1, R2, R2
	CBNZ R2, f16loop

f16done:
	VST1 [V0.S4, V1.S4], (R3)
	RET

// func dotBF16LanesNEON(w *uint16, x *float32, nblk int, lanes *[8]float32)
TEXT ·dotBF16LanesNEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V31.B16, V31.B16, V31.B16
	CBZ R2, bf16done

bf16loop:
	VLD1.P 16(R0), [V2.H8]
	VLD1.P 32(R1), [V5.S4, V6.S4]
	VZIP1 V2.H8, V31.H8, V3.H8     // h<<16, columns 0-3
	VZIP2 V2.H8, V31.H8, V4.H8     // columns 4-7
	WORD $0x6e25dc63               // FMUL V3.4S, V3.4S, V5.4S
	WORD $0x6e26dc84               // FMUL V4.4S, V4.4S, V6.4S
	WORD $0x4e23d400               // FADD V0.4S, V0.4S, V3.4S
	WORD $0x4e24d421               // FADD V1.4S, V1.4S, V4.4S
	SUB $1, R2, R2
	CBNZ R2, bf16loop

bf16done:
	VST1 [V0.S4, V1.S4], (R3)
	RET
