#include "textflag.h"

// AVX-512 (F and BW) tile kernels for F16 and BF16 weights with several
// vectors: four rows against eight vectors. A 512-bit register holds the
// eight lanes of two vectors side by side (the weights' eight columns
// widened into both halves), so each (row, vector) pair keeps exactly the
// eight lane accumulators of dotF16 / dotBF16 and of gemm_amd64.s's 3x4
// tiles, in the same order, and VHSUM adds them in hsum8's order. Sixteen
// accumulators: Z0-Z7, Z16-Z22 and Z25 (row i, vector pair p: number
// 4i+p in that list); Z8-Z11 the rows' weights, Z12-Z15 the vector pairs
// (the BF16 kernels also Z23, Z24, Z28 and Z29, a second set of pairs,
// Z26 and Z27 for products and Z30 for bf16Widen<>).
//
// F16 takes one VFMADD231PS per (row, pair) and step; BF16 needs a
// VMULPS and a VADDPS (dotBF16 rounds the product), so its sixteen pairs
// of a step keep all four of Zen 5's vector pipes busy, and every other
// vector op of the step (widening, VINSERTF64X4, anything but a plain
// load) costs a quarter of a cycle more: the BF16 kernels are written to
// issue as few of them as they can, and to load each block's operands a
// block ahead of the arithmetic that needs them.

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

// HZZERO clears the sixteen accumulators.
#define HZZERO \
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
	HZZERO

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

// BF16 widening, as dotBF16's bf16(): VMOVDQU puts a row's eight BF16
// weights in the low words of a register and clears the rest, and VPERMW
// with bf16Widen<> moves weight k mod 8 into the high word of dword k and
// word 8 (a zero) into its low word: the eight weights as F32 in both
// halves, in one vector op where a broadcast's VPMOVZXWD and VPSLLD took
// two.
DATA bf16Widen<>+0(SB)/4, $0x00000008
DATA bf16Widen<>+4(SB)/4, $0x00010008
DATA bf16Widen<>+8(SB)/4, $0x00020008
DATA bf16Widen<>+12(SB)/4, $0x00030008
DATA bf16Widen<>+16(SB)/4, $0x00040008
DATA bf16Widen<>+20(SB)/4, $0x00050008
DATA bf16Widen<>+24(SB)/4, $0x00060008
DATA bf16Widen<>+28(SB)/4, $0x00070008
DATA bf16Widen<>+32(SB)/4, $0x00000008
DATA bf16Widen<>+36(SB)/4, $0x00010008
DATA bf16Widen<>+40(SB)/4, $0x00020008
DATA bf16Widen<>+44(SB)/4, $0x00030008
DATA bf16Widen<>+48(SB)/4, $0x00040008
DATA bf16Widen<>+52(SB)/4, $0x00050008
DATA bf16Widen<>+56(SB)/4, $0x00060008
DATA bf16Widen<>+60(SB)/4, $0x00070008
GLOBL bf16Widen<>(SB), RODATA|NOPTR, $64

// BF16WIDE loads the eight weights at addr into w (xw: its low 128 bits)
// as F32. Needs bf16Widen<> in Z30.
#define BF16WIDE(addr, xw, w) \
	VMOVDQU addr, xw; \
	VPERMW w, Z30, w

// BF16FIRST widens the first block of the four rows at SI.
#define BF16FIRST \
	BF16WIDE((SI), X8, Z8); \
	BF16WIDE((SI)(BX*1), X9, Z9); \
	BF16WIDE((SI)(BX*2), X10, Z10); \
	BF16WIDE((SI)(R10*1), X11, Z11)

// BF16PAIRS is HZPAIRS at byte offset off, into p0-p3 (y0-y3: their low
// halves).
#define BF16PAIRS(off, p0, y0, p1, y1, p2, y2, p3, y3) \
	VMOVUPS off(DI), y0; \
	VINSERTF64X4 $1, off(DI)(R9*1), p0, p0; \
	VMOVUPS off(DI)(R9*2), y1; \
	VINSERTF64X4 $1, off(DI)(R11*1), p1, p1; \
	VMOVUPS off(R12), y2; \
	VINSERTF64X4 $1, off(R12)(R9*1), p2, p2; \
	VMOVUPS off(R12)(R9*2), y3; \
	VINSERTF64X4 $1, off(R12)(R11*1), p3, p3

