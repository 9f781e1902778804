#include "textflag.h"

// AVX-512F tile kernels for F16 and BF16 weights with several vectors:
// four rows against eight vectors. A 512-bit register holds the eight
// lanes of two vectors side by side (the weights' eight columns widened
// into both halves), so each (row, vector) pair keeps exactly the eight
// lane accumulators of dotF16 / dotBF16 and of gemm_amd64.s's 3x4 tiles,
// in the same order, and VHSUM adds them in hsum8's order. Sixteen
// accumulators: Z0-Z7, Z16-Z22 and Z25 (row i, vector pair p: number
// 4i+p in that list); Z8-Z11 the rows' weights, Z12-Z15 the vector pairs.

// VHSUM stores hsum8 of lanes 0-7 of acc at o0 and of lanes 8-15 at o1,
// as vnni_amd64.s's. Clobbers Z23, Z24.
#define VHSUM(acc, o0, o1) \
	VSHUFF32X4 $0xB1, acc, acc, Z24; \
	VADDPS Z24, acc, Z24; \
	VPERMILPS $0x4E, Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSHDUP Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSS X24, o0; \
	VEXTRACTF32X4 $2, Z24, X23; \
	VMOVSS X23, o1

// Arguments: w (rows stride bytes apart), x (vectors xstride bytes
// apart), nblk blocks of eight columns; the sum of row i and vector k goes
// to dst + 4*i + k*dstride. Registers: SI the weights, BX stride, R10
// 3*stride, DI vectors 0-3, R12 vectors 4-7, R9 xstride, R11 3*xstride.
#define HZINIT \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), BX; \
	MOVQ x+16(FP), DI; \
	MOVQ xstride+24(FP), R9; \
	MOVQ nblk+32(FP), CX; \
	LEAQ (BX)(BX*2), R10; \
	LEAQ (R9)(R9*2), R11; \
	LEAQ (DI)(R9*4), R12; \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z25, Z25, Z25

// HZPAIRS loads the four vector pairs' eight columns.
#define HZPAIRS \
	VMOVUPS (DI), Y12; \
	VINSERTF64X4 $1, (DI)(R9*1), Z12, Z12; \
	VMOVUPS (DI)(R9*2), Y13; \
	VINSERTF64X4 $1, (DI)(R11*1), Z13, Z13; \
	VMOVUPS (R12), Y14; \
	VINSERTF64X4 $1, (R12)(R9*1), Z14, Z14; \
	VMOVUPS (R12)(R9*2), Y15; \
	VINSERTF64X4 $1, (R12)(R11*1), Z15, Z15

// F16 step of one row (weights in w) against the four pairs: lane =
// fma(w, x, lane), which is dotF16's lane += float32(w*x) (the product of
// two F16 values is exact in F32).
#define F16ROW(w, a0, a1, a2, a3) \
	VFMADD231PS Z12, w, a0; \
	VFMADD231PS Z13, w, a1; \
	VFMADD231PS Z14, w, a2; \
	VFMADD231PS Z15, w, a3

// BF16 step: lane += float32(w*x), a rounded product then a rounded add,
// as dotBF16.
#define BF16ROW(w, a0, a1, a2, a3) \
	VMULPS Z12, w, Z26; \
	VADDPS Z26, a0, a0; \
	VMULPS Z13, w, Z27; \
	VADDPS Z27, a1, a1; \
	VMULPS Z14, w, Z28; \
	VADDPS Z28, a2, a2; \
	VMULPS Z15, w, Z29; \
	VADDPS Z29, a3, a3

#define HZSTORE \
	MOVQ dst+40(FP), AX; \
	MOVQ dstride+48(FP), R13; \
	LEAQ (AX)(R13*1), CX; \
	VHSUM(Z0, (AX), (CX)); \
	VHSUM(Z4, 4(AX), 4(CX)); \
	VHSUM(Z16, 8(AX), 8(CX)); \
	VHSUM(Z20, 12(AX), 12(CX)); \
	LEAQ (AX)(R13*2), AX; \
	LEAQ (AX)(R13*1), CX; \
	VHSUM(Z1, (AX), (CX)); \
	VHSUM(Z5, 4(AX), 4(CX)); \
	VHSUM(Z17, 8(AX), 8(CX)); \
	VHSUM(Z21, 12(AX), 12(CX)); \
	LEAQ (AX)(R13*2), AX; \
	LEAQ (AX)(R13*1), CX; \
	VHSUM(Z2, (AX), (CX)); \
	VHSUM(Z6, 4(AX), 4(CX)); \
	VHSUM(Z18, 8(AX), 8(CX)); \
	VHSUM(Z22, 12(AX), 12(CX)); \
	LEAQ (AX)(R13*2), AX; \
	LEAQ (AX)(R13*1), CX; \
	VHSUM(Z3, (AX), (CX)); \
	VHSUM(Z7, 4(AX), 4(CX)); \
	VHSUM(Z19, 8(AX), 8(CX)); \
	VHSUM(Z25, 12(AX), 12(CX))

// func gemmF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)
// nblk > 0.
TEXT ·gemmF16Z4x8(SB), NOSPLIT, $0-56
	HZINIT

f16z48loop:
	VBROADCASTI128 (SI), Y8
	VBROADCASTI128 (SI)(BX*1), Y9
	VBROADCASTI128 (SI)(BX*2), Y10
	VBROADCASTI128 (SI)(R10*1), Y11
	VCVTPH2PS Y8, Z8
	VCVTPH2PS Y9, Z9
	VCVTPH2PS Y10, Z10
	VCVTPH2PS Y11, Z11
	HZPAIRS
	F16ROW(Z8, Z0, Z1, Z2, Z3)
	F16ROW(Z9, Z4, Z5, Z6, Z7)
	F16ROW(Z10, Z16, Z17, Z18, Z19)
	F16ROW(Z11, Z20, Z21, Z22, Z25)
	ADDQ $16, SI
	ADDQ $32, DI
	ADDQ $32, R12
	DECQ CX
	JNZ f16z48loop

	HZSTORE
	VZEROUPPER
	RET

// func gemmBF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)
// nblk > 0.
TEXT ·gemmBF16Z4x8(SB), NOSPLIT, $0-56
	HZINIT

bf16z48loop:
	VBROADCASTI128 (SI), Y8
	VBROADCASTI128 (SI)(BX*1), Y9
	VBROADCASTI128 (SI)(BX*2), Y10
	VBROADCASTI128 (SI)(R10*1), Y11
	VPMOVZXWD Y8, Z8
	VPMOVZXWD Y9, Z9
	VPMOVZXWD Y10, Z10
	VPMOVZXWD Y11, Z11
	VPSLLD $16, Z8, Z8
	VPSLLD $16, Z9, Z9
	VPSLLD $16, Z10, Z10
	VPSLLD $16, Z11, Z11
	HZPAIRS
	BF16ROW(Z8, Z0, Z1, Z2, Z3)
	BF16ROW(Z9, Z4, Z5, Z6, Z7)
	BF16ROW(Z10, Z16, Z17, Z18, Z19)
	BF16ROW(Z11, Z20, Z21, Z22, Z25)
	ADDQ $16, SI
	ADDQ $32, DI
	ADDQ $32, R12
	DECQ CX
	JNZ bf16z48loop

	HZSTORE
	VZEROUPPER
	RET
