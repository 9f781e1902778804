#include "textflag.h"

// AVX-VNNI kernels (the VEX-encoded, 256-bit VPDPBUSD, with AVX2, FMA3
// and F16C) for the int8 products: Q8_0 weights, and NVFP4 weights with
// Q8_0 activations (W4A8). They are vnni_amd64.s's kernels for CPUs
// without AVX-512 (Intel's client cores since Alder Lake): the same
// packed activations (packVNNI), the same offset-and-correction integer
// sums, the same lane steps and the same additions, so the same bits as
// the AVX-512 kernels, the AVX2 kernels and the plain-Go twins (dotQ8,
// dotNVFP4Q8). A ymm register holds one (row, vector) pair's eight lanes.
// Only X0-X15/Y0-Y15 and VEX instructions appear here: no EVEX, which
// such a CPU would fault on.
//
// VPDPBUSD multiplies unsigned bytes by signed bytes and adds each group
// of four products to a dword. The weights are the unsigned side, offset
// by 128 (Q8_0: XOR 0x80; NVFP4: a table of 128 + the doubled E2M1
// values), the activation quants the signed side as they are, and the
// accumulator starts at the correction, -128 times the sum of each four
// quants, which packVNNI stores with them.
// Every partial sum stays far inside int32, so each dword is the exact
// integer sum of the four products: twin lane k's isum, -128 quants
// included. Then, as the twins: lane = fma(d, float32(isum), lane), d the
// product of the two scales rounded to F32. At the end AHSUM adds the
// eight lanes in hsum8's order.
//
// The tile kernels take one row at a time against a group of s = 8, 4 or
// 2 vectors (sixteen ymm registers hold eight accumulators and the
// block's operands, not sixteen accumulators as the AVX-512 tiles); rows
// follow each other, one long stream.
//
// Go's assembler knows VPDPBUSD only in its EVEX form (AVX-512 VNNI, and
// AVX-512 VL for ymm), so VPDPBUSDY spells out the VEX form
// ({vex} vpdpbusd, VEX.256.66.0F38.W0 50 /r) with BYTE directives.

// VPDPBUSDY(s, u, d) is VEX VPDPBUSD Ys, Yu, Yd: each dword of Yd += the
// sum of the four products of the unsigned bytes of Yu with the signed
// bytes of Ys. s, u and d are register numbers 0-15 (ModRM.rm, VEX.vvvv,
// ModRM.reg).
#define VPDPBUSDY(s, u, d) \
	BYTE $0xC4; \
	BYTE $(0xE2 ^ ((d&8)<<4) ^ ((s&8)<<2)); \
	BYTE $(0x7D ^ ((u&15)<<3)); \
	BYTE $0x50; \
	BYTE $(0xC0 | ((d&7)<<3) | (s&7))

// AHSUM stores hsum8 of the lanes of acc (ymm; accx its xmm) at addr:
// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), operand for operand as
// vnni_amd64.s's VHSUM. Clobbers X12, X13.
#define AHSUM(acc, accx, addr) \
	VEXTRACTF128 $1, acc, X12; \
	VADDPS X12, accx, X12; \
	VPERMILPS $0x4E, X12, X13; \
	VADDPS X13, X12, X12; \
	VMOVSHDUP X12, X13; \
	VADDSS X13, X12, X12; \
	VMOVSS X12, addr

// ANVHSUM is AHSUM for register lanes holding twin lanes 0 1 4 5 2 3 6 7
// (the NVFP4 kernels): ((r0+r2) + (r4+r6)) + ((r1+r3) + (r5+r7)), as
// VHSUMNV. Clobbers Y12, Y13.
#define ANVHSUM(acc, addr) \
	VPERMILPS $0x4E, acc, Y12; \
	VADDPS Y12, acc, Y12; \
	VEXTRACTF128 $1, Y12, X13; \
	VADDPS X13, X12, X13; \
	VMOVSHDUP X13, X12; \
	VADDSS X12, X13, X13; \
	VMOVSS X13, addr

DATA avnni0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avnni0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avnni0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avnni0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL avnni0F<>(SB), RODATA|NOPTR, $32

