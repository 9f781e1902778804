#include "textflag.h"
#include "vnnitile_amd64.h"

// The tile kernels of vnni_amd64.s in 256-bit registers, for Zen 4
// (useVnniYmm). Zen 4 runs each 512-bit operation as two 256-bit halves,
// so a zmm register of two (row, vector) pairs costs what two ymm
// registers of one pair each cost; what the ymm form saves is the
// broadcasts: vnni_amd64.s loads each vector's quants and corrections into
// both halves of a zmm register (VBROADCASTI64X4) for every row pair, and
// these kernels load them once into a ymm register that serves both rows.
// On a Zen 4 with the operands in L1 (BenchmarkVNNIKernels, three runs),
// ps per multiply-add, zmm then ymm: Q8_0 tiles of 2, 3, 4 and 8 vectors
// 24.3-25.8 / 21.5-22.4, 22.0-22.2 / 16.5-16.6, 20.5-21.1 / 16.3-18.7,
// 18.8-19.2 / 14.4-16.3; W4A8 tiles of 2, 3, 4 and 8 29.3-30.1 /
// 26.8-27.7, 25.5-25.8 / 21.1-22.1, 23.9-24.0 / 18.7-19.4, 20.2-20.4 /
// 15.3-15.8 (the W4A8 tiles also widen their weights more cheaply; see
// their section). The one-vector kernels stay zmm: ymm forms of them ran
// some 10% faster in L1 but no faster on a decode step, whose weights come
// from memory.
//
// Everything else is vnni_amd64.s's: the packed activations (packVNNI),
// the unsigned weights and the corrections, the lane steps lane =
// fma(d, float32(isum), lane) with d the weight's scale times the
// vector's, and hsum8's order at the end, so the same bits as the zmm
// kernels and the plain-Go twins. The signatures are the zmm tiles' (rows
// A and B = A + rstride, npairs pairs), so vnniTileRows drives either.
//
// Registers: vnnitile_amd64.h's frame, R14 f16Table, AX and R13
// scratch; Y0-Y15 the accumulators (vector k: Y(2k) row A, Y(2k+1) row
// B), Y16/Y17 the rows' unsigned weights, Y18/Y19 their scales, Y20-Y25
// scratch, Y31 bytes 0x80.

// YHSUM stores hsum8 of acc's eight lanes at addr: ((l0+l4) + (l2+l6)) +
// ((l1+l5) + (l3+l7)), operand for operand as VHSUM. Clobbers X22, X23.
#define YHSUM(acc, accx, addr) \
	VEXTRACTF32X4 $1, acc, X22; \
	VADDPS X22, accx, X22; \
	VPERMILPS $0x4E, X22, X23; \
	VADDPS X23, X22, X22; \
	VMOVSHDUP X22, X23; \
	VADDSS X23, X22, X22; \
	VMOVSS X22, addr

// YSTORE stores vector k's two sums (rows A and B, at AX and AX+R10) and
// moves AX on to the next vector's outputs.
#define YSTORE(a, ax, b, bx) \
	YHSUM(a, ax, (AX)); \
	YHSUM(b, bx, (AX)(R10*1)); \
	ADDQ R9, AX

#define YTILEINIT \
	VTILEARGS; \
	MOVQ ·f16Table(SB), R14; \
	MOVL $0x80, AX; \
	VPBROADCASTB AX, Y31

#define YZERO(a, b) \
	VPXORD a, a, a; \
	VPXORD b, b, b

// YQ8ROWS readies block (SI) of rows A and B = (SI)(R8): Y16/Y17 their
// quants XOR 0x80, Y18/Y19 their F16 scales as F32 (f16Table) in every
// lane. It prefetches both streams 2048 bytes (vnni_amd64.s's VPREFETCH)
// ahead into L2.
#define YQ8ROWS \
	PREFETCHT1 2048(SI); \
	PREFETCHT1 2048(SI)(R8*1); \
	MOVWLZX (SI), AX; \
	MOVWLZX (SI)(R8*1), R13; \
	VBROADCASTSS (R14)(AX*4), Y18; \
	VBROADCASTSS (R14)(R13*4), Y19; \
	VPXORD 2(SI), Y31, Y16; \
	VPXORD 2(SI)(R8*1), Y31, Y17

