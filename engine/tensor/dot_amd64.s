#include "textflag.h"

// AVX2 + FMA3 + F16C dot-product kernels. Each one runs whole blocks of
// eight columns only and stores its eight lane accumulators; the Go
// wrappers in dot_amd64.go add the tail and the lanes (hsum8), so that
// every lane sees the same operations, in the same order, as its plain-Go
// twin in kernels.go. Lane k of the vector register is lane k of the twin,
// except in dotQ8Lanes (see there).

// func ggmlDotF32Blocks(w, x *float32, nblk int, acc *[32]float32)
// nblk blocks of 32 columns into ggml_vec_dot_f32's four 8-lane
// accumulators (Y0-Y3; acc[8j+l] is lane l of accumulator j):
// acc = fma(w, x, acc), the exact fused step ggmlDotF32's twin emulates.
TEXT ·ggmlDotF32Blocks(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ acc+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ f32done

f32loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ f32loop

f32done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func dotF16Lanes4(w *uint16, stride int, x *float32, nblk int, lanes *[32]float32)
// Four F16 rows, stride bytes apart, times one vector: lanes[8*r+k] is
// lane k of row r. lane += float32(w*x): a rounded product, then a
// rounded add, as dotF16 does (the product of two F16 values is exact).
TEXT ·dotF16Lanes4(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (SI)(BX*2), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ f16x4done

f16x4loop:
	VMOVUPS (DI), Y4
	VCVTPH2PS (SI), Y5
	VCVTPH2PS (SI)(BX*1), Y6
	VCVTPH2PS (R8), Y7
	VCVTPH2PS (R8)(BX*1), Y8
	VMULPS Y4, Y5, Y5
	VMULPS Y4, Y6, Y6
	VMULPS Y4, Y7, Y7
	VMULPS Y4, Y8, Y8
	VADDPS Y5, Y0, Y0
	VADDPS Y6, Y1, Y1
	VADDPS Y7, Y2, Y2
	VADDPS Y8, Y3, Y3
	ADDQ $16, SI
	ADDQ $16, R8
	ADDQ $32, DI
	DECQ CX
	JNZ f16x4loop

f16x4done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func dotF16Lanes(w *uint16, x *float32, nblk int, lanes *[8]float32)
TEXT ·dotF16Lanes(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ f16done

f16loop:
	VCVTPH2PS (SI), Y1
	VMULPS (DI), Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ f16loop

f16done:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func dotBF16Lanes4(w *uint16, stride int, x *float32, nblk int, lanes *[32]float32)
// As dotF16Lanes4 for BF16 rows: widening is a zero extension and a shift.
TEXT ·dotBF16Lanes4(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (SI)(BX*2), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ bf16x4done

bf16x4loop:
	VMOVUPS (DI), Y4
	VPMOVZXWD (SI), Y5
	VPMOVZXWD (SI)(BX*1), Y6
	VPMOVZXWD (R8), Y7
	VPMOVZXWD (R8)(BX*1), Y8
	VPSLLD $16, Y5, Y5
	VPSLLD $16, Y6, Y6
	VPSLLD $16, Y7, Y7
	VPSLLD $16, Y8, Y8
	VMULPS Y4, Y5, Y5
	VMULPS Y4, Y6, Y6
	VMULPS Y4, Y7, Y7
	VMULPS Y4, Y8, Y8
	VADDPS Y5, Y0, Y0
	VADDPS Y6, Y1, Y1
	VADDPS Y7, Y2, Y2
	VADDPS Y8, Y3, Y3
	ADDQ $16, SI
	ADDQ $16, R8
	ADDQ $32, DI
	DECQ CX
	JNZ bf16x4loop

bf16x4done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func dotBF16Lanes(w *uint16, x *float32, nblk int, lanes *[8]float32)
TEXT ·dotBF16Lanes(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ bf16done

bf16loop:
	VPMOVZXWD (SI), Y1
	VPSLLD $16, Y1, Y1
	VMULPS (DI), Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bf16loop

bf16done:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func dotQ8Lanes(row *byte, act *q8Act, nblk int, lanes *[8]float32)
// Q8_0 blocks (34 bytes: F16 scale, 32 quants) times activation blocks
// (q8Act: 32 quants, then the F32 scale at byte 32; 36 bytes). Per block:
// d = float32(F16(scale_w) * scale_x); the quants are widened to int16 and
// VPMADDWD/VPHADDD give the exact sums of four products; lane =
// fma(d, float32(isum), lane). VPHADDD works within 128-bit halves, so
// register lane j holds twin lane [0 1 4 5 2 3 6 7][j]; the wrapper puts
// them back in order.
TEXT ·dotQ8Lanes(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ q8done

q8loop:
	MOVWLZX (SI), AX
	VMOVD AX, X1
	VCVTPH2PS X1, X1
	VMULSS 32(DI), X1, X1
	VBROADCASTSS X1, Y1
	VPMOVSXBW 2(SI), Y2
	VPMOVSXBW (DI), Y3
	VPMADDWD Y3, Y2, Y2
	VPMOVSXBW 18(SI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMADDWD Y5, Y4, Y4
	VPHADDD Y4, Y2, Y2
	VCVTDQ2PS Y2, Y2
	VFMADD231PS Y2, Y1, Y0
	ADDQ $34, SI
	ADDQ $36, DI
	DECQ CX
	JNZ q8loop

q8done:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func dotF16Lanes4x2(w *uint16, stride int, x0, x1 *float32, nblk int, lanes *[64]float32)
// Four F16 rows, stride bytes apart, times two vectors:
// lanes[8*(2*r+v)+k] is lane k of row r with vector v, each lane summed as
// in dotF16. Eight independent chains of adds.
TEXT ·dotF16Lanes4x2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x0+16(FP), DI
	MOVQ x1+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ lanes+40(FP), DX
	LEAQ (SI)(BX*2), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JZ dotf16lanes4x2done

dotf16lanes4x2loop:
	VMOVUPS (DI), Y8
	VMOVUPS (R9), Y9
	VCVTPH2PS (SI), Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y0, Y0
	VADDPS Y12, Y1, Y1
	VCVTPH2PS (SI)(BX*1), Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y2, Y2
	VADDPS Y12, Y3, Y3
	VCVTPH2PS (R8), Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y4, Y4
	VADDPS Y12, Y5, Y5
	VCVTPH2PS (R8)(BX*1), Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y6, Y6
	VADDPS Y12, Y7, Y7
	ADDQ $16, SI
	ADDQ $16, R8
	ADDQ $32, DI
	ADDQ $32, R9
	DECQ CX
	JNZ dotf16lanes4x2loop

dotf16lanes4x2done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func dotBF16Lanes4x2(w *uint16, stride int, x0, x1 *float32, nblk int, lanes *[64]float32)
// Four BF16 rows, stride bytes apart, times two vectors:
// lanes[8*(2*r+v)+k] is lane k of row r with vector v, each lane summed as
// in dotBF16. Eight independent chains of adds.
TEXT ·dotBF16Lanes4x2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x0+16(FP), DI
	MOVQ x1+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ lanes+40(FP), DX
	LEAQ (SI)(BX*2), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JZ dotbf16lanes4x2done

dotbf16lanes4x2loop:
	VMOVUPS (DI), Y8
	VMOVUPS (R9), Y9
	VPMOVZXWD (SI), Y10
	VPSLLD $16, Y10, Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y0, Y0
	VADDPS Y12, Y1, Y1
	VPMOVZXWD (SI)(BX*1), Y10
	VPSLLD $16, Y10, Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y2, Y2
	VADDPS Y12, Y3, Y3
	VPMOVZXWD (R8), Y10
	VPSLLD $16, Y10, Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y4, Y4
	VADDPS Y12, Y5, Y5
	VPMOVZXWD (R8)(BX*1), Y10
	VPSLLD $16, Y10, Y10
	VMULPS Y8, Y10, Y11
	VMULPS Y9, Y10, Y12
	VADDPS Y11, Y6, Y6
	VADDPS Y12, Y7, Y7
	ADDQ $16, SI
	ADDQ $16, R8
	ADDQ $32, DI
	ADDQ $32, R9
	DECQ CX
	JNZ dotbf16lanes4x2loop

dotbf16lanes4x2done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func dotQ8Lanes4(row *byte, stride int, act *q8Act, nblk int, lanes *[32]float32)
// dotQ8Lanes for four rows, stride bytes apart, sharing the widened
// activation quants: lanes[8*r+j] is register lane j of row r (twin lane
// [0 1 4 5 2 3 6 7][j], as in dotQ8Lanes).
TEXT ·dotQ8Lanes4(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (SI)(BX*2), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ q8x4done

q8x4loop:
	VPMOVSXBW (DI), Y4
	VPMOVSXBW 16(DI), Y5
	VMOVSS 32(DI), X7
	MOVWLZX 0(SI), AX
	VMOVD AX, X6
	VCVTPH2PS X6, X6
	VMULSS X7, X6, X6
	VBROADCASTSS X6, Y6
	VPMOVSXBW 2(SI), Y8
	VPMADDWD Y4, Y8, Y8
	VPMOVSXBW 18(SI), Y9
	VPMADDWD Y5, Y9, Y9
	VPHADDD Y9, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y6, Y0
	MOVWLZX 0(SI)(BX*1), AX
	VMOVD AX, X6
	VCVTPH2PS X6, X6
	VMULSS X7, X6, X6
	VBROADCASTSS X6, Y6
	VPMOVSXBW 2(SI)(BX*1), Y8
	VPMADDWD Y4, Y8, Y8
	VPMOVSXBW 18(SI)(BX*1), Y9
	VPMADDWD Y5, Y9, Y9
	VPHADDD Y9, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y6, Y1
	MOVWLZX 0(R8), AX
	VMOVD AX, X6
	VCVTPH2PS X6, X6
	VMULSS X7, X6, X6
	VBROADCASTSS X6, Y6
	VPMOVSXBW 2(R8), Y8
	VPMADDWD Y4, Y8, Y8
	VPMOVSXBW 18(R8), Y9
	VPMADDWD Y5, Y9, Y9
	VPHADDD Y9, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y6, Y2
	MOVWLZX 0(R8)(BX*1), AX
	VMOVD AX, X6
	VCVTPH2PS X6, X6
	VMULSS X7, X6, X6
	VBROADCASTSS X6, Y6
	VPMOVSXBW 2(R8)(BX*1), Y8
	VPMADDWD Y4, Y8, Y8
	VPMOVSXBW 18(R8)(BX*1), Y9
	VPMADDWD Y5, Y9, Y9
	VPHADDD Y9, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y6, Y3
	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $36, DI
	DECQ CX
	JNZ q8x4loop

q8x4done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// F32REDUCE sets X(d) to ggmlReduce32 of the accumulators a0-a3 (ymm),
// operation for operation: x0 = (a0+a2) + (a1+a3), t = x0[0:4] + x0[4:8],
// (t0+t1) + (t2+t3). Clobbers t (ymm; tx its xmm).
#define F32REDUCE(a0, a1, a2, a3, d, dx, t, tx) \
	VADDPS a2, a0, d; \
	VADDPS a3, a1, t; \
	VADDPS t, d, d; \
	VEXTRACTF128 $1, d, tx; \
	VADDPS tx, dx, dx; \
	VMOVSHDUP dx, tx; \
	VADDPS tx, dx, dx; \
	VMOVHLPS dx, dx, tx; \
	VADDSS tx, dx, dx

// func ggmlDotF32Sum(w, x *float32, nblk int) float32
// ggmlDotF32Blocks and ggmlReduce32 in one: the sum of nblk blocks of 32
// columns (nblk > 0) without storing the lanes.
TEXT ·ggmlDotF32Sum(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblk+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f32sloop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ f32sloop

	F32REDUCE(Y0, Y1, Y2, Y3, Y4, X4, Y5, X5)
	VMOVSS X4, ret+24(FP)
	VZEROUPPER
	RET

// func ggmlDotF32Sum2(w, x0, x1 *float32, nblk int, sums *[2]float32)
// ggmlDotF32Sum of one row w against two vectors x0 and x1 (nblk > 0),
// each weight block loaded once: sums[v] is the row's sum with x_v.
TEXT ·ggmlDotF32Sum2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), R8
	MOVQ nblk+24(FP), CX
	MOVQ sums+32(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f32s2loop:
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS 64(SI), Y10
	VMOVUPS 96(SI), Y11
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (R8), Y8, Y4
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 32(R8), Y9, Y5
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 64(R8), Y10, Y6
	VFMADD231PS 96(DI), Y11, Y3
	VFMADD231PS 96(R8), Y11, Y7
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, R8
	DECQ CX
	JNZ f32s2loop

	F32REDUCE(Y0, Y1, Y2, Y3, Y8, X8, Y9, X9)
	F32REDUCE(Y4, Y5, Y6, Y7, Y10, X10, Y11, X11)
	VMOVSS X8, (DX)
	VMOVSS X10, 4(DX)
	VZEROUPPER
	RET