// VPSRLVD counts: 0 for the low 128 bits, 4 for the high (the high
// nibbles of each byte; what comes down from the byte above is masked off).
DATA avnniShift<>+0(SB)/8, $0
DATA avnniShift<>+8(SB)/8, $0
DATA avnniShift<>+16(SB)/8, $0x0000000400000004
DATA avnniShift<>+24(SB)/8, $0x0000000400000004
GLOBL avnniShift<>(SB), RODATA|NOPTR, $32

DATA avnniW7F<>+0(SB)/8, $0x007f007f007f007f
DATA avnniW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL avnniW7F<>(SB), RODATA|NOPTR, $16

// 128 + ggml's doubled E2M1 values (kvalues_fp4), for VPSHUFB: the
// weights as the unsigned side.
DATA avnniE2M1U<>+0(SB)/8, $0x8c88868483828180
DATA avnniE2M1U<>+8(SB)/8, $0x74787a7c7d7e7f80
GLOBL avnniE2M1U<>(SB), RODATA|NOPTR, $16

// The tile kernels: nrows rows of rb bytes from row, each against the
// group of s vectors at act (packVNNI's layout, nblk blocks); the sums of
// vector k go to dst + k*dstride bytes, row after row 4 bytes apart; the
// first `used` vectors are stored. Registers: R11 the row, R12 the
// group's blocks, R13 nblk, BX the rows left, DX the outputs of vector 0,
// R9 dstride, R14 used; Y0-Y7 the accumulators of vectors 0-7.
#define ATILEINIT \
	MOVQ row+0(FP), R11; \
	MOVQ nrows+16(FP), BX; \
	MOVQ act+24(FP), R12; \
	MOVQ nblk+32(FP), R13; \
	MOVQ dst+40(FP), DX; \
	MOVQ dstride+48(FP), R9; \
	MOVQ used+56(FP), R14

#define ATILEROW \
	MOVQ R11, SI; \
	MOVQ R12, DI; \
	MOVQ R13, CX

#define ATILENEXT \
	ADDQ rb+8(FP), R11; \
	ADDQ $4, DX; \
	DECQ BX

#define AZERO4 \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3

#define AZERO8 \
	AZERO4; \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VPXOR Y6, Y6, Y6; \
	VPXOR Y7, Y7, Y7

// ---------------------------------------------------------------- Q8_0 tiles

// AQ8WEIGHT readies the weight block at 0(SI): Y8 its F16 scale as F32 in
// every lane, Y9 its quants XOR 0x80 (unsigned). Y14: bytes 0x80.
#define AQ8WEIGHT \
	VPBROADCASTW (SI), X8; \
	VCVTPH2PS X8, Y8; \
	VMOVDQU 2(SI), Y9; \
	VPXOR Y14, Y9, Y9

// AQ8PAIR adds the block of one vector (quants at q(DI), signed; their
// corrections at c(DI), its scale at dx(DI)) into acc, d = the weight
// scale (Y8) times the vector's, rounded to F32 as dotQ8's. (One VMULPS
// per pair: computing the group's eight products at once and reading them
// back from the stack, as gemm_amd64.s does, ran some 20% slower on a Zen
// 5, the loads waiting on the store.)
#define AQ8PAIR(q, c, dx, acc) \
	VMOVDQU q(DI), Y11; \
	VMOVDQU c(DI), Y12; \
	VPDPBUSDY(11, 9, 12); \
	VCVTDQ2PS Y12, Y12; \
	VBROADCASTSS dx(DI), Y13; \
	VMULPS Y13, Y8, Y13; \
	VFMADD231PS Y12, Y13, acc

#define A80 \
	MOVL $0x80, AX; \
	VMOVD AX, X14; \
	VPBROADCASTB X14, Y14

// func q8AvxVnniTile8(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 8 (used = 8). nrows > 0, nblk > 0.
TEXT ·q8AvxVnniTile8(SB), NOSPLIT, $0-64
	ATILEINIT
	A80

aq8t8row:
	ATILEROW
	AZERO8

