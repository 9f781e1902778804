#include "textflag.h"
#include "vnnitile_amd64.h"

// AVX-512 kernels (F, BW, VL and VNNI) for the int8 products: Q8_0
// weights, and NVFP4 weights with Q8_0 activations (W4A8), each (row,
// vector) pair keeping the eight lane accumulators of its plain-Go twin
// (dotQ8, dotNVFP4Q8) in the same order, so the same bits. A 512-bit
// register holds two such pairs side by side: two rows of one vector, row
// A's lanes in the low half and row B's in the high.
//
// The integer sums come from VPDPBUSD, which multiplies unsigned bytes by
// signed bytes and adds each group of four products to a dword. The
// weights are the unsigned side, offset by 128 (Q8_0: XOR 0x80; NVFP4: a
// table of 128 + the doubled E2M1 values), the activation quants the
// signed side as they are, and the accumulator starts at the correction,
// -128 times the sum of each four quants, which packVNNI stores with the
// quants: it belongs to the activation block and serves every row. Every
// partial sum stays far inside int32, so each dword is the exact integer
// sum of the four products: twin lane k's isum, -128 quants included.
// Then, as the twins: lane = fma(d, float32(isum), lane), d the product of
// the two scales rounded to F32 (the weight's scale first, as the AVX2
// kernels have it). At the end VHSUM adds each group of eight lanes in
// hsum8's order.
//
// Activations come packed per group of s vectors (1, 2, 4 or 8), block
// after block (vnniActBytes = 68 bytes per vector and Q8_0 block): the s
// vectors' 32 quants, then their s times eight corrections (dwords), then
// their s scales d (NVFP4: d*128, and the quants in the weights' nibble
// order). Padding vectors are zero throughout and are not computed: the
// tiles of three vectors read a group of four.
//
// Per (row pair, block) a Q8_0 tile spends three instructions on the
// weights (an insert for the second row, the XOR, a merged broadcast of
// the second row's scale, which f16Table turns into F32 without a
// conversion) and then four per vector and 32 quants: VPDPBUSD, VCVTDQ2PS,
// VMULPS (the vector's scale broadcast from memory) and VFMADD231PS, all
// of which run on either 512-bit port, and no shuffle. (The kernels before
// this layout took the quants as the unsigned side, so they computed the
// correction of each weight block, converted its F16 scale and spread
// the vectors' scales over the halves with VPERMPS: some 28 instructions
// per row pair and four vectors where these take 19.)

// VHSUM stores hsum8 of lanes 0-7 of acc at o0 and of lanes 8-15 at o1:
// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), operand for operand as
// gemm_amd64.s's HSUM8. Clobbers Z23, Z24.
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

// VHSUMNV is VHSUM for register lanes holding twin lanes 0 1 4 5 2 3 6 7
// (the NVFP4 kernels): ((r0+r2) + (r4+r6)) + ((r1+r3) + (r5+r7)), hsum8
// in the twin's order.
#define VHSUMNV(acc, o0, o1) \
	VPERMILPS $0x4E, acc, Z24; \
	VADDPS Z24, acc, Z24; \
	VSHUFF32X4 $0xB1, Z24, Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSHDUP Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSS X24, o0; \
	VEXTRACTF32X4 $2, Z24, X23; \
	VMOVSS X23, o1

// VPREFETCH is how far ahead the kernels prefetch their weight streams
// (the tiles into L2, PREFETCHT1; the one-vector kernels into L1). The
// tiles spend more time on each block than the hardware prefetchers
// expect of a stream, and those stop at every 4 KiB page. With weights
// from memory (BenchmarkVNNIStream, Emerald Rapids) the tiles of four and
// eight vectors ran some 1.2-1.35x faster with it, the one-vector kernels
// some 1.1x; with weights in L3 the tiles gain nothing and the one-vector
// kernels lose a few percent.
#define VPREFETCH 2048

// The tile kernels' frame is vnnitile_amd64.h's (VTILEARGS, VTILEROW,
// VTILENEXT); AX and R13 are scratch, and K1 = 0xFF00 selects the high
// half's dwords (row B).
#define VTILEINIT \
	VTILEARGS; \
	MOVL $0xFF00, AX; \
	KMOVW AX, K1