// YVEC adds one vector of the group (quants at q(DI), corrections at
// c(DI), scale at d(DI)) into accA (row A) and accB (row B).
#define YVEC(q, c, d, accA, accB) \
	VMOVDQU32 q(DI), Y20; \
	VMOVDQU32 c(DI), Y21; \
	VMOVDQA32 Y21, Y22; \
	VPDPBUSD Y20, Y16, Y21; \
	VPDPBUSD Y20, Y17, Y22; \
	VCVTDQ2PS Y21, Y21; \
	VCVTDQ2PS Y22, Y22; \
	VMULPS.BCST d(DI), Y18, Y23; \
	VMULPS.BCST d(DI), Y19, Y24; \
	VFMADD231PS Y21, Y23, accA; \
	VFMADD231PS Y22, Y24, accB

#define YQ8NEXT(stride) \
	ADDQ $34, SI; \
	ADDQ $stride, DI; \
	DECQ CX

// func q8YmmTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·q8YmmTile8(SB), NOSPLIT, $0-80
	YTILEINIT

yq8t8row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)
	YZERO(Y6, Y7)
	YZERO(Y8, Y9)
	YZERO(Y10, Y11)
	YZERO(Y12, Y13)
	YZERO(Y14, Y15)

yq8t8loop:
	YQ8ROWS
	YVEC(0, 256, 512, Y0, Y1)
	YVEC(32, 288, 516, Y2, Y3)
	YVEC(64, 320, 520, Y4, Y5)
	YVEC(96, 352, 524, Y6, Y7)
	YVEC(128, 384, 528, Y8, Y9)
	YVEC(160, 416, 532, Y10, Y11)
	YVEC(192, 448, 536, Y12, Y13)
	YVEC(224, 480, 540, Y14, Y15)
	YQ8NEXT(544)
	JNZ yq8t8loop

	MOVQ DX, AX
	YSTORE(Y0, X0, Y1, X1)
	YSTORE(Y2, X2, Y3, X3)
	YSTORE(Y4, X4, Y5, X5)
	YSTORE(Y6, X6, Y7, X7)
	YSTORE(Y8, X8, Y9, X9)
	YSTORE(Y10, X10, Y11, X11)
	YSTORE(Y12, X12, Y13, X13)
	YSTORE(Y14, X14, Y15, X15)
	VTILENEXT
	JNZ yq8t8row
	VZEROUPPER
	RET

// func q8YmmTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 4). npairs > 0, nblk > 0.
TEXT ·q8YmmTile4(SB), NOSPLIT, $0-80
	YTILEINIT

yq8t4row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)
	YZERO(Y6, Y7)

yq8t4loop:
	YQ8ROWS
	YVEC(0, 128, 256, Y0, Y1)
	YVEC(32, 160, 260, Y2, Y3)
	YVEC(64, 192, 264, Y4, Y5)
	YVEC(96, 224, 268, Y6, Y7)
	YQ8NEXT(272)
	JNZ yq8t4loop

	MOVQ DX, AX
	YSTORE(Y0, X0, Y1, X1)
	YSTORE(Y2, X2, Y3, X3)
	YSTORE(Y4, X4, Y5, X5)
	YSTORE(Y6, X6, Y7, X7)
	VTILENEXT
	JNZ yq8t4row
	VZEROUPPER
	RET

// func q8YmmTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// The first three vectors of a group of s = 4 (used = 3). npairs > 0,
// nblk > 0.
TEXT ·q8YmmTile3(SB), NOSPLIT, $0-80
	YTILEINIT

yq8t3row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)

yq8t3loop:
	YQ8ROWS
	YVEC(0, 128, 256, Y0, Y1)
	YVEC(32, 160, 260, Y2, Y3)
	YVEC(64, 192, 264, Y4, Y5)
	YQ8NEXT(272)
	JNZ yq8t3loop

	MOVQ DX, AX
	YSTORE(Y0, X0, Y1, X1)
	YSTORE(Y2, X2, Y3, X3)
	YSTORE(Y4, X4, Y5, X5)
	VTILENEXT
	JNZ yq8t3row
	VZEROUPPER
	RET