aq8t8loop:
	AQ8WEIGHT
	AQ8PAIR(0, 256, 512, Y0)
	AQ8PAIR(32, 288, 516, Y1)
	AQ8PAIR(64, 320, 520, Y2)
	AQ8PAIR(96, 352, 524, Y3)
	AQ8PAIR(128, 384, 528, Y4)
	AQ8PAIR(160, 416, 532, Y5)
	AQ8PAIR(192, 448, 536, Y6)
	AQ8PAIR(224, 480, 540, Y7)
	ADDQ $34, SI
	ADDQ $544, DI
	DECQ CX
	JNZ aq8t8loop

	MOVQ DX, AX
	AHSUM(Y0, X0, (AX))
	ADDQ R9, AX
	AHSUM(Y1, X1, (AX))
	ADDQ R9, AX
	AHSUM(Y2, X2, (AX))
	ADDQ R9, AX
	AHSUM(Y3, X3, (AX))
	ADDQ R9, AX
	AHSUM(Y4, X4, (AX))
	ADDQ R9, AX
	AHSUM(Y5, X5, (AX))
	ADDQ R9, AX
	AHSUM(Y6, X6, (AX))
	ADDQ R9, AX
	AHSUM(Y7, X7, (AX))
	ATILENEXT
	JNZ aq8t8row
	VZEROUPPER
	RET

// func q8AvxVnniTile4(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 4 (used = 3 or 4). nrows > 0, nblk > 0.
TEXT ·q8AvxVnniTile4(SB), NOSPLIT, $0-64
	ATILEINIT
	A80

aq8t4row:
	ATILEROW
	AZERO4

aq8t4loop:
	AQ8WEIGHT
	AQ8PAIR(0, 128, 256, Y0)
	AQ8PAIR(32, 160, 260, Y1)
	AQ8PAIR(64, 192, 264, Y2)
	AQ8PAIR(96, 224, 268, Y3)
	ADDQ $34, SI
	ADDQ $272, DI
	DECQ CX
	JNZ aq8t4loop

	MOVQ DX, AX
	AHSUM(Y0, X0, (AX))
	ADDQ R9, AX
	AHSUM(Y1, X1, (AX))
	ADDQ R9, AX
	AHSUM(Y2, X2, (AX))
	CMPQ R14, $4
	JLT aq8t4next // vector 3 is padding
	ADDQ R9, AX
	AHSUM(Y3, X3, (AX))

aq8t4next:
	ATILENEXT
	JNZ aq8t4row
	VZEROUPPER
	RET

// func q8AvxVnniTile2(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 2 (used = 2). nrows > 0, nblk > 0.
TEXT ·q8AvxVnniTile2(SB), NOSPLIT, $0-64
	ATILEINIT
	A80

aq8t2row:
	ATILEROW
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

aq8t2loop:
	AQ8WEIGHT
	AQ8PAIR(0, 64, 128, Y0)
	AQ8PAIR(32, 96, 132, Y1)
	ADDQ $34, SI
	ADDQ $136, DI
	DECQ CX
	JNZ aq8t2loop

	MOVQ DX, AX
	AHSUM(Y0, X0, (AX))
	ADDQ R9, AX
	AHSUM(Y1, X1, (AX))
	ATILENEXT
	JNZ aq8t2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q8_0, one vector

// AQ8VROW adds the current block of one row (scale at d, quants at q)
// into acc. Y4: the vector's signed quants, Y5 their correction, Y6 its
// scale in every lane; Y7 bytes 0x80. Clobbers Y8-Y10.
#define AQ8VROW(d, q, acc) \
	VMOVDQU q, Y8; \
	VPXOR Y7, Y8, Y8; \
	VMOVDQA Y5, Y9; \
	VPDPBUSDY(4, 8, 9); \
	VPBROADCASTW d, X10; \
	VCVTPH2PS X10, Y10; \
	VMULPS Y6, Y10, Y10; \
	VCVTDQ2PS Y9, Y9; \
	VFMADD231PS Y9, Y10, acc