#define ZERO2 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1

#define ZERO3 \
	ZERO2; \
	VPXORD Z2, Z2, Z2

#define ZERO4 \
	ZERO3; \
	VPXORD Z3, Z3, Z3

#define ZERO8 \
	ZERO4; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7

// VSTORE stores acc's sums (rows A and B of one vector, at AX) and moves
// AX on to the next vector's outputs.
#define VSTORE(hsum, acc) \
	hsum(acc, (AX), (AX)(R10*1)); \
	ADDQ R9, AX

// VVEC adds one vector of the group (quants at q(DI), corrections at
// c(DI), scale at d(DI)) into acc for rows A and B: w the rows' unsigned
// weights, s their scales (each row's in its half), so that lane =
// fma(s*d, isum, lane). Clobbers tq, tc, td.
#define VVEC(q, c, d, w, s, acc, tq, tc, td) \
	VBROADCASTI64X4 q(DI), tq; \
	VBROADCASTI64X4 c(DI), tc; \
	VPDPBUSD tq, w, tc; \
	VMULPS.BCST d(DI), s, td; \
	VCVTDQ2PS tc, tc; \
	VFMADD231PS tc, td, acc

// ---------------------------------------------------------------- Q8_0 tiles

// Q8TILEINIT is VTILEINIT plus R14 f16Table and Z31 bytes 0x80.
#define Q8TILEINIT \
	VTILEINIT; \
	MOVQ ·f16Table(SB), R14; \
	MOVL $0x80, AX; \
	VPBROADCASTB AX, Z31

// Q8ROWS readies block (SI) of rows A and B = (SI)(R8): Z8 their F16
// scales as F32 (f16Table), A's in lanes 0-7 and B's in 8-15, Z9 their
// quants XOR 0x80, A's in the low half and B's in the high. It prefetches
// both streams VPREFETCH bytes ahead into L2.
#define Q8ROWS \
	PREFETCHT1 VPREFETCH(SI); \
	PREFETCHT1 VPREFETCH(SI)(R8*1); \
	MOVWLZX (SI), AX; \
	MOVWLZX (SI)(R8*1), R13; \
	VBROADCASTSS (R14)(AX*4), Z8; \
	VBROADCASTSS (R14)(R13*4), K1, Z8; \
	VMOVDQU 2(SI), Y9; \
	VINSERTI64X4 $1, 2(SI)(R8*1), Z9, Z9; \
	VPXORD Z31, Z9, Z9

// Q8VEC(k, s, acc) adds vector k of a group of s into acc.
#define Q8VEC(q, c, d, acc, tq, tc, td) VVEC(q, c, d, Z9, Z8, acc, tq, tc, td)

#define Q8NEXT(stride) \
	ADDQ $34, SI; \
	ADDQ $stride, DI; \
	DECQ CX

// func q8VnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·q8VnniTile8(SB), NOSPLIT, $0-80
	Q8TILEINIT

q8v8row:
	VTILEROW
	ZERO8

q8v8loop:
	Q8ROWS
	Q8VEC(0, 256, 512, Z0, Z10, Z11, Z12)
	Q8VEC(32, 288, 516, Z1, Z13, Z14, Z15)
	Q8VEC(64, 320, 520, Z2, Z16, Z17, Z18)
	Q8VEC(96, 352, 524, Z3, Z19, Z20, Z21)
	Q8VEC(128, 384, 528, Z4, Z10, Z11, Z12)
	Q8VEC(160, 416, 532, Z5, Z13, Z14, Z15)
	Q8VEC(192, 448, 536, Z6, Z16, Z17, Z18)
	Q8VEC(224, 480, 540, Z7, Z19, Z20, Z21)
	Q8NEXT(544)
	JNZ q8v8loop

	MOVQ DX, AX
	VSTORE(VHSUM, Z0)
	VSTORE(VHSUM, Z1)
	VSTORE(VHSUM, Z2)
	VSTORE(VHSUM, Z3)
	VSTORE(VHSUM, Z4)
	VSTORE(VHSUM, Z5)
	VSTORE(VHSUM, Z6)
	VSTORE(VHSUM, Z7)
	VTILENEXT
	JNZ q8v8row
	VZEROUPPER
	RET

