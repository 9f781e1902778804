#include "textflag.h"

// AVX2 integer cores of the Q4_K and Q6_K dot products (kquant_dot.go):
// the eight 32-bit lanes of one super-block, s[l] = sum over the eight
// 32-value chunks c of scv[8c+l] * (w*x summed over values 32c+4l ..
// 32c+4l+3), with VPMADDUBSW (unsigned weights, signed activations; no
// pair can saturate: 63*127*2 < 32767) and VPMADDWD by ones, as ggml's
// AVX2 kernels do. Integer sums are exact, so the lanes are the Go twins'
// (q4kLanesGo, q6kLanesGo) bit for bit.

#define ONES16(r) MOVL $0x00010001, AX; VMOVD AX, X14; VPBROADCASTD X14, r

// CHUNK(w, xoff, scoff): s (Y13) += scv[scoff/4 ..] * lanes(w, x+xoff)
#define CHUNK(w, xoff, scoff) \
	VPMADDUBSW xoff(DI), w, w; \
	VPMADDWD Y14, w, w; \
	VPMULLD scoff(DX), w, w; \
	VPADDD w, Y13, Y13

// CHUNKB(w, xoff, scoff): the same with one scale for the chunk's eight
// lanes, broadcast from sc[scoff/4].
#define CHUNKB(w, xoff, scoff) \
	VPMADDUBSW xoff(DI), w, w; \
	VPMADDWD Y14, w, w; \
	VPBROADCASTD scoff(DX), Y3; \
	VPMULLD Y3, w, w; \
	VPADDD w, Y13, Y13

// func q4kLanesAVX2(q *byte, x *int8, sc *int32, s *int32)
// q: a Q4_K block's 128 quant bytes (chunk 2j: low nibbles of q[32j:],
// 2j+1: high nibbles); sc: the 8 chunks' scales.
TEXT ·q4kLanesAVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ sc+16(FP), DX
	MOVQ s+24(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	ONES16(Y14)
	VPXOR Y13, Y13, Y13

#define Q4J(j) \
	VMOVDQU (j*32)(SI), Y0; \
	VPAND Y15, Y0, Y1; \
	VPSRLW $4, Y0, Y2; \
	VPAND Y15, Y2, Y2; \
	CHUNKB(Y1, (j*64), (j*8)); \
	CHUNKB(Y2, (j*64+32), (j*8+4))

	Q4J(0)
	Q4J(1)
	Q4J(2)
	Q4J(3)
	VMOVDQU Y13, (R8)
	VZEROUPPER
	RET

// func q6kLanesAVX2(ql, qh *byte, x *int8, scv *int32, s *int32)
// ql, qh: a Q6_K block's 128 low-nibble and 64 high-bit bytes; the
// values unsigned (0..63, the -32 taken off by the caller).
TEXT ·q6kLanesAVX2(SB), NOSPLIT, $0-40
	MOVQ ql+0(FP), SI
	MOVQ qh+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ scv+24(FP), DX
	MOVQ s+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x03030303, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	ONES16(Y14)
	VPXOR Y13, Y13, Y13

// Q6N(n): values 128n..128n+127: ql[64n:], qh[32n:], x[128n:], scv[32n:]
#define Q6N(n) \
	VMOVDQU (n*64)(SI), Y0; \
	VMOVDQU (n*64+32)(SI), Y1; \
	VMOVDQU (n*32)(BX), Y2; \
	VPAND Y12, Y2, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPAND Y15, Y0, Y4; \
	VPOR Y3, Y4, Y4; \
	CHUNK(Y4, (n*128), (n*128)); \
	VPSRLW $2, Y2, Y3; \
	VPAND Y12, Y3, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPAND Y15, Y1, Y4; \
	VPOR Y3, Y4, Y4; \
	CHUNK(Y4, (n*128+32), (n*128+32)); \
	VPSRLW $4, Y2, Y3; \
	VPAND Y12, Y3, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPSRLW $4, Y0, Y4; \
	VPAND Y15, Y4, Y4; \
	VPOR Y3, Y4, Y4; \
	CHUNK(Y4, (n*128+64), (n*128+64)); \
	VPSRLW $6, Y2, Y3; \
	VPAND Y12, Y3, Y3; \
	VPSLLW $4, Y3, Y3; \
	VPSRLW $4, Y1, Y4; \
	VPAND Y15, Y4, Y4; \
	VPOR Y3, Y4, Y4; \
	CHUNK(Y4, (n*128+96), (n*128+96))

	Q6N(0)
	Q6N(1)
	VMOVDQU Y13, (R8)
	VZEROUPPER
	RET

// func q4kDotsAVX2(q *byte, x *int8, xstride, n int, sc *int16, out *int32)
// The integer dot products of one Q4_K block (q: its 128 quant bytes) with
// n activation blocks (x, then every xstride bytes), each sub-block scaled
// by sc[c] (VPMADDWD with the broadcast scale, as ggml's kernels apply
// them): out[v] = sum over c of sc[c] * (w*x over the 32 values of c).
// The block is unpacked once for all n vectors.
TEXT ·q4kDotsAVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xstride+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ sc+32(FP), DX
	MOVQ out+40(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

#define UNPACK(j, lo, hi) \
	VMOVDQU (j*32)(SI), lo; \
	VPSRLW $4, lo, hi; \
	VPAND Y15, lo, lo; \
	VPAND Y15, hi, hi

	UNPACK(0, Y0, Y1)
	UNPACK(1, Y2, Y3)
	UNPACK(2, Y4, Y5)
	UNPACK(3, Y6, Y7)
	TESTQ CX, CX
	JEQ q4kdone

#define DOTC(c, w) \
	VPMADDUBSW (c*32)(DI), w, Y9; \
	VPBROADCASTW (c*2)(DX), Y8; \
	VPMADDWD Y8, Y9, Y9; \
	VPADDD Y9, Y14, Y14

q4kloop:
	VPXOR Y14, Y14, Y14
	DOTC(0, Y0)
	DOTC(1, Y1)
	DOTC(2, Y2)
	DOTC(3, Y3)
	DOTC(4, Y4)
	DOTC(5, Y5)
	DOTC(6, Y6)
	DOTC(7, Y7)
	VEXTRACTI128 $1, Y14, X9
	VPADDD X9, X14, X14
	VPSHUFD $0x4E, X14, X9
	VPADDD X9, X14, X14
	VPSHUFD $0xB1, X14, X9
	VPADDD X9, X14, X14
	VMOVD X14, (R8)
	ADDQ $4, R8
	ADDQ R9, DI
	DECQ CX
	JNZ q4kloop

q4kdone:
	VZEROUPPER
	RET
