#include "textflag.h"

// AVX-512 kernels (F, BW, VL and VNNI) for the int8 products: Q8_0
// weights, and NVFP4 weights with Q8_0 activations (W4A8), each (row,
// vector) pair keeping the eight lane accumulators of its plain-Go twin
// (dotQ8, dotNVFP4Q8) in the same order, so the same bits. A 512-bit
// register holds two such pairs side by side: two vectors of one row (the
// tile kernels) or two rows of one vector (the one-vector kernels).
//
// The integer sums come from VPDPBUSD, which multiplies unsigned bytes by
// signed bytes and adds each group of four products to a dword. One side
// is offset by 128 to make it unsigned and the accumulator starts at the
// correction, -128 times the sum of the other side's four bytes:
//   - the tile kernels take the activation quants as the unsigned side
//     (the packer stores them XOR 0x80) and the weights as they are, so
//     the correction belongs to the weight block and serves every vector;
//   - the one-vector kernels take the weights as the unsigned side (Q8_0:
//     XOR 0x80; NVFP4: a table of 128 + the doubled E2M1 values) and the
//     quants as they are, so the correction belongs to the activation
//     block and serves every row.
// Every partial sum stays far inside int32, so each dword is the exact
// integer sum of the four products: twin lane k's isum, -128 quants
// included. Then, as the twins: lane = fma(d, float32(isum), lane), d the
// product of the two scales rounded to F32. At the end VHSUM adds each
// group of eight lanes in hsum8's order.
//
// Activations come packed per group of s vectors (1, 2, 4 or 8), block
// after block (vnniActBytes = 36 bytes per vector and Q8_0 block): the s
// vectors' 32 quants XOR 0x80, then their s scales d (NVFP4: d*128, and
// the quants in the weights' nibble order). Two neighbouring vectors'
// quants are one 64-byte load.
//
// Constant registers: Z31 bytes 0x80, Z15 zero.

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

// VHSUMLO is VHSUM for lanes 0-7 only.
#define VHSUMLO(acc, o0) \
	VSHUFF32X4 $0xB1, acc, acc, Z24; \
	VADDPS Z24, acc, Z24; \
	VPERMILPS $0x4E, Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSHDUP Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSS X24, o0

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

#define VHSUMNVLO(acc, o0) \
	VPERMILPS $0x4E, acc, Z24; \
	VADDPS Z24, acc, Z24; \
	VSHUFF32X4 $0xB1, Z24, Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSHDUP Z24, Z23; \
	VADDPS Z23, Z24, Z24; \
	VMOVSS X24, o0

// VPERMPS indices: scale k of a ymm to lanes 0-7, scale k+1 to 8-15.
DATA vnniPair<>+0(SB)/8, $0x0000000000000000
DATA vnniPair<>+8(SB)/8, $0x0000000000000000
DATA vnniPair<>+16(SB)/8, $0x0000000000000000
DATA vnniPair<>+24(SB)/8, $0x0000000000000000
DATA vnniPair<>+32(SB)/8, $0x0000000100000001
DATA vnniPair<>+40(SB)/8, $0x0000000100000001
DATA vnniPair<>+48(SB)/8, $0x0000000100000001
DATA vnniPair<>+56(SB)/8, $0x0000000100000001
GLOBL vnniPair<>(SB), RODATA|NOPTR, $64

// CONSTS sets Z31 to bytes 0x80 and Z15 to zero.
#define CONSTS \
	MOVL $0x80, AX; \
	VPBROADCASTB AX, Z31; \
	VPXORD Z15, Z15, Z15

// PAIRIDX sets the VPERMPS indices of the vector pairs: Z30 pair (0,1),
// Z29 (2,3), Z28 (4,5), Z27 (6,7). Clobbers AX, Z26.
#define PAIRIDX \
	VMOVDQU32 vnniPair<>(SB), Z30; \
	MOVL $2, AX; \
	VPBROADCASTD AX, Z26; \
	VPADDD Z26, Z30, Z29; \
	VPADDD Z26, Z29, Z28; \
	VPADDD Z26, Z28, Z27

// NEGCORR sets c to -128 times the sum of each four signed bytes of b:
// the accumulator start that undoes the offset of the unsigned side.
#define NEGCORR(b, c) \
	VPXORD c, c, c; \
	VPDPBUSD b, Z31, c; \
	VPSUBD c, Z15, c