// BF16 step of one row (weights in w) against the pairs p0-p3: lane +=
// float32(w*x), a rounded product then a rounded add, as dotBF16.
#define BF16ROW(w, p0, p1, p2, p3, a0, a1, a2, a3) \
	VMULPS p0, w, Z26; \
	VADDPS Z26, a0, a0; \
	VMULPS p1, w, Z27; \
	VADDPS Z27, a1, a1; \
	VMULPS p2, w, Z26; \
	VADDPS Z26, a2, a2; \
	VMULPS p3, w, Z27; \
	VADDPS Z27, a3, a3

// BF16NEXT is the step of the four rows against the pairs p0-p3 that
// also widens each row's next block once the row is done with this one;
// the caller makes sure that there is a next block.
#define BF16NEXT(p0, p1, p2, p3) \
	BF16ROW(Z8, p0, p1, p2, p3, Z0, Z1, Z2, Z3); \
	BF16WIDE(16(SI), X8, Z8); \
	BF16ROW(Z9, p0, p1, p2, p3, Z4, Z5, Z6, Z7); \
	BF16WIDE(16(SI)(BX*1), X9, Z9); \
	BF16ROW(Z10, p0, p1, p2, p3, Z16, Z17, Z18, Z19); \
	BF16WIDE(16(SI)(BX*2), X10, Z10); \
	BF16ROW(Z11, p0, p1, p2, p3, Z20, Z21, Z22, Z25); \
	BF16WIDE(16(SI)(R10*1), X11, Z11); \
	ADDQ $16, SI

// BF16STEP is BF16NEXT with the vectors read at DI and R12: it loads the
// next block's pairs into q0-q3 first, then moves on a block.
#define BF16STEP(p0, p1, p2, p3, q0, y0, q1, y1, q2, y2, q3, y3) \
	BF16PAIRS(32, q0, y0, q1, y1, q2, y2, q3, y3); \
	BF16NEXT(p0, p1, p2, p3); \
	ADDQ $32, DI; \
	ADDQ $32, R12

// BF16LAST is the step of the last block, with nothing more to load.
#define BF16LAST(p0, p1, p2, p3) \
	BF16ROW(Z8, p0, p1, p2, p3, Z0, Z1, Z2, Z3); \
	BF16ROW(Z9, p0, p1, p2, p3, Z4, Z5, Z6, Z7); \
	BF16ROW(Z10, p0, p1, p2, p3, Z16, Z17, Z18, Z19); \
	BF16ROW(Z11, p0, p1, p2, p3, Z20, Z21, Z22, Z25)

// BF16KEEP stores the pairs p0-p3 at DX, for gemmBF16ZRows's other
// tiles, and moves DX on a block.
#define BF16KEEP(p0, p1, p2, p3) \
	VMOVUPS p0, (DX); \
	VMOVUPS p1, 64(DX); \
	VMOVUPS p2, 128(DX); \
	VMOVUPS p3, 192(DX); \
	ADDQ $256, DX

// BF16KEPT loads the pairs that BF16KEEP stored at DI into Z12-Z15.
#define BF16KEPT \
	VMOVUPS (DI), Z12; \
	VMOVUPS 64(DI), Z13; \
	VMOVUPS 128(DI), Z14; \
	VMOVUPS 192(DI), Z15

// HZSUMS stores the sixteen accumulators' sums, the sum of row i and
// vector k at AX + 4*i + k*R13. Clobbers AX, CX.
#define HZSUMS \
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

#define HZSTORE \
	MOVQ dst+40(FP), AX; \
	MOVQ dstride+48(FP), R13; \
	HZSUMS

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
// nblk > 0. The pairs alternate between Z12-Z15 and Z23, Z24, Z28, Z29
// (a block's pairs are read from one set while the next block's arrive in
// the other), so the loop takes two blocks a turn.
TEXT ·gemmBF16Z4x8(SB), NOSPLIT, $0-56
	HZINIT
	VMOVDQU32 bf16Widen<>(SB), Z30
	BF16FIRST
	BF16PAIRS(0, Z12, Y12, Z13, Y13, Z14, Y14, Z15, Y15)

	// CX blocks are left, the first one's pairs in Z12-Z15.
