#include "textflag.h"

// One SMMLA and one BFMMLA, for mmla_arm64_test.go only: the evidence for
// gemm_arm64.go's reasons not to use them (the linker leaves them out of
// anything but the test). Encodings from llvm-mc.

// func smmlaOnce(a, b *[16]int8, c *[4]int32)
// c[2i+j] += sum over k < 8 of a[8i+k]*b[8j+k].
TEXT ·smmlaOnce(SB), NOSPLIT, $0-24
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD c+16(FP), R2
	VLD1 (R0), [V0.B16]
	VLD1 (R1), [V1.B16]
	VLD1 (R2), [V2.S4]
	WORD $0x4e81a402 // SMMLA V2.4S, V0.16B, V1.16B
	VST1 [V2.S4], (R2)
	RET

// func bfmmlaOnce(a, b *[8]uint16, c *[4]float32)
// c[2i+j] += sum over k < 4 of a[4i+k]*b[4j+k], in BF16 arithmetic.
TEXT ·bfmmlaOnce(SB), NOSPLIT, $0-24
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD c+16(FP), R2
	VLD1 (R0), [V0.H8]
	VLD1 (R1), [V1.H8]
	VLD1 (R2), [V2.S4]
	WORD $0x6e41ec02 // BFMMLA V2.4S, V0.8H, V1.8H
	VST1 [V2.S4], (R2)
	RET