// The tile kernels run pairs of rows A and B = A + rstride against a
// group of s vectors: npairs pairs, A advancing by rb bytes. The outputs
// of vector k go to dst + k*dstride bytes, row B's drow bytes after row
// A's; the first `used` vectors of the group are stored. Registers: R11
// row A, R12 the group's blocks, R13 nblk, BX the pairs left, DX the
// outputs of row A for vector 0, R9 dstride, R10 drow, R14 used.
#define VTILEINIT \
	MOVQ row+0(FP), R11; \
	MOVQ rstride+16(FP), R8; \
	MOVQ npairs+24(FP), BX; \
	MOVQ act+32(FP), R12; \
	MOVQ nblk+40(FP), R13; \
	MOVQ dst+48(FP), DX; \
	MOVQ dstride+56(FP), R9; \
	MOVQ drow+64(FP), R10; \
	MOVQ used+72(FP), R14; \
	CONSTS; \
	PAIRIDX

#define VTILENEXT \
	ADDQ rb+8(FP), R11; \
	ADDQ $4, DX; \
	DECQ BX

#define ZERO8 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7

// VPAIR adds the vectors of one pair of the group (quants at q(DI),
// unsigned) into accA (row A) and accB (row B): wA, wB the rows' signed
// weight bytes in both halves, cA, cB their corrections; dA, dB (ymm
// lanes k) the products d of each row's scale with vector k's, spread to
// the pair's halves by VPERMPS with idx.
#define VPAIR(q, idx, wA, wB, cA, cB, dA, dB, accA, accB) \
	VMOVDQU8 q(DI), Z20; \
	VMOVDQA32 cA, Z19; \
	VMOVDQA32 cB, Z18; \
	VPDPBUSD wA, Z20, Z19; \
	VPDPBUSD wB, Z20, Z18; \
	VPERMPS dA, idx, Z17; \
	VPERMPS dB, idx, Z16; \
	VCVTDQ2PS Z19, Z19; \
	VCVTDQ2PS Z18, Z18; \
	VFMADD231PS Z19, Z17, accA; \
	VFMADD231PS Z18, Z16, accB

// VSTOREPAIR stores pair p's sums (accA row A, accB row B) for vectors
// 2p (at AX) and 2p+1 (at AX + R9). Clobbers CX.
#define VSTOREPAIR(hsum, accA, accB) \
	LEAQ (AX)(R9*1), CX; \
	hsum(accA, (AX), (CX)); \
	hsum(accB, (AX)(R10*1), (CX)(R10*1))

// ---------------------------------------------------------------- Q8_0 tiles

// Q8WEIGHTS readies block 0(SI) of row A and (SI)(R8) of row B: Z26 and
// Z25 their quants in both halves, Z24 and Z23 their corrections, Z22 and
// Z21 their F16 scales as F32 in every lane.
#define Q8WEIGHTS \
	VBROADCASTI64X4 2(SI), Z26; \
	VBROADCASTI64X4 2(SI)(R8*1), Z25; \
	NEGCORR(Z26, Z24); \
	NEGCORR(Z25, Z23); \
	VPBROADCASTW (SI), Y22; \
	VPBROADCASTW (SI)(R8*1), Y21; \
	VCVTPH2PS Y22, Z22; \
	VCVTPH2PS Y21, Z21

#define Q8PAIR(q, idx, accA, accB) VPAIR(q, idx, Z26, Z25, Z24, Z23, Z22, Z21, accA, accB)

// func q8VnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·q8VnniTile8(SB), NOSPLIT, $0-80
	VTILEINIT

q8v8row:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	ZERO8

q8v8loop:
	Q8WEIGHTS
	VMULPS 256(DI), Y22, Y22
	VMULPS 256(DI), Y21, Y21
	Q8PAIR(0, Z30, Z0, Z4)
	Q8PAIR(64, Z29, Z1, Z5)
	Q8PAIR(128, Z28, Z2, Z6)
	Q8PAIR(192, Z27, Z3, Z7)
	ADDQ $34, SI
	ADDQ $288, DI
	DECQ CX
	JNZ q8v8loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUM, Z0, Z4)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUM, Z1, Z5)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUM, Z2, Z6)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUM, Z3, Z7)
	VTILENEXT
	JNZ q8v8row
	VZEROUPPER
	RET

// func q8VnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 3 or 4). npairs > 0, nblk > 0.
TEXT ·q8VnniTile4(SB), NOSPLIT, $0-80
	VTILEINIT

q8v4row:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	ZERO8

