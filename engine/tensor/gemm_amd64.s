#include "textflag.h"

// AVX2 tile kernels for MatMul with several vectors: one weight row (three
// for F16 and BF16) against a group of vectors, so that each weight block
// is loaded and unpacked once for the whole group. Every (row, vector)
// pair keeps its own eight (W4A4: sixteen) lane accumulators and sees
// exactly the operations of its one-vector kernel (dot_amd64.s,
// nvfp4_amd64.s) and plain-Go twin, in the same order: only the exact
// integer sums of four products are formed differently (VPSIGNB and
// VPMADDUBSW instead of widening to int16), and F16's rounded product and
// add become one FMA, which rounds the same exact sum once. The Go
// wrappers in gemm_amd64.go add the lanes with hsum8 (the multi-row Q8_0
// kernels with HSUM8, the same additions).

// Words of 1, for VPMADDWD.
DATA gemmOnes<>+0(SB)/8, $0x0001000100010001
DATA gemmOnes<>+8(SB)/8, $0x0001000100010001
DATA gemmOnes<>+16(SB)/8, $0x0001000100010001
DATA gemmOnes<>+24(SB)/8, $0x0001000100010001
GLOBL gemmOnes<>(SB), RODATA|NOPTR, $32

// ---------------------------------------------------------------- Q8_0

// PAIRROWSINIT sets up the two-row tiles' walk after Q8ROWSINIT: R14 the
// h = rows/2 pairs (rows i and i+h), BX the second row's offset (h rows),
// R10 its outputs' (h floats); the flags tell whether h is 0.
#define PAIRROWSINIT \
	MOVQ R8, R14; \
	SHRQ $1, R14; \
	MOVQ R14, BX; \
	IMULQ rb+8(FP), BX; \
	MOVQ R14, R10; \
	SHLQ $2, R10; \
	TESTQ R14, R14


// Q8PAIR adds one block of one vector of the tile into acc. Y9: the weight
// quants, Y10: their absolute values, Y15: words of 1; the activation
// quants are at off(DI) and the pair's scale product d at doff(SP).
// |w| <= 128 as an unsigned byte times x*sign(w) (|x| <= 127: Q8_0
// activations hold -128 only after a NaN, and MatMul then does not come
// here; see packQ8Tile) cannot saturate
// VPMADDUBSW's int16 pair sums (2*128*127 < 2^15), so the dword k of the
// result is the exact integer sum of the products of quants 4k..4k+3:
// twin lane k. lane = fma(d, float32(isum), lane), as dotQ8.
#define Q8PAIR(off, doff, acc) \
	VMOVDQU off(DI), Y11; \
	VPSIGNB Y9, Y11, Y11; \
	VPMADDUBSW Y11, Y10, Y11; \
	VPMADDWD Y15, Y11, Y11; \
	VCVTDQ2PS Y11, Y11; \
	VBROADCASTSS doff(SP), Y12; \
	VFMADD231PS Y11, Y12, acc

// Q8WEIGHT readies one weight block at 0(SI): X8 = its F16 scale as F32,
// broadcast to Y8; Y9 the quants, Y10 their absolute values.
#define Q8WEIGHT \
	MOVWLZX (SI), AX; \
	VMOVD AX, X8; \
	VCVTPH2PS X8, X8; \
	VBROADCASTSS X8, Y8; \
	VMOVDQU 2(SI), Y9; \
	VPABSB Y9, Y10

// HSUM8 stores hsum8 of the eight lanes of acc (ymm) / accx (its xmm) at
// addr: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), ggml's hsum_float_8
// and kernels.go's hsum8, operand for operand. Clobbers X12, X13.
#define HSUM8(acc, accx, addr) \
	VEXTRACTF128 $1, acc, X12; \
	VADDPS X12, accx, X12; \
	VMOVHLPS X12, X12, X13; \
	VADDPS X13, X12, X12; \
	VMOVSHDUP X12, X13; \
	VADDSS X13, X12, X12; \
	VMOVSS X12, addr

// The multi-row Q8_0 tiles: rows rows of rb bytes from row, each against
// the packed vectors at act (nblk blocks), the lanes added with HSUM8 and
// stored to dst[v*dstride/4 + r]: the whole of gemmQ8Rows's loop for one
// group, without a return to Go per row. Registers: R11 the row, R12 the
// vectors, R13 nblk, R8 the rows left, DX the outputs of vector 0 of this
// row, BX those of vector 4; R9 = dstride, R10 = 3*dstride.
#define Q8ROWSINIT \
	MOVQ row+0(FP), R11; \
	MOVQ rows+16(FP), R8; \
	MOVQ act+24(FP), R12; \
	MOVQ nblk+32(FP), R13; \
	MOVQ dst+40(FP), DX; \
	MOVQ dstride+48(FP), R9; \
	LEAQ (R9)(R9*2), R10; \
	VMOVDQU gemmOnes<>(SB), Y15

#define Q8ROWSNEXT \
	ADDQ rb+8(FP), R11; \
	ADDQ $4, DX; \
	DECQ R8

// func gemmQ8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)
// One Q8_0 row (34-byte blocks) times eight vectors packed by packQ8Tile
// (per block: 8x32 quants, then the eight F32 scales): lanes[8*v+k] is
// lane k of vector v. nblk > 0.
TEXT ·gemmQ8Lanes1x8(SB), NOSPLIT, $32-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVDQU gemmOnes<>(SB), Y15