// func q8AvxVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)
// One vector (a group of s = 1) against four streams of rows: rows A, B,
// C, D at row, row+qstride, row+2*qstride, row+3*qstride, nrows of each,
// advancing by rb; row A's output at dst, B's dq bytes after it, C's 2*dq,
// D's 3*dq (as q8VnniVec4). nrows > 0, nblk > 0.
TEXT ·q8AvxVnniVec4(SB), NOSPLIT, $0-64
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
	VMOVD AX, X7
	VPBROADCASTB X7, Y7

aq8vrow:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	AZERO4

aq8vloop:
	VMOVDQU (DI), Y4
	VMOVDQU 32(DI), Y5
	VBROADCASTSS 64(DI), Y6
	AQ8VROW((SI), 2(SI), Y0)
	AQ8VROW((SI)(R8*1), 2(SI)(R8*1), Y1)
	AQ8VROW((SI)(R8*2), 2(SI)(R8*2), Y2)
	AQ8VROW((SI)(R9*1), 2(SI)(R9*1), Y3)
	ADDQ $34, SI
	ADDQ $68, DI
	DECQ CX
	JNZ aq8vloop

	AHSUM(Y0, X0, (DX))
	AHSUM(Y1, X1, (DX)(R10*1))
	AHSUM(Y2, X2, (DX)(R10*2))
	AHSUM(Y3, X3, (DX)(R14*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ BX
	JNZ aq8vrow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8 tiles

// ANVSCALES turns the four UE4M3 scale bytes at addr into the floats
// UE4M3 * 2^-8 in both halves of Y15, [s0 s1 s2 s3 s0 s1 s2 s3], the NaN
// code 0x7F zeroed, as vnni_amd64.s's NVSCALES. Clobbers AX, X13.
#define ANVSCALES(addr) \
	MOVL addr, AX; \
	VMOVD AX, X15; \
	VPMOVZXBW X15, X15; \
	VPAND avnniW7F<>(SB), X15, X15; \
	VPCMPEQW avnniW7F<>(SB), X15, X13; \
	VPSLLW $7, X15, X15; \
	VPANDN X15, X13, X15; \
	VCVTPH2PS X15, X15; \
	VINSERTF128 $1, X15, Y15, Y15

// ANVWEIGHTS widens the 32 nibbles of the 16 code bytes at codes (one
// half block) in w, in nibble order: low nibbles in the low 128 bits,
// high nibbles in the high, looked up in the table tab (both halves).
#define ANVWEIGHTS(codes, w, tab) \
	VBROADCASTI128 codes, w; \
	VPSRLVD avnniShift<>(SB), w, w; \
	VPAND avnni0F<>(SB), w, w; \
	VPSHUFB w, tab, w

// The NVFP4 tiles take one half block (two sub-blocks, a packed Q8_0
// block of the group, s*68 bytes) at a time, all vectors, then the other:
// each lane still gets half 0's term before half 1's. Registers: Y0-Y7 the
// accumulators; Y8 the half's unsigned weights (in nibble order), Y10 the
// lane scales UE4M3 * 2^-8 of the half ([s s' s s' ]
// by register lanes 0 1 4 5 2 3 6 7: lanes 0, 1, 4, 5 belong to the
// first sub-block of the half, 2, 3, 6, 7 to the second), Y11-Y13
// scratch, Y14 the table of 128 + the doubled values, Y15 the block's
// scales.

// ANVHALF readies half h of the block at SI: codes at codes(SI), lane
// scales picked from Y15 by perm.
#define ANVHALF(codes, perm) \
	VPERMILPS perm, Y15, Y10; \
	ANVWEIGHTS(codes(SI), Y8, Y14)

// ANVPAIR adds one vector's half block (quants at q(DI), signed; their
// corrections at c(DI), its factor d*128 at dx(DI)) into acc. Lane scale
// (UE4M3 * 2^-8) * (d * 128), both exact: dotNVFP4Q8's rounded UE4M3/2 *
// d.
#define ANVPAIR(q, c, dx, acc) \
	VMOVDQU q(DI), Y11; \
	VMOVDQU c(DI), Y12; \
	VPDPBUSDY(11, 8, 12); \
	VCVTDQ2PS Y12, Y12; \
	VBROADCASTSS dx(DI), Y13; \
	VMULPS Y13, Y10, Y13; \
	VFMADD231PS Y12, Y13, acc

#define ANVTABLE \
	VBROADCASTI128 avnniE2M1U<>(SB), Y14

// func nvAvxVnniTile8(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 8 (used = 8). nrows > 0, nblk > 0.
TEXT ·nvAvxVnniTile8(SB), NOSPLIT, $0-64
	ATILEINIT
	ANVTABLE

anvt8row:
	ATILEROW
	AZERO8

anvt8loop:
	ANVSCALES((SI))
	ANVHALF(4, $0x50)
	ANVPAIR(0, 256, 512, Y0)
	ANVPAIR(32, 288, 516, Y1)
	ANVPAIR(64, 320, 520, Y2)
	ANVPAIR(96, 352, 524, Y3)
	ANVPAIR(128, 384, 528, Y4)
	ANVPAIR(160, 416, 532, Y5)
	ANVPAIR(192, 448, 536, Y6)
	ANVPAIR(224, 480, 540, Y7)
	ANVHALF(20, $0xFA)
	ANVPAIR(544, 800, 1056, Y0)
	ANVPAIR(576, 832, 1060, Y1)
	ANVPAIR(608, 864, 1064, Y2)
	ANVPAIR(640, 896, 1068, Y3)
	ANVPAIR(672, 928, 1072, Y4)
	ANVPAIR(704, 960, 1076, Y5)
	ANVPAIR(736, 992, 1080, Y6)
	ANVPAIR(768, 1024, 1084, Y7)
	ADDQ $36, SI
	ADDQ $1088, DI
	DECQ CX
	JNZ anvt8loop

	MOVQ DX, AX
	ANVHSUM(Y0, (AX))
	ADDQ R9, AX
	ANVHSUM(Y1, (AX))
	ADDQ R9, AX
	ANVHSUM(Y2, (AX))
	ADDQ R9, AX
	ANVHSUM(Y3, (AX))
	ADDQ R9, AX
	ANVHSUM(Y4, (AX))
	ADDQ R9, AX
	ANVHSUM(Y5, (AX))
	ADDQ R9, AX
	ANVHSUM(Y6, (AX))
	ADDQ R9, AX
	ANVHSUM(Y7, (AX))
	ATILENEXT
	JNZ anvt8row
	VZEROUPPER
	RET

// func nvAvxVnniTile4(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 4 (used = 3 or 4). nrows > 0, nblk > 0.
TEXT ·nvAvxVnniTile4(SB), NOSPLIT, $0-64
	ATILEINIT
	ANVTABLE

anvt4row:
	ATILEROW
	AZERO4

anvt4loop:
	ANVSCALES((SI))
	ANVHALF(4, $0x50)
	ANVPAIR(0, 128, 256, Y0)
	ANVPAIR(32, 160, 260, Y1)
	ANVPAIR(64, 192, 264, Y2)
	ANVPAIR(96, 224, 268, Y3)
	ANVHALF(20, $0xFA)
	ANVPAIR(272, 400, 528, Y0)
	ANVPAIR(304, 432, 532, Y1)
	ANVPAIR(336, 464, 536, Y2)
	ANVPAIR(368, 496, 540, Y3)
	ADDQ $36, SI
	ADDQ $544, DI
	DECQ CX
	JNZ anvt4loop

	MOVQ DX, AX
	ANVHSUM(Y0, (AX))
	ADDQ R9, AX
	ANVHSUM(Y1, (AX))
	ADDQ R9, AX
	ANVHSUM(Y2, (AX))
	CMPQ R14, $4
	JLT anvt4next // vector 3 is padding
	ADDQ R9, AX
	ANVHSUM(Y3, (AX))

anvt4next:
	ATILENEXT
	JNZ anvt4row
	VZEROUPPER
	RET

// func nvAvxVnniTile2(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)
// s = 2 (used = 2). nrows > 0, nblk > 0.
TEXT ·nvAvxVnniTile2(SB), NOSPLIT, $0-64
	ATILEINIT
	ANVTABLE

anvt2row:
	ATILEROW
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

anvt2loop:
	ANVSCALES((SI))
	ANVHALF(4, $0x50)
	ANVPAIR(0, 64, 128, Y0)
	ANVPAIR(32, 96, 132, Y1)
	ANVHALF(20, $0xFA)
	ANVPAIR(136, 200, 264, Y0)
	ANVPAIR(168, 232, 268, Y1)
	ADDQ $36, SI
	ADDQ $272, DI
	DECQ CX
	JNZ anvt2loop

	MOVQ DX, AX
	ANVHSUM(Y0, (AX))
	ADDQ R9, AX
	ANVHSUM(Y1, (AX))
	ATILENEXT
	JNZ anvt2row
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4 W4A8, one vector

// ANVVROW adds the current block of one row (scale bytes at a, the
// halves' codes at a4 and a20) into acc, weights unsigned (Y10: the table
// of 128 + the doubled values). Y4, Y5: the vector's signed quants of
// halves 0 and 1, Y6, Y7 their corrections, Y8, Y9 their factors d*128 in
// every lane. Clobbers AX, Y11-Y15.
#define ANVVROW(a, a4, a20, acc) \
	MOVL a, AX; \
	VMOVD AX, X11; \
	VPMOVZXBW X11, X11; \
	VPAND avnniW7F<>(SB), X11, X11; \
	VPCMPEQW avnniW7F<>(SB), X11, X15; \
	VPSLLW $7, X11, X11; \
	VPANDN X11, X15, X11; \
	VCVTPH2PS X11, X11; \
	VINSERTF128 $1, X11, Y11, Y11; \
	VPERMILPS $0x50, Y11, Y14; \
	VMULPS Y8, Y14, Y14; \
	ANVWEIGHTS(a4, Y12, Y10); \
	VMOVDQA Y6, Y13; \
	VPDPBUSDY(4, 12, 13); \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS Y13, Y14, acc; \
	VPERMILPS $0xFA, Y11, Y14; \
	VMULPS Y9, Y14, Y14; \
	ANVWEIGHTS(a20, Y12, Y10); \
	VMOVDQA Y7, Y13; \
	VPDPBUSDY(5, 12, 13); \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS Y13, Y14, acc

// func nvAvxVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)
// W4A8 for one vector against four streams of NVFP4 rows, as
// q8AvxVnniVec4. nrows > 0, nblk > 0.
TEXT ·nvAvxVnniVec4(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), R11
	MOVQ qstride+16(FP), R8
	MOVQ nrows+24(FP), BX
	MOVQ act+32(FP), R12
	MOVQ nblk+40(FP), R13
	MOVQ dst+48(FP), DX
	MOVQ dq+56(FP), R10
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R14
	VBROADCASTI128 avnniE2M1U<>(SB), Y10

anvvrow:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	AZERO4

anvvloop:
	VMOVDQU (DI), Y4
	VMOVDQU 68(DI), Y5
	VMOVDQU 32(DI), Y6
	VMOVDQU 100(DI), Y7
	VBROADCASTSS 64(DI), Y8
	VBROADCASTSS 132(DI), Y9
	ANVVROW((SI), 4(SI), 20(SI), Y0)
	ANVVROW((SI)(R8*1), 4(SI)(R8*1), 20(SI)(R8*1), Y1)
	ANVVROW((SI)(R8*2), 4(SI)(R8*2), 20(SI)(R8*2), Y2)
	ANVVROW((SI)(R9*1), 4(SI)(R9*1), 20(SI)(R9*1), Y3)
	ADDQ $36, SI
	ADDQ $136, DI
	DECQ CX
	JNZ anvvloop

	ANVHSUM(Y0, (DX))
	ANVHSUM(Y1, (DX)(R10*1))
	ANVHSUM(Y2, (DX)(R10*2))
	ANVHSUM(Y3, (DX)(R14*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ BX
	JNZ anvvrow
	VZEROUPPER
	RET