q8v4loop:
	Q8WEIGHTS
	VMULPS 128(DI), X22, X22
	VMULPS 128(DI), X21, X21
	Q8PAIR(0, Z30, Z0, Z4)
	Q8PAIR(64, Z29, Z1, Z5)
	ADDQ $34, SI
	ADDQ $144, DI
	DECQ CX
	JNZ q8v4loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUM, Z0, Z4)
	LEAQ (AX)(R9*2), AX
	CMPQ R14, $4
	JLT q8v4three
	VSTOREPAIR(VHSUM, Z1, Z5)
	JMP q8v4next

q8v4three: // vector 3 is padding
	VHSUMLO(Z1, (AX))
	VHSUMLO(Z5, (AX)(R10*1))

q8v4next:
	VTILENEXT
	JNZ q8v4row
	VZEROUPPER
	RET

// func q8VnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·q8VnniTile2(SB), NOSPLIT, $0-80
	VTILEINIT

q8v2row:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4

q8v2loop:
	Q8WEIGHTS
	VMOVSD 64(DI), X17
	VMULPS X17, X22, X22
	VMULPS X17, X21, X21
	Q8PAIR(0, Z30, Z0, Z4)
	ADDQ $34, SI
	ADDQ $72, DI
	DECQ CX
	JNZ q8v2loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUM, Z0, Z4)
	VTILENEXT
	JNZ q8v2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q8_0, one vector

// VECACT readies the activation half block at q(DI) (32 quants XOR 0x80)
// for the one-vector kernels: a the signed quants in both halves, c their
// corrections.
#define VECACT(q, a, c) \
	VBROADCASTI64X4 q(DI), a; \
	VPXORD Z31, a, a; \
	NEGCORR(a, c)

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
	CONSTS
	MOVL $0xFF00, AX
	KMOVW AX, K1

q8vecrow:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

q8vecloop:
	VECACT(0, Z22, Z21)
	VBROADCASTSS 32(DI), Z20
	Q8VROWS((SI), 2(SI), (SI)(R8*2), 2(SI)(R8*2), Z0)
	Q8VROWS((SI)(R8*1), 2(SI)(R8*1), (SI)(R9*1), 2(SI)(R9*1), Z1)
	ADDQ $34, SI
	ADDQ $36, DI
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

// ggml's doubled E2M1 values (kvalues_fp4), for VPSHUFB: signed for the
// tiles, plus 128 for the one-vector kernel.
DATA vnniE2M1<>+0(SB)/8, $0x0c08060403020100
DATA vnniE2M1<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL vnniE2M1<>(SB), RODATA|NOPTR, $16
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

// VPERMPS indices: sub-block scales s0..s3 (one row; s4..s7 a second row)
// to the lane scales of half 0, [s0 s0 s1 s1 s0 s0 s1 s1], and half 1,
// [s2 s2 s3 s3 s2 s2 s3 s3]: register lanes 0, 1, 4, 5 belong to the
// first sub-block of the half, 2, 3, 6, 7 to the second (nvfp4_amd64.s).
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

// NVFP4SCALES turns the UE4M3 scale bytes in the low dwords of X9 into
// floats UE4M3 * 2^-8 in Y9 (eight bytes; four into X9), the NaN code
// 0x7F zeroed, as nvfp4_amd64.s's NVFP4SCALES. Clobbers X10.
#define NVSCALES \
	VPMOVZXBW X9, X9; \
	VPAND vnniW7F<>(SB), X9, X9; \
	VPCMPEQW vnniW7F<>(SB), X9, X10; \
	VPSLLW $7, X9, X9; \
	VPANDN X9, X10, X9; \
	VCVTPH2PS X9, Y9

// NVWEIGHTS widens the 32 nibbles in the 16 code bytes of one half block,
// already in every 128-bit lane of w, to the weights of the half block in
// nibble order, in both halves of w: low nibbles in the low 128-bit lane
// of each half, high nibbles in the high lane, looked up in the table.
#define NVWEIGHTS(w, shift, low, tab) \
	VPSRLVW shift, w, w; \
	VPANDD low, w, w; \
	VPSHUFB w, tab, w

// The NVFP4 tiles: as the Q8_0 tiles, NVFP4 rows (36-byte blocks) against
// a group packed with nibble set: each NVFP4 block is two packed Q8_0
// blocks, one per half (sub-blocks 2h and 2h+1), s*36 bytes each. For
// each row and half the kernel holds the signed weights in both halves of
// a register (w), the plain correction 128 * (the sum of each four
// weights) that VPSUBD takes off (c), and the lane scales UE4M3 * 2^-8
// (s). Registers: Z0-Z7 the accumulators; Z8-Z11 scratch; row A: Z12,
// Z13 w, Z14, Z15 c, Z16, Z17 s (halves 0, 1); row B: Z18-Z23 alike; Z24-
// Z27 the pair indices (vnniPair + 2p); Z28 the shift counts, Z29 bytes
// 0x0F, Z30 the signed table, Z31 bytes 0x80.