q8x8loop:
	Q8WEIGHT
	VMULPS 256(DI), Y8, Y8
	VMOVUPS Y8, (SP)
	Q8PAIR(0, 0, Y0)
	Q8PAIR(32, 4, Y1)
	Q8PAIR(64, 8, Y2)
	Q8PAIR(96, 12, Y3)
	Q8PAIR(128, 16, Y4)
	Q8PAIR(160, 20, Y5)
	Q8PAIR(192, 24, Y6)
	Q8PAIR(224, 28, Y7)
	ADDQ $34, SI
	ADDQ $288, DI
	DECQ CX
	JNZ q8x8loop

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

// gemmQ8Lanes1x4 (and gemmNVFP4Q8Lanes1x4 below) run a block behind on
// the FP side: while the integer sums of block b+1 are formed, block b's
// are scaled and added, and the four vectors' chains go op by op
// (Q8P4INTS). The multi-row tiles (gemmQ8Tile1x4, gemmQ8Tile1x2,
// gemmNVFP4Q8Tile1x2) take two rows at a time instead. Each
// (row, vector) lane sees the same operations in the same order as
// Q8PAIR's (so the same bits); only the order in which independent lanes'
// instructions are issued changes. A lane's chain (load, VPSIGNB,
// VPMADDUBSW, VPMADDWD, VCVTDQ2PS, FMA) is ~20 cycles long; issued chain
// by chain, one block per iteration, a Zen 3 kept fewer of them in flight.
// What it bought, weights and vectors in L1 (BenchmarkGemmKernels
// Q8_0-1x4 and W4A8-1x4, ten rounds interleaved with the old kernels on
// a Zen 3 VM whose speed varied by 1.5x): median 0.0369 -> 0.0350 ns per
// multiply-add for Q8_0, 0.0459 -> 0.0421 for W4A8, a few percent on a
// model pass. The kernels issue ~7 instructions per 32 multiply-adds of
// a (row, vector) pair, near the ~4 per cycle that core's FP side takes.

// AVX2PREFETCH is how far ahead the AVX2 tiles prefetch their weight
// streams into L2 (as VPREFETCH in vnni_amd64.s): the rows of a call
// follow one another in memory, so a stream runs on into the next row.
#define AVX2PREFETCH 2048

// Q8P4PREP readies the weight block at 0(SI) for the four vectors of the
// packed block at 0(DI): Y9 its quants, Y10 their absolute values, and the
// four scale products d = dw*dx at soff(SP).
#define Q8P4PREP(soff) \
	PREFETCHT1 AVX2PREFETCH(SI); \
	MOVWLZX (SI), AX; \
	VMOVD AX, X8; \
	VCVTPH2PS X8, X8; \
	VBROADCASTSS X8, X8; \
	VMULPS 128(DI), X8, X8; \
	VMOVUPS X8, soff(SP); \
	VMOVDQU 2(SI), Y9; \
	VPABSB Y9, Y10

// Q8P4INTS sets Y4-Y7 to the lanes' integer sums, as F32, of the four
// vectors of the packed block at 0(DI) against the weight block readied
// by Q8P4PREP (Q8PAIR's integer part). The four chains go op by op, not
// one after the other: their ops then enter the scheduler close to when
// their inputs are ready, and on a Zen 3 the FP scheduler, not the ports,
// was what a chain-by-chain order ran out of.
#define Q8P4INTS \
	VMOVDQU 0(DI), Y4; \
	VMOVDQU 32(DI), Y5; \
	VMOVDQU 64(DI), Y6; \
	VMOVDQU 96(DI), Y7; \
	VPSIGNB Y9, Y4, Y4; \
	VPSIGNB Y9, Y5, Y5; \
	VPSIGNB Y9, Y6, Y6; \
	VPSIGNB Y9, Y7, Y7; \
	VPMADDUBSW Y4, Y10, Y4; \
	VPMADDUBSW Y5, Y10, Y5; \
	VPMADDUBSW Y6, Y10, Y6; \
	VPMADDUBSW Y7, Y10, Y7; \
	VPMADDWD Y15, Y4, Y4; \
	VPMADDWD Y15, Y5, Y5; \
	VPMADDWD Y15, Y6, Y6; \
	VPMADDWD Y15, Y7, Y7; \
	VCVTDQ2PS Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7

// Q8P4FMAS adds Y4-Y7, scaled by the four products at s(SP), into Y0-Y3
// (Q8PAIR's FMA). The kernels below keep the block in flight in Y4-Y7
// and the products of alternate blocks in the slots at 0(SP) and 16(SP).
#define Q8P4FMAS(s) \
	VBROADCASTSS (s+0)(SP), Y11; \
	VBROADCASTSS (s+4)(SP), Y12; \
	VBROADCASTSS (s+8)(SP), Y13; \
	VBROADCASTSS (s+12)(SP), Y14; \
	VFMADD231PS Y4, Y11, Y0; \
	VFMADD231PS Y5, Y12, Y1; \
	VFMADD231PS Y6, Y13, Y2; \
	VFMADD231PS Y7, Y14, Y3

// func gemmQ8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)
// As gemmQ8Lanes1x8 for four vectors (per block: 4x32 quants, four
// scales). nblk > 0.
TEXT ·gemmQ8Lanes1x4(SB), NOSPLIT, $32-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VMOVDQU gemmOnes<>(SB), Y15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	Q8P4PREP(0)
	Q8P4INTS
	DECQ CX
	JZ q8x4even

q8x4loop: // the block at SI/DI is in flight (Y4-Y7, products at 0(SP))
	ADDQ $34, SI
	ADDQ $144, DI
	Q8P4PREP(16)
	Q8P4FMAS(0)
	Q8P4INTS
	DECQ CX
	JZ q8x4odd
	ADDQ $34, SI
	ADDQ $144, DI
	Q8P4PREP(0)
	Q8P4FMAS(16)
	Q8P4INTS
	DECQ CX
	JNZ q8x4loop

