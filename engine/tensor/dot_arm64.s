#include "textflag.h"

// NEON (ASIMD) kernels. Like dot_amd64.s, each runs whole blocks of eight
// columns and stores its eight lane accumulators; the Go wrapper adds the
// tail and the lanes, so every lane sees the operations of its plain-Go
// twin in kernels.go, in the same order.

// func ggmlDotF32Blocks(w, x *float32, nblk int, acc *[32]float32)
// nblk blocks of 32 columns into ggml_vec_dot_f32's 32 lanes (V0-V7, four
// lanes each: acc[4k+l] is lane l of Vk; lane = i mod 32 as in the AVX2
// build); lane = fma(w, x, lane) (FMLA is fused).
TEXT ·ggmlDotF32Blocks(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD acc+24(FP), R3
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	CBZ R2, done

loop:
	VLD1.P 64(R0), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R0), [V12.S4, V13.S4, V14.S4, V15.S4]
	VLD1.P 64(R1), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA V8.S4, V16.S4, V0.S4
	VFMLA V9.S4, V17.S4, V1.S4
	VFMLA V10.S4, V18.S4, V2.S4
	VFMLA V11.S4, V19.S4, V3.S4
	VFMLA V12.S4, V20.S4, V4.S4
	VFMLA V13.S4, V21.S4, V5.S4
	VFMLA V14.S4, V22.S4, V6.S4
	VFMLA V15.S4, V23.S4, V7.S4
	SUB $1, R2, R2
	CBNZ R2, loop

done:
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R3)
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R3)
	RET