// NVROW readies one NVFP4 block of one row: scale bytes at addr, the
// halves' codes at codes0 and codes1. Clobbers AX, Z9, Z10.
#define NVROW(addr, codes0, codes1, w0, w1, c0, c1, s0, s1) \
	MOVL addr, AX; \
	VMOVD AX, X9; \
	NVSCALES; \
	VSHUFF32X4 $0, Z9, Z9, Z9; \
	VPERMILPS $0x50, Z9, s0; \
	VPERMILPS $0xFA, Z9, s1; \
	VBROADCASTI32X4 codes0, w0; \
	VBROADCASTI32X4 codes1, w1; \
	NVWEIGHTS(w0, Z28, Z29, Z30); \
	NVWEIGHTS(w1, Z28, Z29, Z30); \
	VPXORD c0, c0, c0; \
	VPXORD c1, c1, c1; \
	VPDPBUSD w0, Z31, c0; \
	VPDPBUSD w1, Z31, c1

#define NVBLOCK \
	NVROW((SI), 4(SI), 20(SI), Z12, Z13, Z14, Z15, Z16, Z17); \
	NVROW((SI)(R8*1), 4(SI)(R8*1), 20(SI)(R8*1), Z18, Z19, Z20, Z21, Z22, Z23)

// NVPAIR adds pair p of half h into accA and accB: the pair's quants at
// q(DI), the half's s factors d*128 at dx(DI) (loaded by dxop into dxreg,
// the low lanes of Z8: exactly s of them), spread to the pair's halves
// with idx. Lane scale (UE4M3 * 2^-8) * (d * 128), both
// exact: dotNVFP4Q8's rounded UE4M3/2 * d.
#define NVPAIR(q, dxop, dx, dxreg, idx, wA, wB, cA, cB, sA, sB, accA, accB) \
	VMOVDQU8 q(DI), Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPDPBUSD wA, Z8, Z9; \
	VPDPBUSD wB, Z8, Z10; \
	dxop dx(DI), dxreg; \
	VPSUBD cA, Z9, Z9; \
	VPSUBD cB, Z10, Z10; \
	VPERMPS Z8, idx, Z8; \
	VCVTDQ2PS Z9, Z9; \
	VCVTDQ2PS Z10, Z10; \
	VMULPS Z8, sA, Z11; \
	VFMADD231PS Z9, Z11, accA; \
	VMULPS Z8, sB, Z11; \
	VFMADD231PS Z10, Z11, accB

#define NVH0(q, dxop, dx, dxreg, idx, accA, accB) NVPAIR(q, dxop, dx, dxreg, idx, Z12, Z18, Z14, Z20, Z16, Z22, accA, accB)
#define NVH1(q, dxop, dx, dxreg, idx, accA, accB) NVPAIR(q, dxop, dx, dxreg, idx, Z13, Z19, Z15, Z21, Z17, Z23, accA, accB)

#define NVTILEINIT \
	MOVQ row+0(FP), R11; \
	MOVQ rstride+16(FP), R8; \
	MOVQ npairs+24(FP), BX; \
	MOVQ act+32(FP), R12; \
	MOVQ nblk+40(FP), R13; \
	MOVQ dst+48(FP), DX; \
	MOVQ dstride+56(FP), R9; \
	MOVQ drow+64(FP), R10; \
	MOVQ used+72(FP), R14; \
	MOVL $0x80, AX; \
	VPBROADCASTB AX, Z31; \
	VBROADCASTI32X4 vnniE2M1<>(SB), Z30; \
	MOVL $0x0f, AX; \
	VPBROADCASTB AX, Z29; \
	VBROADCASTI64X4 vnniShift<>(SB), Z28; \
	VMOVDQU32 vnniPair<>(SB), Z24; \
	MOVL $2, AX; \
	VPBROADCASTD AX, Z8; \
	VPADDD Z8, Z24, Z25; \
	VPADDD Z8, Z25, Z26; \
	VPADDD Z8, Z26, Z27