q8x4even: // the last block's products are at 0(SP)
	Q8P4FMAS(0)
	JMP q8x4done

q8x4odd: // at 16(SP)
	Q8P4FMAS(16)

q8x4done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func gemmQ8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)
// As gemmQ8Lanes1x8 for two vectors (per block: 2x32 quants, two scales).
// nblk > 0.
TEXT ·gemmQ8Lanes1x2(SB), NOSPLIT, $16-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VMOVDQU gemmOnes<>(SB), Y15

q8x2loop:
	Q8WEIGHT
	VMOVSD 64(DI), X13
	VMULPS X13, X8, X8
	VMOVUPS X8, (SP)
	Q8PAIR(0, 0, Y0)
	Q8PAIR(32, 4, Y1)
	ADDQ $34, SI
	ADDQ $72, DI
	DECQ CX
	JNZ q8x2loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func gemmQ8Tile1x8(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)
// rows > 0, nblk > 0.
TEXT ·gemmQ8Tile1x8(SB), NOSPLIT, $32-56
	Q8ROWSINIT

q8t8row:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q8t8loop:
	Q8WEIGHT
	VMULPS 256(DI), Y8, Y8
	VMOVUPS Y8, (SP)
	Q8PAIR(0, 0, Y0)
	Q8PAIR(32, 4, Y1)
	Q8PAIR(64, 8, Y2)
	Q8PAIR(96, 12, Y3)
	Q8PAIR(128, 16, Y4)
	Q8PAIR(160, 20, Y5)
	Q8PAIR(192, 24, Y6)
	Q8PAIR(224, 28, Y7)
	ADDQ $34, SI
	ADDQ $288, DI
	DECQ CX
	JNZ q8t8loop

	LEAQ (DX)(R9*4), BX
	HSUM8(Y0, X0, (DX))
	HSUM8(Y1, X1, (DX)(R9*1))
	HSUM8(Y2, X2, (DX)(R9*2))
	HSUM8(Y3, X3, (DX)(R10*1))
	HSUM8(Y4, X4, (BX))
	HSUM8(Y5, X5, (BX)(R9*1))
	HSUM8(Y6, X6, (BX)(R9*2))
	HSUM8(Y7, X7, (BX)(R10*1))
	Q8ROWSNEXT
	JNZ q8t8row
	VZEROUPPER
	RET

// Q8T4PAIR runs vector v (quants at 32v(DI)) of the block for both rows:
// the chains of (row 0, v) and (row 1, v) op by op, Q8PAIR's operations
// for each; the scale products are at 4v(SP) and 16+4v(SP).
#define Q8T4PAIR(v, a0, a1) \
	VMOVDQU (32*v)(DI), Y11; \
	VPSIGNB Y9, Y11, Y8; \
	VPSIGNB Y13, Y11, Y12; \
	VPMADDUBSW Y8, Y10, Y8; \
	VPMADDUBSW Y12, Y14, Y12; \
	VPMADDWD Y15, Y8, Y8; \
	VPMADDWD Y15, Y12, Y12; \
	VCVTDQ2PS Y8, Y8; \
	VCVTDQ2PS Y12, Y12; \
	VBROADCASTSS (4*v)(SP), Y11; \
	VFMADD231PS Y8, Y11, a0; \
	VBROADCASTSS (16+4*v)(SP), Y11; \
	VFMADD231PS Y12, Y11, a1

// func gemmQ8Tile1x4(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)
// rows > 0, nblk > 0. Rows i and i+h of the h = rows/2 pairs at a time (a
// last odd row alone, paired with itself and stored once), as
// gemmQ8Tile1x2: in a model pass the weights come from memory, and one
// stream ran at about half the rate of two. Registers: Y0-Y3 row 0's
// lanes, Y4-Y7 row 1's; R14 the pairs left, BX the second row's offset (0
// for the odd row), R10 its outputs', R15 3*dstride.
TEXT ·gemmQ8Tile1x4(SB), NOSPLIT, $32-56
	Q8ROWSINIT
	LEAQ (R9)(R9*2), R15 // 3*dstride
	PAIRROWSINIT
	JNZ q8t4rows
	XORQ BX, BX // one row