// func q8YmmTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·q8YmmTile2(SB), NOSPLIT, $0-80
	YTILEINIT

yq8t2row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)

yq8t2loop:
	YQ8ROWS
	YVEC(0, 64, 128, Y0, Y1)
	YVEC(32, 96, 132, Y2, Y3)
	YQ8NEXT(136)
	JNZ yq8t2loop

	MOVQ DX, AX
	YSTORE(Y0, X0, Y1, X1)
	YSTORE(Y2, X2, Y3, X3)
	VTILENEXT
	JNZ yq8t2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8 tiles

// The W4A8 tiles widen each block's weights and pick its lane scales with
// fewer operations than vnni_amd64.s's (with its setup cut to the bare
// loads, its tile of four ran some 35% faster, so the setup is worth
// sparing): the scales come from a table (nvScale256: UE4M3 * 2^-8 by
// byte, the NaN code 0x7F as 0, as NVSCALES makes them), broadcast into
// the lanes of their sub-block, and the nibbles index VPERMB's 32-byte
// table directly, which ignores the bits above the fifth (AVX-512 VBMI),
// so no mask is needed before the lookup.

// ynvTab: 128 + ggml's doubled E2M1 values (kvalues_fp4), twice over
// (VPERMB ymm takes five index bits; bit 4 is the neighbouring nibble's).
DATA ynvTab<>+0(SB)/8, $0x8c88868483828180
DATA ynvTab<>+8(SB)/8, $0x74787a7c7d7e7f80
DATA ynvTab<>+16(SB)/8, $0x8c88868483828180
DATA ynvTab<>+24(SB)/8, $0x74787a7c7d7e7f80
GLOBL ynvTab<>(SB), RODATA|NOPTR, $32

// ynvShift: VPSRLVW counts, 0 for the low 128 bits (the low nibbles), 4
// for the high (the high nibbles; what comes down from the byte above
// lands in bits 4-7, of which VPERMB reads only bit 4, and the table's
// second copy makes that bit irrelevant).
DATA ynvShift<>+0(SB)/8, $0
DATA ynvShift<>+8(SB)/8, $0
DATA ynvShift<>+16(SB)/8, $0x0004000400040004
DATA ynvShift<>+24(SB)/8, $0x0004000400040004
GLOBL ynvShift<>(SB), RODATA|NOPTR, $32

// Registers of the W4A8 tiles: Y0-Y15 the accumulators (vector k: Y(2k)
// row A, Y(2k+1) row B); Y16, Y17 row A's unsigned weights of halves 0
// and 1 (in nibble order: low nibbles in the low 128 bits, high nibbles in
// the high), Y18, Y19 row B's; Y20, Y21 row A's lane scales of halves 0
// and 1, Y22, Y23 row B's (register lanes 0, 1, 4, 5 hold the half's
// first sub-block, 2, 3, 6, 7 its second, so that [s s s' s' s s s' s']);
// Y24-Y28 scratch; R14 nvScale256; K3 = 0xCC, the second sub-block's
// lanes.
#define YNVTILEINIT \
	VTILEARGS; \
	LEAQ ·nvScale256(SB), R14; \
	MOVL $0xCC, AX; \
	KMOVW AX, K3

// YNVSCALES broadcasts the scales of sub-blocks 2h and 2h+1 (bytes at
// s0 and s1) into the lane scales ls of half h.
#define YNVSCALES(s0, s1, ls) \
	MOVBLZX s0, AX; \
	VBROADCASTSS (R14)(AX*4), ls; \
	MOVBLZX s1, AX; \
	VBROADCASTSS (R14)(AX*4), K3, ls

// YNVWEIGHTS widens the 32 nibbles of the 16 code bytes at codes (one
// half block) into w.
#define YNVWEIGHTS(codes, w) \
	VBROADCASTI32X4 codes, w; \
	VPSRLVW ynvShift<>(SB), w, w; \
	VPERMB ynvTab<>(SB), w, w