bf16z48loop:
	CMPQ CX, $3
	JLT bf16z48tail
	BF16STEP(Z12, Z13, Z14, Z15, Z23, Y23, Z24, Y24, Z28, Y28, Z29, Y29)
	BF16STEP(Z23, Z24, Z28, Z29, Z12, Y12, Z13, Y13, Z14, Y14, Z15, Y15)
	SUBQ $2, CX
	JMP bf16z48loop

bf16z48tail:
	CMPQ CX, $2
	JLT bf16z48one
	BF16STEP(Z12, Z13, Z14, Z15, Z23, Y23, Z24, Y24, Z28, Y28, Z29, Y29)
	BF16LAST(Z23, Z24, Z28, Z29)
	JMP bf16z48done

bf16z48one:
	BF16LAST(Z12, Z13, Z14, Z15)

bf16z48done:
	HZSTORE
	VZEROUPPER
	RET

// func gemmBF16ZRows(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int, nrows int)
// 0 < nblk <= bf16ZKeepBlocks (128), nrows >= 4: gemmBF16Z4x8 on every
// tile of rows 0..nrows-1 (the last tile moved back to end at row
// nrows-1) against the same eight vectors. The first tile is
// gemmBF16Z4x8's loop, which also stores each block's four pairs in the
// frame as it loads them (256 bytes a block, 64 more to align them); the
// other tiles load them from there, in one plain load a pair where
// BF16PAIRS takes a load and a VINSERTF64X4, which leaves the four VPERMW
// as the only vector ops of a step besides the arithmetic. With two tiles
// the stores cost more than the inserts they save; up to 1024 columns
// (32 KiB of pairs, which stay in the L1 cache with a tile's rows) it is
// 3% faster than gemmBF16Z4x8 with four tiles and 6% with eight (the
// 32-row chunks MatMul gives it there).
TEXT ·gemmBF16ZRows(SB), 0, $32832-64
	HZINIT
	LEAQ 63(SP), R8
	ANDQ $~63, R8
	MOVQ R8, DX
	VMOVDQU32 bf16Widen<>(SB), Z30
	BF16FIRST
	BF16PAIRS(0, Z12, Y12, Z13, Y13, Z14, Y14, Z15, Y15)

bf16rfirst:
	CMPQ CX, $3
	JLT bf16rfirsttail
	BF16KEEP(Z12, Z13, Z14, Z15)
	BF16STEP(Z12, Z13, Z14, Z15, Z23, Y23, Z24, Y24, Z28, Y28, Z29, Y29)
	BF16KEEP(Z23, Z24, Z28, Z29)
	BF16STEP(Z23, Z24, Z28, Z29, Z12, Y12, Z13, Y13, Z14, Y14, Z15, Y15)
	SUBQ $2, CX
	JMP bf16rfirst

bf16rfirsttail:
	CMPQ CX, $2
	JLT bf16rfirstone
	BF16KEEP(Z12, Z13, Z14, Z15)
	BF16STEP(Z12, Z13, Z14, Z15, Z23, Y23, Z24, Y24, Z28, Y28, Z29, Y29)
	BF16KEEP(Z23, Z24, Z28, Z29)
	BF16LAST(Z23, Z24, Z28, Z29)
	JMP bf16rfirstdone

bf16rfirstone:
	BF16KEEP(Z12, Z13, Z14, Z15)
	BF16LAST(Z12, Z13, Z14, Z15)

bf16rfirstdone:
	HZSTORE

	// The other tiles: R11 the tile's first row, R12 nrows, R8 the pairs.
	XORQ R11, R11
	MOVQ nrows+56(FP), R12

bf16rtile:
	ADDQ $4, R11
	CMPQ R11, R12
	JGE bf16rdone
	LEAQ -4(R12), AX
	CMPQ R11, AX
	CMOVQGT AX, R11
	MOVQ R11, SI
	IMULQ BX, SI
	ADDQ w+0(FP), SI
	MOVQ R8, DI
	MOVQ nblk+32(FP), CX
	HZZERO
	BF16FIRST

bf16rloop:
	DECQ CX
	JZ bf16rlast
	BF16KEPT
	BF16NEXT(Z12, Z13, Z14, Z15)
	ADDQ $256, DI
	JMP bf16rloop

bf16rlast:
	BF16KEPT
	BF16LAST(Z12, Z13, Z14, Z15)
	MOVQ dst+40(FP), AX
	LEAQ (AX)(R11*4), AX
	HZSUMS
	JMP bf16rtile

bf16rdone:
	VZEROUPPER
	RET