// func q8VnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 4). npairs > 0, nblk > 0.
TEXT ·q8VnniTile4(SB), NOSPLIT, $0-80
	Q8TILEINIT

q8v4row:
	VTILEROW
	ZERO4

q8v4loop:
	Q8ROWS
	Q8VEC(0, 128, 256, Z0, Z10, Z11, Z12)
	Q8VEC(32, 160, 260, Z1, Z13, Z14, Z15)
	Q8VEC(64, 192, 264, Z2, Z16, Z17, Z18)
	Q8VEC(96, 224, 268, Z3, Z19, Z20, Z21)
	Q8NEXT(272)
	JNZ q8v4loop

	MOVQ DX, AX
	VSTORE(VHSUM, Z0)
	VSTORE(VHSUM, Z1)
	VSTORE(VHSUM, Z2)
	VSTORE(VHSUM, Z3)
	VTILENEXT
	JNZ q8v4row
	VZEROUPPER
	RET

// func q8VnniTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// The first three vectors of a group of s = 4 (used = 3). npairs > 0,
// nblk > 0.
TEXT ·q8VnniTile3(SB), NOSPLIT, $0-80
	Q8TILEINIT

q8v3row:
	VTILEROW
	ZERO3

q8v3loop:
	Q8ROWS
	Q8VEC(0, 128, 256, Z0, Z10, Z11, Z12)
	Q8VEC(32, 160, 260, Z1, Z13, Z14, Z15)
	Q8VEC(64, 192, 264, Z2, Z16, Z17, Z18)
	Q8NEXT(272)
	JNZ q8v3loop

	MOVQ DX, AX
	VSTORE(VHSUM, Z0)
	VSTORE(VHSUM, Z1)
	VSTORE(VHSUM, Z2)
	VTILENEXT
	JNZ q8v3row
	VZEROUPPER
	RET

// func q8VnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·q8VnniTile2(SB), NOSPLIT, $0-80
	Q8TILEINIT

q8v2row:
	VTILEROW
	ZERO2

q8v2loop:
	Q8ROWS
	Q8VEC(0, 64, 128, Z0, Z10, Z11, Z12)
	Q8VEC(32, 96, 132, Z1, Z13, Z14, Z15)
	Q8NEXT(136)
	JNZ q8v2loop

	MOVQ DX, AX
	VSTORE(VHSUM, Z0)
	VSTORE(VHSUM, Z1)
	VTILENEXT
	JNZ q8v2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q8_0, one vector

// Q8VROWS adds the current block of two rows (two of the four streams,
// scales at d1 and d2, quants at q1 and q2) into acc = [row 1 | row 2].
// Z22: the vector's quants in both halves, Z21 their corrections, Z20 its
// scale in every lane; K1 = 0xFF00 selects the high half's words.
#define Q8VROWS(d1, q1, d2, q2, acc) \
	VMOVDQU32 q1, Y28; \
	VINSERTI64X4 $1, q2, Z28, Z28; \
	VPBROADCASTW d1, Y30; \
	VPBROADCASTW d2, K1, Y30; \
	VPXORD Z31, Z28, Z28; \
	VCVTPH2PS Y30, Z30; \
	VMOVDQA32 Z21, Z24; \
	VPDPBUSD Z22, Z28, Z24; \
	VMULPS Z20, Z30, Z30; \
	VCVTDQ2PS Z24, Z24; \
	VFMADD231PS Z24, Z30, acc

// func q8VnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)
// One vector (a group of s = 1) against four streams of rows: rows A, B,
// C, D at row, row+qstride, row+2*qstride, row+3*qstride, nrows of each,
// advancing by rb; row A's output at dst, B's dq bytes after it, C's 2*dq,
// D's 3*dq. nrows > 0, nblk > 0.
TEXT ·q8VnniVec4(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), R11
	MOVQ qstride+16(FP), R8
	MOVQ nrows+24(FP), BX
	MOVQ act+32(FP), R12
	MOVQ nblk+40(FP), R13
	MOVQ dst+48(FP), DX
	MOVQ dq+56(FP), R10
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R14
	MOVL $0x80, AX
	VPBROADCASTB AX, Z31
	MOVL $0xFF00, AX
	KMOVW AX, K1