// YNVROWS readies block (SI) of rows A and B = (SI)(R8): scale bytes at
// 0-3, the halves' codes at 4 and 20. It prefetches both streams
// 2048 bytes (vnni_amd64.s's VPREFETCH) ahead into L2.
#define YNVROWS \
	PREFETCHT1 2048(SI); \
	PREFETCHT1 2048(SI)(R8*1); \
	YNVSCALES(0(SI), 1(SI), Y20); \
	YNVSCALES(2(SI), 3(SI), Y21); \
	YNVSCALES(0(SI)(R8*1), 1(SI)(R8*1), Y22); \
	YNVSCALES(2(SI)(R8*1), 3(SI)(R8*1), Y23); \
	YNVWEIGHTS(4(SI), Y16); \
	YNVWEIGHTS(20(SI), Y17); \
	YNVWEIGHTS(4(SI)(R8*1), Y18); \
	YNVWEIGHTS(20(SI)(R8*1), Y19)

// YNVH adds one vector's half block (quants at q(DI), corrections at
// c(DI), d*128 at d(DI)) into accA and accB: wA, wB the rows' weights of
// the half, sA, sB their lane scales. Lane scale (UE4M3 * 2^-8) * (d *
// 128), both exact: dotNVFP4Q8's rounded UE4M3/2 * d.
#define YNVH(q, c, d, wA, wB, sA, sB, accA, accB) \
	VMOVDQU32 q(DI), Y24; \
	VMOVDQU32 c(DI), Y25; \
	VMOVDQA32 Y25, Y26; \
	VPDPBUSD Y24, wA, Y25; \
	VPDPBUSD Y24, wB, Y26; \
	VCVTDQ2PS Y25, Y25; \
	VCVTDQ2PS Y26, Y26; \
	VMULPS.BCST d(DI), sA, Y27; \
	VMULPS.BCST d(DI), sB, Y28; \
	VFMADD231PS Y25, Y27, accA; \
	VFMADD231PS Y26, Y28, accB

#define YNVH0(q, c, d, accA, accB) YNVH(q, c, d, Y16, Y18, Y20, Y22, accA, accB)
#define YNVH1(q, c, d, accA, accB) YNVH(q, c, d, Y17, Y19, Y21, Y23, accA, accB)

// YNVHSUM stores the sum of acc's lanes, which hold twin lanes 0 1 4 5 2
// 3 6 7, at addr: ((r0+r2) + (r4+r6)) + ((r1+r3) + (r5+r7)), as VHSUMNV.
// Clobbers X16, X17.
#define YNVHSUM(acc, addr) \
	VPERMILPS $0x4E, acc, Y16; \
	VADDPS Y16, acc, Y16; \
	VEXTRACTF32X4 $1, Y16, X17; \
	VADDPS X17, X16, X17; \
	VMOVSHDUP X17, X16; \
	VADDSS X16, X17, X17; \
	VMOVSS X17, addr

#define YNVSTORE(a, b) \
	YNVHSUM(a, (AX)); \
	YNVHSUM(b, (AX)(R10*1)); \
	ADDQ R9, AX

#define YNVNEXT(stride) \
	ADDQ $36, SI; \
	ADDQ $stride, DI; \
	DECQ CX

// func nvYmmTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·nvYmmTile8(SB), NOSPLIT, $0-80
	YNVTILEINIT

ynvt8row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)
	YZERO(Y6, Y7)
	YZERO(Y8, Y9)
	YZERO(Y10, Y11)
	YZERO(Y12, Y13)
	YZERO(Y14, Y15)