q8t4rows:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q8t4loop:
	PREFETCHT1 AVX2PREFETCH(SI)
	PREFETCHT1 AVX2PREFETCH(SI)(BX*1)
	VMOVUPS 128(DI), X11
	MOVWLZX (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	VBROADCASTSS X8, X8
	VMULPS X11, X8, X8
	VMOVUPS X8, (SP)
	MOVWLZX (SI)(BX*1), AX
	VMOVD AX, X12
	VCVTPH2PS X12, X12
	VBROADCASTSS X12, X12
	VMULPS X11, X12, X12
	VMOVUPS X12, 16(SP)
	VMOVDQU 2(SI), Y9
	VPABSB Y9, Y10
	VMOVDQU 2(SI)(BX*1), Y13
	VPABSB Y13, Y14
	Q8T4PAIR(0, Y0, Y4)
	Q8T4PAIR(1, Y1, Y5)
	Q8T4PAIR(2, Y2, Y6)
	Q8T4PAIR(3, Y3, Y7)
	ADDQ $34, SI
	ADDQ $144, DI
	DECQ CX
	JNZ q8t4loop

	HSUM8(Y0, X0, (DX))
	HSUM8(Y1, X1, (DX)(R9*1))
	HSUM8(Y2, X2, (DX)(R9*2))
	HSUM8(Y3, X3, (DX)(R15*1))
	TESTQ BX, BX
	JZ q8t4done // the odd row
	LEAQ (DX)(R10*1), AX
	HSUM8(Y4, X4, (AX))
	HSUM8(Y5, X5, (AX)(R9*1))
	HSUM8(Y6, X6, (AX)(R9*2))
	HSUM8(Y7, X7, (AX)(R15*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ R14
	JNZ q8t4rows
	TESTQ $1, R8
	JZ q8t4done
	LEAQ (R11)(BX*1), R11 // row 2h
	ADDQ R10, DX
	XORQ BX, BX
	JMP q8t4rows

q8t4done:
	VZEROUPPER
	RET

// func gemmQ8Tile1x2(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)
// rows > 0, nblk > 0. Two rows at a time, rows i and i+h of the h =
// rows/2 pairs (a last odd row alone, paired with itself and stored
// once): a block's four (row, vector) chains go op by op, and the weights
// come in two streams half the rows apart. With one row at a time (one
// stream, two chains) two vectors cost a Zen 3 as much as four in a model
// pass. Each pair's operations and their order are Q8PAIR's.
// Registers: R14 the pairs left, BX the second row's offset (h rows; 0
// for the odd row), R10 its outputs' (h floats).
TEXT ·gemmQ8Tile1x2(SB), NOSPLIT, $16-56
	Q8ROWSINIT
	PAIRROWSINIT
	JNZ q8t2rows
	XORQ BX, BX // one row

q8t2rows:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q8t2loop:
	PREFETCHT1 AVX2PREFETCH(SI)
	PREFETCHT1 AVX2PREFETCH(SI)(BX*1)
	MOVWLZX (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	VBROADCASTSS X8, X8
	MOVWLZX (SI)(BX*1), AX
	VMOVD AX, X6
	VCVTPH2PS X6, X6
	VBROADCASTSS X6, X6
	VMOVSD 64(DI), X7
	VMULPS X7, X8, X8
	VMULPS X7, X6, X6
	VMOVSD X8, (SP)
	VMOVSD X6, 8(SP)
	VMOVDQU 2(SI), Y9
	VPABSB Y9, Y10
	VMOVDQU 2(SI)(BX*1), Y13
	VPABSB Y13, Y14
	VMOVDQU 0(DI), Y4
	VMOVDQU 32(DI), Y5
	VPSIGNB Y9, Y4, Y6
	VPSIGNB Y9, Y5, Y7
	VPSIGNB Y13, Y4, Y11
	VPSIGNB Y13, Y5, Y12
	VPMADDUBSW Y6, Y10, Y6
	VPMADDUBSW Y7, Y10, Y7
	VPMADDUBSW Y11, Y14, Y11
	VPMADDUBSW Y12, Y14, Y12
	VPMADDWD Y15, Y6, Y6
	VPMADDWD Y15, Y7, Y7
	VPMADDWD Y15, Y11, Y11
	VPMADDWD Y15, Y12, Y12
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VCVTDQ2PS Y11, Y11
	VCVTDQ2PS Y12, Y12
	VBROADCASTSS 0(SP), Y8
	VFMADD231PS Y6, Y8, Y0
	VBROADCASTSS 4(SP), Y8
	VFMADD231PS Y7, Y8, Y1
	VBROADCASTSS 8(SP), Y8
	VFMADD231PS Y11, Y8, Y2
	VBROADCASTSS 12(SP), Y8
	VFMADD231PS Y12, Y8, Y3
	ADDQ $34, SI
	ADDQ $72, DI
	DECQ CX
	JNZ q8t2loop

	HSUM8(Y0, X0, (DX))
	HSUM8(Y1, X1, (DX)(R9*1))
	TESTQ BX, BX
	JZ q8t2done // the odd row
	LEAQ (DX)(R10*1), AX
	HSUM8(Y2, X2, (AX))
	HSUM8(Y3, X3, (AX)(R9*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ R14
	JNZ q8t2rows
	// the pairs are done: rows h..2h-1 too
	TESTQ $1, R8
	JZ q8t2done
	LEAQ (R11)(BX*1), R11 // row 2h
	ADDQ R10, DX
	XORQ BX, BX
	JMP q8t2rows

q8t2done:
	VZEROUPPER
	RET

// ---------------------------------------------------------------- F16, BF16

// HALFVEC runs one vector (eight columns at off) of the 3x4 tile: Y12-Y14
// hold the three rows' widened weights.
// F16: lane = fma(w, x, lane), which is dotF16's lane += float32(w*x):
// the product of two F16 values (11-bit significands, exponents within
// 2^-48..2^32) is exact in F32, so rounding the sum once is all either does.
#define F16VEC(xaddr, a0, a1, a2) \
	VMOVUPS xaddr, Y15; \
	VFMADD231PS Y15, Y12, a0; \
	VFMADD231PS Y15, Y13, a1; \
	VFMADD231PS Y15, Y14, a2

// BF16: lane += float32(w*x), a rounded product then a rounded add as
// dotBF16 (a BF16 product can fall outside F32's range, so no fusing).
#define BF16VEC(xaddr, a0, a1, a2) \
	VMULPS xaddr, Y12, Y15; \
	VADDPS Y15, a0, a0; \
	VMULPS xaddr, Y13, Y15; \
	VADDPS Y15, a1, a1; \
	VMULPS xaddr, Y14, Y15; \
	VADDPS Y15, a2, a2

#define HALFZERO \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

#define HALFSTORE \
	VMOVUPS Y0, (DX); \
	VMOVUPS Y1, 32(DX); \
	VMOVUPS Y2, 64(DX); \
	VMOVUPS Y3, 96(DX); \
	VMOVUPS Y4, 128(DX); \
	VMOVUPS Y5, 160(DX); \
	VMOVUPS Y6, 192(DX); \
	VMOVUPS Y7, 224(DX); \
	VMOVUPS Y8, 256(DX); \
	VMOVUPS Y9, 288(DX); \
	VMOVUPS Y10, 320(DX); \
	VMOVUPS Y11, 352(DX)

// func gemmF16Lanes3x4(w *uint16, stride int, x *float32, xstride int, nblk int, lanes *[96]float32)
// Three F16 rows (stride bytes apart) times four vectors (xstride bytes
// apart), nblk blocks of eight columns: lanes[8*(4*r+v)+k] is lane k of
// row r with vector v. Twelve independent chains.
TEXT ·gemmF16Lanes3x4(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ lanes+40(FP), DX
	LEAQ (R9)(R9*2), R10
	HALFZERO

f16x34loop:
	VCVTPH2PS (SI), Y12
	VCVTPH2PS (SI)(BX*1), Y13
	VCVTPH2PS (SI)(BX*2), Y14
	F16VEC((DI), Y0, Y4, Y8)
	F16VEC((DI)(R9*1), Y1, Y5, Y9)
	F16VEC((DI)(R9*2), Y2, Y6, Y10)
	F16VEC((DI)(R10*1), Y3, Y7, Y11)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ f16x34loop

	HALFSTORE
	VZEROUPPER
	RET

// func gemmBF16Lanes3x4(w *uint16, stride int, x *float32, xstride int, nblk int, lanes *[96]float32)
// As gemmF16Lanes3x4 for BF16 rows, summed as dotBF16.
TEXT ·gemmBF16Lanes3x4(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ lanes+40(FP), DX
	LEAQ (R9)(R9*2), R10
	HALFZERO

bf16x34loop:
	VPMOVZXWD (SI), Y12
	VPMOVZXWD (SI)(BX*1), Y13
	VPMOVZXWD (SI)(BX*2), Y14
	VPSLLD $16, Y12, Y12
	VPSLLD $16, Y13, Y13
	VPSLLD $16, Y14, Y14
	BF16VEC((DI), Y0, Y4, Y8)
	BF16VEC((DI)(R9*1), Y1, Y5, Y9)
	BF16VEC((DI)(R9*2), Y2, Y6, Y10)
	BF16VEC((DI)(R10*1), Y3, Y7, Y11)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bf16x34loop

	HALFSTORE
	VZEROUPPER
	RET

// ---------------------------------------------------------------- NVFP4

// ggml's doubled E2M1 values, for VPSHUFB (as nvfp4Tab in nvfp4_amd64.s).
DATA gemmE2M1<>+0(SB)/8, $0x0c08060403020100
DATA gemmE2M1<>+8(SB)/8, $0xf4f8fafcfdfeff00
DATA gemmE2M1<>+16(SB)/8, $0x0c08060403020100
DATA gemmE2M1<>+24(SB)/8, $0xf4f8fafcfdfeff00
GLOBL gemmE2M1<>(SB), RODATA|NOPTR, $32

DATA gemmLow<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gemmLow<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gemmLow<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gemmLow<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL gemmLow<>(SB), RODATA|NOPTR, $32

DATA gemmW7F<>+0(SB)/8, $0x007f007f007f007f
DATA gemmW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL gemmW7F<>(SB), RODATA|NOPTR, $16

DATA gemmF256<>+0(SB)/4, $0x43800000
GLOBL gemmF256<>(SB), RODATA|NOPTR, $4

// VPSHUFB control: scale bytes b0..b3 to the words b0 b0 b1 b1 b2 b2 b3 b3.
DATA gemmDup<>+0(SB)/8, $0x8001800180008000
DATA gemmDup<>+8(SB)/8, $0x8003800380028002
GLOBL gemmDup<>(SB), RODATA|NOPTR, $16

// NVSCALESR loads the block scales at off(SI) (see NVSCALES4) as
// floats into dst (an xmm register), tmp clobbered (and AX).
#define NVSCALESR(off, dst, tmp) \
	MOVL off(SI), AX; \
	VMOVD AX, dst; \
	VPMOVZXBW dst, dst; \
	VPAND gemmW7F<>(SB), dst, dst; \
	VPCMPEQW gemmW7F<>(SB), dst, tmp; \
	VPSLLW $7, dst, dst; \
	VPANDN dst, tmp, dst; \
	VCVTPH2PS dst, dst

// NVSCALES4 loads the four UE4M3 scale bytes at 0(SI) as floats (UE4M3 *
// 2^-8, the NaN code 0x7F zeroed, as nvfp4_amd64.s's NVFP4SCALES) into
// X13. Clobbers AX, X12.
#define NVSCALES4 NVSCALESR(0, X13, X12)

// NVHALF readies half h of the weight block at 0(SI) (code bytes off..off+15,
// sub-blocks 2h and 2h+1), as nvfp4_amd64.s's NVFP4CODES and NVFP4ROW: Y8
// the doubled E2M1 values in nibble order, Y9 their absolute values, Y10
// the lane scales [s s s' s' s s s' s'] (perm 0x50 for half 0, 0xFA for
// half 1). Clobbers Y11.
#define NVHALF(off, perm) \
	VPERMILPS $perm, X13, X10; \
	VINSERTF128 $1, X10, Y10, Y10; \
	VMOVDQU off(SI), X8; \
	VPSRLW $4, X8, X11; \
	VPAND gemmLow<>(SB), X8, X8; \
	VPAND gemmLow<>(SB), X11, X11; \
	VINSERTI128 $1, X11, Y8, Y8; \
	VPSHUFB Y8, Y14, Y8; \
	VPABSB Y8, Y9

// NVQ8PAIR adds one half block of one vector into acc: activation quants
// (nibble order) at qoff(DI), d*128 at doff(DI). Lane scale (UE4M3 * 2^-8)
// * (d * 128), both factors exact: dotNVFP4Q8's rounded UE4M3/2 * d.
#define NVQ8PAIR(qoff, doff, acc) \
	VBROADCASTSS doff(DI), Y12; \
	VMULPS Y12, Y10, Y12; \
	VMOVDQU qoff(DI), Y11; \
	VPSIGNB Y8, Y11, Y11; \
	VPMADDUBSW Y11, Y9, Y11; \
	VPMADDWD Y15, Y11, Y11; \
	VCVTDQ2PS Y11, Y11; \
	VFMADD231PS Y11, Y12, acc

// func gemmNVFP4Q8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)
// W4A8: one NVFP4 row (36-byte blocks) times eight vectors packed by
// packNVQ8Tile (per block: for each vector 64 quants, each Q8_0 block's 32
// in nibble order; then the eight d*128 of the first Q8_0 block, then
// those of the second). lanes[8*v+j] is register lane j of vector v (twin
// lane [0 1 4 5 2 3 6 7][j], as dotNVFP4Q8Lanes). nblk > 0.
TEXT ·gemmNVFP4Q8Lanes1x8(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVDQU gemmE2M1<>(SB), Y14
	VMOVDQU gemmOnes<>(SB), Y15

nvq8x8loop:
	NVSCALES4
	NVHALF(4, 0x50)
	NVQ8PAIR(0, 512, Y0)
	NVQ8PAIR(64, 516, Y1)
	NVQ8PAIR(128, 520, Y2)
	NVQ8PAIR(192, 524, Y3)
	NVQ8PAIR(256, 528, Y4)
	NVQ8PAIR(320, 532, Y5)
	NVQ8PAIR(384, 536, Y6)
	NVQ8PAIR(448, 540, Y7)
	NVHALF(20, 0xFA)
	NVQ8PAIR(32, 544, Y0)
	NVQ8PAIR(96, 548, Y1)
	NVQ8PAIR(160, 552, Y2)
	NVQ8PAIR(224, 556, Y3)
	NVQ8PAIR(288, 560, Y4)
	NVQ8PAIR(352, 564, Y5)
	NVQ8PAIR(416, 568, Y6)
	NVQ8PAIR(480, 572, Y7)
	ADDQ $36, SI
	ADDQ $576, DI
	DECQ CX
	JNZ nvq8x8loop

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

// NVHALFP is NVHALF with the lane scales to sc and Y12 as its scratch
// register, for gemmNVFP4Q8Lanes1x4, which keeps the previous half's
// scales in the other of Y10 and Y11 while the next half is readied.
#define NVHALFP(off, perm, sc, scx) \
	PREFETCHT1 AVX2PREFETCH(SI); \
	VPERMILPS $perm, X13, scx; \
	VINSERTF128 $1, scx, sc, sc; \
	VMOVDQU off(SI), X8; \
	VPSRLW $4, X8, X12; \
	VPAND gemmLow<>(SB), X8, X8; \
	VPAND gemmLow<>(SB), X12, X12; \
	VINSERTI128 $1, X12, Y8, Y8; \
	VPSHUFB Y8, Y14, Y8; \
	VPABSB Y8, Y9

// NVP4INTS sets Y4-Y7 to the integer lane sums, as F32, of the four
// vectors' half-block quants at q(DI), q+64, q+128, q+192 against the half
// readied in Y8/Y9 (NVQ8PAIR's integer part), op by op as Q8P4INTS.
#define NVP4INTS(q) \
	VMOVDQU (q+0)(DI), Y4; \
	VMOVDQU (q+64)(DI), Y5; \
	VMOVDQU (q+128)(DI), Y6; \
	VMOVDQU (q+192)(DI), Y7; \
	VPSIGNB Y8, Y4, Y4; \
	VPSIGNB Y8, Y5, Y5; \
	VPSIGNB Y8, Y6, Y6; \
	VPSIGNB Y8, Y7, Y7; \
	VPMADDUBSW Y4, Y9, Y4; \
	VPMADDUBSW Y5, Y9, Y5; \
	VPMADDUBSW Y6, Y9, Y6; \
	VPMADDUBSW Y7, Y9, Y7; \
	VPMADDWD Y15, Y4, Y4; \
	VPMADDWD Y15, Y5, Y5; \
	VPMADDWD Y15, Y6, Y6; \
	VPMADDWD Y15, Y7, Y7; \
	VCVTDQ2PS Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7

// NVP4FMA adds r times the lane scales sc times the factor at doff(DI)
// into acc (NVQ8PAIR's scale product and FMA).
#define NVP4FMA(doff, sc, r, acc) \
	VBROADCASTSS doff(DI), Y12; \
	VMULPS Y12, sc, Y12; \
	VFMADD231PS r, Y12, acc

// NVP4FMAS adds Y4-Y7 times the lane scales sc times the four factors
// from d(DI) into Y0-Y3.
#define NVP4FMAS(d, sc) \
	NVP4FMA(d, sc, Y4, Y0); \
	NVP4FMA(d+4, sc, Y5, Y1); \
	NVP4FMA(d+8, sc, Y6, Y2); \
	NVP4FMA(d+12, sc, Y7, Y3)

// func gemmNVFP4Q8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)
// As gemmNVFP4Q8Lanes1x8 for four vectors. nblk > 0. It runs half a block
// behind on the FP side, as the Q8_0 four-vector kernels do a block
// behind: while the integer sums of one half block are formed (Y4-Y7),
// the previous half's are scaled and added; the lanes' operations and
// their order are NVQ8PAIR's.
TEXT ·gemmNVFP4Q8Lanes1x4(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VMOVDQU gemmE2M1<>(SB), Y14
	VMOVDQU gemmOnes<>(SB), Y15

	// the first block's first half: integer part only
	NVSCALES4
	NVHALFP(4, 0x50, Y10, X10)
	NVP4INTS(0)
	JMP nvp4half1

nvp4loop: // half 1 of the block before DI is in flight (Y4-Y7, scales Y11)
	NVSCALES4
	NVHALFP(4, 0x50, Y10, X10)
	NVP4FMAS(-16, Y11)
	NVP4INTS(0)

nvp4half1: // half 0 of this block is in flight (scales Y10)
	NVHALFP(20, 0xFA, Y11, X11)
	NVP4FMAS(256, Y10)
	NVP4INTS(32)
	ADDQ $36, SI
	ADDQ $288, DI
	DECQ CX
	JNZ nvp4loop

	NVP4FMAS(-16, Y11)
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// NVHALFR is NVHALF for the half at off(SI) with its registers named:
// the block's scales at soff(SP), vals/abs the codes' doubled E2M1 values
// and their absolute values, sc (scx its xmm) the lane scales, tmp (tmpx)
// scratch.
#define NVHALFR(off, perm, soff, vals, valsx, abs, sc, scx, tmp, tmpx) \
	VPERMILPS $perm, soff(SP), scx; \
	VINSERTF128 $1, scx, sc, sc; \
	VMOVDQU off(SI), valsx; \
	VPSRLW $4, valsx, tmpx; \
	VPAND gemmLow<>(SB), valsx, valsx; \
	VPAND gemmLow<>(SB), tmpx, tmpx; \
	VINSERTI128 $1, tmpx, vals, vals; \
	VPSHUFB vals, Y14, vals; \
	VPABSB vals, abs

// NVT2PAIR runs vector v of half h (quants at q(DI), factor at d(DI))
// for both rows, op by op: row 0's half in Y8/Y9/Y10, row 1's in
// Y11/Y12/Y13 (NVQ8PAIR's operations for each).
#define NVT2PAIR(q, d, a0, a1) \
	VMOVDQU q(DI), Y4; \
	VPSIGNB Y8, Y4, Y5; \
	VPSIGNB Y11, Y4, Y6; \
	VPMADDUBSW Y5, Y9, Y5; \
	VPMADDUBSW Y6, Y12, Y6; \
	VPMADDWD Y15, Y5, Y5; \
	VPMADDWD Y15, Y6, Y6; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VBROADCASTSS d(DI), Y4; \
	VMULPS Y4, Y10, Y7; \
	VFMADD231PS Y5, Y7, a0; \
	VMULPS Y4, Y13, Y7; \
	VFMADD231PS Y6, Y7, a1

// NVHSUM8 stores hsum8(l0, l1, l4, l5, l2, l3, l6, l7) of the lanes of
// acc (ymm; accx its xmm, clobbered) at addr: ((l0+l2)+(l4+l6)) +
// ((l1+l3)+(l5+l7)), gemmNVQ8Rows's sum of the W4A8 lanes. Clobbers X12,
// X13.
#define NVHSUM8(acc, accx, addr) \
	VEXTRACTF128 $1, acc, X12; \
	VMOVHLPS accx, accx, X13; \
	VADDPS X13, accx, X13; \
	VMOVHLPS X12, X12, accx; \
	VADDPS accx, X12, X12; \
	VADDPS X12, X13, X13; \
	VMOVSHDUP X13, X12; \
	VADDSS X12, X13, X13; \
	VMOVSS X13, addr

// func gemmNVFP4Q8Tile1x2(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)
// W4A8, two vectors packed by packNVQ8Tile: dst[v*dstride/4 + r] is
// gemmNVQ8Rows's sum for row r and vector v. rows > 0, nblk > 0. Rows i
// and i+h of the h = rows/2 pairs at a time (a last odd row alone, paired
// with itself and stored once), as gemmQ8Tile1x2. Registers: Y0/Y1 row
// 0's lanes, Y2/Y3 row 1's; R14 the pairs left, BX the second row's
// offset (0 for the odd row), R10 its outputs'; the two rows' block
// scales at 0(SP) and 16(SP).
TEXT ·gemmNVFP4Q8Tile1x2(SB), NOSPLIT, $32-56
	Q8ROWSINIT
	VMOVDQU gemmE2M1<>(SB), Y14
	PAIRROWSINIT
	JNZ nvt2rows
	XORQ BX, BX // one row

nvt2rows:
	MOVQ R11, SI
	MOVQ R12, DI
	MOVQ R13, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

nvt2loop:
	PREFETCHT1 AVX2PREFETCH(SI)
	PREFETCHT1 AVX2PREFETCH(SI)(BX*1)
	NVSCALESR(0, X7, X4)
	VMOVUPS X7, (SP)
	ADDQ BX, SI
	NVSCALESR(0, X7, X4)
	VMOVUPS X7, 16(SP)
	NVHALFR(4, 0x50, 16, Y11, X11, Y12, Y13, X13, Y7, X7)
	SUBQ BX, SI
	NVHALFR(4, 0x50, 0, Y8, X8, Y9, Y10, X10, Y7, X7)
	NVT2PAIR(0, 128, Y0, Y2)
	NVT2PAIR(64, 132, Y1, Y3)
	ADDQ BX, SI
	NVHALFR(20, 0xFA, 16, Y11, X11, Y12, Y13, X13, Y7, X7)
	SUBQ BX, SI
	NVHALFR(20, 0xFA, 0, Y8, X8, Y9, Y10, X10, Y7, X7)
	NVT2PAIR(32, 136, Y0, Y2)
	NVT2PAIR(96, 140, Y1, Y3)
	ADDQ $36, SI
	ADDQ $144, DI
	DECQ CX
	JNZ nvt2loop

	NVHSUM8(Y0, X0, (DX))
	NVHSUM8(Y1, X1, (DX)(R9*1))
	TESTQ BX, BX
	JZ nvt2done // the odd row
	LEAQ (DX)(R10*1), AX
	NVHSUM8(Y2, X2, (AX))
	NVHSUM8(Y3, X3, (AX)(R9*1))
	ADDQ rb+8(FP), R11
	ADDQ $4, DX
	DECQ R14
	JNZ nvt2rows
	TESTQ $1, R8
	JZ nvt2done
	LEAQ (R11)(BX*1), R11 // row 2h
	ADDQ R10, DX
	XORQ BX, BX
	JMP nvt2rows

nvt2done:
	VZEROUPPER
	RET

// func gemmNVFP4Q8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)
// As gemmNVFP4Q8Lanes1x8 for two vectors. nblk > 0.
TEXT ·gemmNVFP4Q8Lanes1x2(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VMOVDQU gemmE2M1<>(SB), Y14
	VMOVDQU gemmOnes<>(SB), Y15

nvq8x2loop:
	NVSCALES4
	NVHALF(4, 0x50)
	NVQ8PAIR(0, 128, Y0)
	NVQ8PAIR(64, 132, Y1)
	NVHALF(20, 0xFA)
	NVQ8PAIR(32, 136, Y0)
	NVQ8PAIR(96, 140, Y1)
	ADDQ $36, SI
	ADDQ $144, DI
	DECQ CX
	JNZ nvq8x2loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// NVF4PAIR adds one block of one vector (an fp4Act: codes at lo and hi,
// lane factors at d) into accLo
// (twin lanes 0-7) and accHi (lanes 8-15). Y8, Y10: the weight's doubled
// codes of the low and high nibbles, Y9, Y11 their absolute values, Y12
// the row's lane scales UE4M3 (sub-block k/2). d = UE4M3 * SF/4, rounded
// as dotNVFP4FP4's; d*isum is exact, so the fused step is its add.
#define NVF4PAIR(lo, hi, d, accLo, accHi) \
	VMULPS d, Y12, Y15; \
	VMOVDQU lo, Y13; \
	VPSIGNB Y8, Y13, Y13; \
	VPMADDUBSW Y13, Y9, Y13; \
	VPMADDWD gemmOnes<>(SB), Y13, Y13; \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS Y13, Y15, accLo; \
	VMOVDQU hi, Y13; \
	VPSIGNB Y10, Y13, Y13; \
	VPMADDUBSW Y13, Y11, Y13; \
	VPMADDWD gemmOnes<>(SB), Y13, Y13; \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS Y13, Y15, accHi

// func gemmNVFP4FP4Lanes1x4(row *byte, act *fp4Act, xstride int, nblk int, lanes *[32]float32)
// W4A4: one NVFP4 row times four vectors of fp4Act blocks, xstride bytes
// apart: lanes[8*v+k] is twin lane k + twin lane k+8 of vector v (as
// dotNVFP4FP4Lanes). nblk > 0.
TEXT ·gemmNVFP4FP4Lanes1x4(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ xstride+16(FP), BX
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (BX)(BX*2), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVDQU gemmE2M1<>(SB), Y14

nvf4x4loop:
	// Lane scales: bytes b0 b0 b1 b1 .. as words, UE4M3 * 2^-8, times 256.
	MOVL 0(SI), AX
	VMOVD AX, X12
	VPSHUFB gemmDup<>(SB), X12, X12
	VPAND gemmW7F<>(SB), X12, X12
	VPCMPEQW gemmW7F<>(SB), X12, X13
	VPSLLW $7, X12, X12
	VPANDN X12, X13, X12
	VCVTPH2PS X12, Y12
	VBROADCASTSS gemmF256<>(SB), Y13
	VMULPS Y13, Y12, Y12
	// The 32 code bytes: low nibbles Y8, high nibbles Y10.
	VMOVDQU 4(SI), Y8
	VPSRLW $4, Y8, Y10
	VPAND gemmLow<>(SB), Y8, Y8
	VPAND gemmLow<>(SB), Y10, Y10
	VPSHUFB Y8, Y14, Y8
	VPSHUFB Y10, Y14, Y10
	VPABSB Y8, Y9
	VPABSB Y10, Y11
	NVF4PAIR((DI), 32(DI), 64(DI), Y0, Y1)
	NVF4PAIR((DI)(BX*1), 32(DI)(BX*1), 64(DI)(BX*1), Y2, Y3)
	NVF4PAIR((DI)(BX*2), 32(DI)(BX*2), 64(DI)(BX*2), Y4, Y5)
	NVF4PAIR((DI)(R9*1), 32(DI)(R9*1), 64(DI)(R9*1), Y6, Y7)
	ADDQ $36, SI
	ADDQ $96, DI
	DECQ CX
	JNZ nvf4x4loop

	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VMOVUPS Y0, (DX)
	VMOVUPS Y2, 32(DX)
	VMOVUPS Y4, 64(DX)
	VMOVUPS Y6, 96(DX)
	VZEROUPPER
	RET