// func nvVnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 8 (used = 8). npairs > 0, nblk > 0.
TEXT ·nvVnniTile8(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv8row:
	VMOVDQU32 vnniPair<>(SB), Z24 // VHSUMNV clobbers it
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	ZERO8

nvv8loop:
	NVBLOCK
	NVH0(0, VMOVUPS, 256, Y8, Z24, Z0, Z4)
	NVH0(64, VMOVUPS, 256, Y8, Z25, Z1, Z5)
	NVH0(128, VMOVUPS, 256, Y8, Z26, Z2, Z6)
	NVH0(192, VMOVUPS, 256, Y8, Z27, Z3, Z7)
	NVH1(288, VMOVUPS, 544, Y8, Z24, Z0, Z4)
	NVH1(352, VMOVUPS, 544, Y8, Z25, Z1, Z5)
	NVH1(416, VMOVUPS, 544, Y8, Z26, Z2, Z6)
	NVH1(480, VMOVUPS, 544, Y8, Z27, Z3, Z7)
	ADDQ $36, SI
	ADDQ $576, DI
	DECQ CX
	JNZ nvv8loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUMNV, Z0, Z4)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUMNV, Z1, Z5)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUMNV, Z2, Z6)
	LEAQ (AX)(R9*2), AX
	VSTOREPAIR(VHSUMNV, Z3, Z7)
	VTILENEXT
	JNZ nvv8row
	VZEROUPPER
	RET

// func nvVnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 4 (used = 3 or 4). npairs > 0, nblk > 0.
TEXT ·nvVnniTile4(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv4row:
	VMOVDQU32 vnniPair<>(SB), Z24 // VHSUMNV clobbers it
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	ZERO8

nvv4loop:
	NVBLOCK
	NVH0(0, VMOVUPS, 128, X8, Z24, Z0, Z4)
	NVH0(64, VMOVUPS, 128, X8, Z25, Z1, Z5)
	NVH1(144, VMOVUPS, 272, X8, Z24, Z0, Z4)
	NVH1(208, VMOVUPS, 272, X8, Z25, Z1, Z5)
	ADDQ $36, SI
	ADDQ $288, DI
	DECQ CX
	JNZ nvv4loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUMNV, Z0, Z4)
	LEAQ (AX)(R9*2), AX
	CMPQ R14, $4
	JLT nvv4three
	VSTOREPAIR(VHSUMNV, Z1, Z5)
	JMP nvv4next

nvv4three: // vector 3 is padding
	VHSUMNVLO(Z1, (AX))
	VHSUMNVLO(Z5, (AX)(R10*1))

nvv4next:
	VTILENEXT
	JNZ nvv4row
	VZEROUPPER
	RET

// func nvVnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
// s = 2 (used = 2). npairs > 0, nblk > 0.
TEXT ·nvVnniTile2(SB), NOSPLIT, $0-80
	NVTILEINIT

nvv2row:
	VMOVDQU32 vnniPair<>(SB), Z24 // VHSUMNV clobbers it
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4

nvv2loop:
	NVBLOCK
	NVH0(0, VMOVSD, 64, X8, Z24, Z0, Z4)
	NVH1(72, VMOVSD, 136, X8, Z24, Z0, Z4)
	ADDQ $36, SI
	ADDQ $144, DI
	DECQ CX
	JNZ nvv2loop

	MOVQ DX, AX
	VSTOREPAIR(VHSUMNV, Z0, Z4)
	VTILENEXT
	JNZ nvv2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8, one vector

// NVVROWS adds the current block of two rows (two of the four streams, at
// a and c) into acc = [row a | row c], weights unsigned (the table of 128
// + the doubled values, Z14). Z21, Z20: the vector's half-0 signed quants
// and corrections in both halves, Z19 its factor d*128 in every lane;
// Z18, Z17, Z16 the same for half 1. K1 = 0xFF00 selects the high half's
// dwords; Z26, Z25 vnniIdx0, vnniIdx1 (two rows).
#define NVVROWS(a, a4, a20, c, c4, c20, acc) \
	MOVL a, AX; \
	MOVL c, R13; \
	VMOVD AX, X9; \
	VPINSRD $1, R13, X9, X9; \
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
	CONSTS
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
	VECACT(0, Z21, Z20)
	VBROADCASTSS 32(DI), Z19
	VECACT(36, Z18, Z17)
	VBROADCASTSS 68(DI), Z16
	NVVROWS((SI), 4(SI), 20(SI), (SI)(R8*2), 4(SI)(R8*2), 20(SI)(R8*2), Z0)
	NVVROWS((SI)(R8*1), 4(SI)(R8*1), 20(SI)(R8*1), (SI)(R9*1), 4(SI)(R9*1), 20(SI)(R9*1), Z1)
	ADDQ $36, SI
	ADDQ $72, DI
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