ynvt8loop:
	YNVROWS
	YNVH0(0, 256, 512, Y0, Y1)
	YNVH0(32, 288, 516, Y2, Y3)
	YNVH0(64, 320, 520, Y4, Y5)
	YNVH0(96, 352, 524, Y6, Y7)
	YNVH0(128, 384, 528, Y8, Y9)
	YNVH0(160, 416, 532, Y10, Y11)
	YNVH0(192, 448, 536, Y12, Y13)
	YNVH0(224, 480, 540, Y14, Y15)
	YNVH1(544, 800, 1056, Y0, Y1)
	YNVH1(576, 832, 1060, Y2, Y3)
	YNVH1(608, 864, 1064, Y4, Y5)
	YNVH1(640, 896, 1068, Y6, Y7)
	YNVH1(672, 928, 1072, Y8, Y9)
	YNVH1(704, 960, 1076, Y10, Y11)
	YNVH1(736, 992, 1080, Y12, Y13)
	YNVH1(768, 1024, 1084, Y14, Y15)
	YNVNEXT(1088)
	JNZ ynvt8loop

	MOVQ DX, AX
	YNVSTORE(Y0, Y1)
	YNVSTORE(Y2, Y3)
	YNVSTORE(Y4, Y5)
	YNVSTORE(Y6, Y7)
	YNVSTORE(Y8, Y9)
	YNVSTORE(Y10, Y11)
	YNVSTORE(Y12, Y13)
	YNVSTORE(Y14, Y15)
	VTILENEXT
	JNZ ynvt8row
	VZEROUPPER
	RET

// func nvYmmTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 4). npairs > 0, nblk > 0.
TEXT ·nvYmmTile4(SB), NOSPLIT, $0-80
	YNVTILEINIT

ynvt4row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)
	YZERO(Y6, Y7)

ynvt4loop:
	YNVROWS
	YNVH0(0, 128, 256, Y0, Y1)
	YNVH0(32, 160, 260, Y2, Y3)
	YNVH0(64, 192, 264, Y4, Y5)
	YNVH0(96, 224, 268, Y6, Y7)
	YNVH1(272, 400, 528, Y0, Y1)
	YNVH1(304, 432, 532, Y2, Y3)
	YNVH1(336, 464, 536, Y4, Y5)
	YNVH1(368, 496, 540, Y6, Y7)
	YNVNEXT(544)
	JNZ ynvt4loop

	MOVQ DX, AX
	YNVSTORE(Y0, Y1)
	YNVSTORE(Y2, Y3)
	YNVSTORE(Y4, Y5)
	YNVSTORE(Y6, Y7)
	VTILENEXT
	JNZ ynvt4row
	VZEROUPPER
	RET

// func nvYmmTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// The first three vectors of a group of s = 4 (used = 3). npairs > 0,
// nblk > 0.
TEXT ·nvYmmTile3(SB), NOSPLIT, $0-80
	YNVTILEINIT

ynvt3row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)
	YZERO(Y4, Y5)

ynvt3loop:
	YNVROWS
	YNVH0(0, 128, 256, Y0, Y1)
	YNVH0(32, 160, 260, Y2, Y3)
	YNVH0(64, 192, 264, Y4, Y5)
	YNVH1(272, 400, 528, Y0, Y1)
	YNVH1(304, 432, 532, Y2, Y3)
	YNVH1(336, 464, 536, Y4, Y5)
	YNVNEXT(544)
	JNZ ynvt3loop

	MOVQ DX, AX
	YNVSTORE(Y0, Y1)
	YNVSTORE(Y2, Y3)
	YNVSTORE(Y4, Y5)
	VTILENEXT
	JNZ ynvt3row
	VZEROUPPER
	RET

// func nvYmmTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·nvYmmTile2(SB), NOSPLIT, $0-80
	YNVTILEINIT

ynvt2row:
	VTILEROW
	YZERO(Y0, Y1)
	YZERO(Y2, Y3)

ynvt2loop:
	YNVROWS
	YNVH0(0, 64, 128, Y0, Y1)
	YNVH0(32, 96, 132, Y2, Y3)
	YNVH1(136, 200, 264, Y0, Y1)
	YNVH1(168, 232, 268, Y2, Y3)
	YNVNEXT(272)
	JNZ ynvt2loop

	MOVQ DX, AX
	YNVSTORE(Y0, Y1)
	YNVSTORE(Y2, Y3)
	VTILENEXT
	JNZ ynvt2row
	VZEROUPPER
	RET
