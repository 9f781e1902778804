#include "textflag.h"

// NEON (ASIMD) kernels. Like dot_amd64.s, each runs whole blocks of eight
// columns and stores its eight lane accumulators; the Go wrapper adds the
// tail and the lanes, so every lane sees the operations of its plain-Go
// twin in kernels.go, in the same order.

// func dotF32Lanes(w, x *float32, nblk int, lanes *[8]float32)
// Lanes 0-3 in V0, 4-7 in V1; lane = fma(w, x, lane) (FMLA is fused).
TEXT ·dotF32Lanes(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	CBZ R2, done

loop:
	VLD1.P 32(R0), [V2.S4, V3.S4]
	VLD1.P 32(R1), [V4.S4, V5.S4]
	VFMLA V2.S4, V4.S4, V0.S4
	VFMLA V3.S4, V5.S4, V1.S4
	SUB $1, R2, R2
	CBNZ R2, loop

done:
	VST1 [V0.S4, V1.S4], (R3)
	RET