q8vecrow:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

q8vecloop:
	PREFETCHT0 VPREFETCH(SI)
	PREFETCHT0 VPREFETCH(SI)(R8*1)
	PREFETCHT0 VPREFETCH(SI)(R8*2)
	PREFETCHT0 VPREFETCH(SI)(R9*1)
	VBROADCASTI64X4 0(DI), Z22
	VBROADCASTI64X4 32(DI), Z21
	VBROADCASTSS 64(DI), Z20
	Q8VROWS((SI), 2(SI), (SI)(R8*2), 2(SI)(R8*2), Z0)
	Q8VROWS((SI)(R8*1), 2(SI)(R8*1), (SI)(R9*1), 2(SI)(R9*1), Z1)
	ADDQ $34, SI
	ADDQ $68, DI
	DECQ CX
	JNZ q8vecloop

	VHSUM(Z0, (DX), (DX)(R10*2))
	VHSUM(Z1, (DX)(R10*1), (DX)(R14*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ BX
	JNZ q8vecrow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8

// 128 + ggml's doubled E2M1 values (kvalues_fp4), for VPSHUFB: the
// weights as the unsigned side.
DATA vnniE2M1U<>+0(SB)/8, $0x8c88868483828180
DATA vnniE2M1U<>+8(SB)/8, $0x74787a7c7d7e7f80
GLOBL vnniE2M1U<>(SB), RODATA|NOPTR, $16

// VPSRLVW counts: 0 for the low 128 bits of each 256, 4 for the high.
DATA vnniShift<>+0(SB)/8, $0
DATA vnniShift<>+8(SB)/8, $0
DATA vnniShift<>+16(SB)/8, $0x0004000400040004
DATA vnniShift<>+24(SB)/8, $0x0004000400040004
GLOBL vnniShift<>(SB), RODATA|NOPTR, $32

DATA vnniW7F<>+0(SB)/8, $0x007f007f007f007f
DATA vnniW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL vnniW7F<>(SB), RODATA|NOPTR, $16

// VPERMPS indices: sub-block scales s0..s3 of one row (s4..s7 of a
// second row) to the lane scales of half 0, [s0 s0 s1 s1 s0 s0 s1 s1],
// and half 1, [s2 s2 s3 s3 s2 s2 s3 s3]: register lanes 0, 1, 4, 5 belong
// to the first sub-block of the half, 2, 3, 6, 7 to the second
// (nvfp4_amd64.s).
DATA vnniIdx0<>+0(SB)/8, $0x0000000000000000
DATA vnniIdx0<>+8(SB)/8, $0x0000000100000001
DATA vnniIdx0<>+16(SB)/8, $0x0000000000000000
DATA vnniIdx0<>+24(SB)/8, $0x0000000100000001
DATA vnniIdx0<>+32(SB)/8, $0x0000000400000004
DATA vnniIdx0<>+40(SB)/8, $0x0000000500000005
DATA vnniIdx0<>+48(SB)/8, $0x0000000400000004
DATA vnniIdx0<>+56(SB)/8, $0x0000000500000005
GLOBL vnniIdx0<>(SB), RODATA|NOPTR, $64
DATA vnniIdx1<>+0(SB)/8, $0x0000000200000002
DATA vnniIdx1<>+8(SB)/8, $0x0000000300000003
DATA vnniIdx1<>+16(SB)/8, $0x0000000200000002
DATA vnniIdx1<>+24(SB)/8, $0x0000000300000003
DATA vnniIdx1<>+32(SB)/8, $0x0000000600000006
DATA vnniIdx1<>+40(SB)/8, $0x0000000700000007
DATA vnniIdx1<>+48(SB)/8, $0x0000000600000006
DATA vnniIdx1<>+56(SB)/8, $0x0000000700000007
GLOBL vnniIdx1<>(SB), RODATA|NOPTR, $64

// NVSCALES turns the UE4M3 scale bytes in the low dwords of X9 into
// floats UE4M3 * 2^-8 in Y9 (eight bytes; four into X9), the NaN code
// 0x7F zeroed, as nvfp4_amd64.s's NVFP4SCALES. Clobbers X10.
#define NVSCALES \
	VPMOVZXBW X9, X9; \
	VPAND vnniW7F<>(SB), X9, X9; \
	VPCMPEQW vnniW7F<>(SB), X9, X10; \
	VPSLLW $7, X9, X9; \
	VPANDN X9, X10, X9; \
	VCVTPH2PS X9, Y9

// NVWEIGHTS widens the 32 nibbles in the 16 code bytes of one half block
// of each row, row A's in the low two 128-bit lanes of w and row B's in
// the high two, to the weights of the half block in nibble order: low
// nibbles in the low 128-bit lane of each half, high nibbles in the high
// lane, looked up in the table.
#define NVWEIGHTS(w, shift, low, tab) \
	VPSRLVW shift, w, w; \
	VPANDD low, w, w; \
	VPSHUFB w, tab, w

// The NVFP4 tiles: as the Q8_0 tiles, NVFP4 rows (36-byte blocks) against
// a group packed with nibble set: each NVFP4 block is two packed Q8_0
// blocks, one per half (sub-blocks 2h and 2h+1), s*68 bytes each.
// Registers: Z0-Z7 the accumulators; Z9, Z10 scratch; Z11, Z12 the lane
// scales UE4M3 * 2^-8 of halves 0 and 1, Z13, Z14 their unsigned weights
// (rows A and B in the two halves of each); Z15-Z20 scratch; Z25, Z26 the
// scale indices (vnniIdx1, vnniIdx0), Z28 the shift counts, Z29 bytes
// 0x0F, Z30 the table.
#define NVTILEINIT \
	VTILEINIT; \
	VBROADCASTI32X4 vnniE2M1U<>(SB), Z30; \
	MOVL $0x0f, AX; \
	VPBROADCASTB AX, Z29; \
	VBROADCASTI64X4 vnniShift<>(SB), Z28; \
	VMOVDQU32 vnniIdx0<>(SB), Z26; \
	VMOVDQU32 vnniIdx1<>(SB), Z25

// NVROWS readies block (SI) of rows A and B = (SI)(R8): scale bytes at
// 0, the halves' codes at 4 and 20. It prefetches both streams VPREFETCH
// bytes ahead into L2.
#define NVROWS \
	PREFETCHT1 VPREFETCH(SI); \
	PREFETCHT1 VPREFETCH(SI)(R8*1); \
	VMOVD (SI), X9; \
	VPINSRD $1, (SI)(R8*1), X9, X9; \
	NVSCALES; \
	VPERMPS Z9, Z26, Z11; \
	VPERMPS Z9, Z25, Z12; \
	VBROADCASTI32X4 4(SI), Z13; \
	VBROADCASTI32X4 4(SI)(R8*1), K1, Z13; \
	VBROADCASTI32X4 20(SI), Z14; \
	VBROADCASTI32X4 20(SI)(R8*1), K1, Z14; \
	NVWEIGHTS(Z13, Z28, Z29, Z30); \
	NVWEIGHTS(Z14, Z28, Z29, Z30)

// NVH0, NVH1 add vector k's half 0 or 1 (its packed block at q, c, d)
// into acc. Lane scale (UE4M3 * 2^-8) * (d * 128), both exact:
// dotNVFP4Q8's rounded UE4M3/2 * d.
#define NVH0(q, c, d, acc, tq, tc, td) VVEC(q, c, d, Z13, Z11, acc, tq, tc, td)
#define NVH1(q, c, d, acc, tq, tc, td) VVEC(q, c, d, Z14, Z12, acc, tq, tc, td)

#define NVNEXT(stride) \
	ADDQ $36, SI; \
	ADDQ $stride, DI; \
	DECQ CX

// func nvVnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·nvVnniTile8(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv8row:
	VTILEROW
	ZERO8

nvv8loop:
	NVROWS
	NVH0(0, 256, 512, Z0, Z15, Z16, Z17)
	NVH0(32, 288, 516, Z1, Z18, Z19, Z20)
	NVH0(64, 320, 520, Z2, Z15, Z16, Z17)
	NVH0(96, 352, 524, Z3, Z18, Z19, Z20)
	NVH0(128, 384, 528, Z4, Z15, Z16, Z17)
	NVH0(160, 416, 532, Z5, Z18, Z19, Z20)
	NVH0(192, 448, 536, Z6, Z15, Z16, Z17)
	NVH0(224, 480, 540, Z7, Z18, Z19, Z20)
	NVH1(544, 800, 1056, Z0, Z15, Z16, Z17)
	NVH1(576, 832, 1060, Z1, Z18, Z19, Z20)
	NVH1(608, 864, 1064, Z2, Z15, Z16, Z17)
	NVH1(640, 896, 1068, Z3, Z18, Z19, Z20)
	NVH1(672, 928, 1072, Z4, Z15, Z16, Z17)
	NVH1(704, 960, 1076, Z5, Z18, Z19, Z20)
	NVH1(736, 992, 1080, Z6, Z15, Z16, Z17)
	NVH1(768, 1024, 1084, Z7, Z18, Z19, Z20)
	NVNEXT(1088)
	JNZ nvv8loop

	MOVQ DX, AX
	VSTORE(VHSUMNV, Z0)
	VSTORE(VHSUMNV, Z1)
	VSTORE(VHSUMNV, Z2)
	VSTORE(VHSUMNV, Z3)
	VSTORE(VHSUMNV, Z4)
	VSTORE(VHSUMNV, Z5)
	VSTORE(VHSUMNV, Z6)
	VSTORE(VHSUMNV, Z7)
	VTILENEXT
	JNZ nvv8row
	VZEROUPPER
	RET

// func nvVnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 4). npairs > 0, nblk > 0.
TEXT ·nvVnniTile4(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv4row:
	VTILEROW
	ZERO4

nvv4loop:
	NVROWS
	NVH0(0, 128, 256, Z0, Z15, Z16, Z17)
	NVH0(32, 160, 260, Z1, Z18, Z19, Z20)
	NVH0(64, 192, 264, Z2, Z15, Z16, Z17)
	NVH0(96, 224, 268, Z3, Z18, Z19, Z20)
	NVH1(272, 400, 528, Z0, Z15, Z16, Z17)
	NVH1(304, 432, 532, Z1, Z18, Z19, Z20)
	NVH1(336, 464, 536, Z2, Z15, Z16, Z17)
	NVH1(368, 496, 540, Z3, Z18, Z19, Z20)
	NVNEXT(544)
	JNZ nvv4loop

	MOVQ DX, AX
	VSTORE(VHSUMNV, Z0)
	VSTORE(VHSUMNV, Z1)
	VSTORE(VHSUMNV, Z2)
	VSTORE(VHSUMNV, Z3)
	VTILENEXT
	JNZ nvv4row
	VZEROUPPER
	RET

// func nvVnniTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// The first three vectors of a group of s = 4 (used = 3). npairs > 0,
// nblk > 0.
TEXT ·nvVnniTile3(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv3row:
	VTILEROW
	ZERO3

nvv3loop:
	NVROWS
	NVH0(0, 128, 256, Z0, Z15, Z16, Z17)
	NVH0(32, 160, 260, Z1, Z18, Z19, Z20)
	NVH0(64, 192, 264, Z2, Z15, Z16, Z17)
	NVH1(272, 400, 528, Z0, Z18, Z19, Z20)
	NVH1(304, 432, 532, Z1, Z15, Z16, Z17)
	NVH1(336, 464, 536, Z2, Z18, Z19, Z20)
	NVNEXT(544)
	JNZ nvv3loop

	MOVQ DX, AX
	VSTORE(VHSUMNV, Z0)
	VSTORE(VHSUMNV, Z1)
	VSTORE(VHSUMNV, Z2)
	VTILENEXT
	JNZ nvv3row
	VZEROUPPER
	RET

// func nvVnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·nvVnniTile2(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv2row:
	VTILEROW
	ZERO2

nvv2loop:
	NVROWS
	NVH0(0, 64, 128, Z0, Z15, Z16, Z17)
	NVH0(32, 96, 132, Z1, Z18, Z19, Z20)
	NVH1(136, 200, 264, Z0, Z15, Z16, Z17)
	NVH1(168, 232, 268, Z1, Z18, Z19, Z20)
	NVNEXT(272)
	JNZ nvv2loop

	MOVQ DX, AX
	VSTORE(VHSUMNV, Z0)
	VSTORE(VHSUMNV, Z1)
	VTILENEXT
	JNZ nvv2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8, one vector

// NVVROWS adds the current block of two rows (two of the four streams, at
// a and c) into acc = [row a | row c], weights unsigned (the table, Z14).
// Z21, Z20: the vector's half-0 quants and corrections in both halves,
// Z19 its factor d*128 in every lane; Z18, Z17, Z16 the same for half 1.
// K1 = 0xFF00 selects the high half's dwords; Z26, Z25 vnniIdx0, vnniIdx1
// (two rows).
#define NVVROWS(a, a4, a20, c, c4, c20, acc) \
	VMOVD a, X9; \
	VPINSRD $1, c, X9, X9; \
	NVSCALES; \
	VPERMPS Z9, Z26, Z10; \
	VPERMPS Z9, Z25, Z11; \
	VBROADCASTI32X4 a4, Z28; \
	VBROADCASTI32X4 c4, K1, Z28; \
	VBROADCASTI32X4 a20, Z27; \
	VBROADCASTI32X4 c20, K1, Z27; \
	NVWEIGHTS(Z28, Z12, Z13, Z14); \
	NVWEIGHTS(Z27, Z12, Z13, Z14); \
	VMULPS Z19, Z10, Z10; \
	VMULPS Z16, Z11, Z11; \
	VMOVDQA32 Z20, Z24; \
	VMOVDQA32 Z17, Z22; \
	VPDPBUSD Z21, Z28, Z24; \
	VPDPBUSD Z18, Z27, Z22; \
	VCVTDQ2PS Z24, Z24; \
	VCVTDQ2PS Z22, Z22; \
	VFMADD231PS Z24, Z10, acc; \
	VFMADD231PS Z22, Z11, acc

// func nvVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)
// W4A8 for one vector against four streams of NVFP4 rows, as q8VnniVec4.
// nrows > 0, nblk > 0.
TEXT ·nvVnniVec4(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), R11
	MOVQ qstride+16(FP), R8
	MOVQ nrows+24(FP), BX
	MOVQ act+32(FP), R12
	MOVQ dst+48(FP), DX
	MOVQ dq+56(FP), R10
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R14
	VBROADCASTI32X4 vnniE2M1U<>(SB), Z14
	MOVL $0x0f, AX
	VPBROADCASTB AX, Z13
	VBROADCASTI64X4 vnniShift<>(SB), Z12
	VMOVDQU32 vnniIdx0<>(SB), Z26
	VMOVDQU32 vnniIdx1<>(SB), Z25
	MOVL $0xFF00, AX
	KMOVW AX, K1

nvvecrow:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ nblk+40(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

nvvecloop:
	PREFETCHT0 VPREFETCH(SI)
	PREFETCHT0 VPREFETCH(SI)(R8*1)
	PREFETCHT0 VPREFETCH(SI)(R8*2)
	PREFETCHT0 VPREFETCH(SI)(R9*1)
	VBROADCASTI64X4 0(DI), Z21
	VBROADCASTI64X4 32(DI), Z20
	VBROADCASTSS 64(DI), Z19
	VBROADCASTI64X4 68(DI), Z18
	VBROADCASTI64X4 100(DI), Z17
	VBROADCASTSS 132(DI), Z16
	NVVROWS((SI), 4(SI), 20(SI), (SI)(R8*2), 4(SI)(R8*2), 20(SI)(R8*2), Z0)
	NVVROWS((SI)(R8*1), 4(SI)(R8*1), 20(SI)(R8*1), (SI)(R9*1), 4(SI)(R9*1), 20(SI)(R9*1), Z1)
	ADDQ $36, SI
	ADDQ $136, DI
	DECQ CX
	JNZ nvvecloop

	VHSUMNV(Z0, (DX), (DX)(R10*2))
	VHSUMNV(Z1, (DX)(R10*1), (DX)(R14*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ BX
	JNZ nvvecrow
	VZEROUPPER
	RET
