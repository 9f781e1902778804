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

// Macros of q4kStepAVX2: UNPACK splits 32 quant bytes into the low and
// high nibbles of two sub-blocks; DOTC adds sub-block c's scaled sums
// (VPMADDUBSW, then VPMADDWD by the broadcast scale) into Y14.
#define UNPACK(j, lo, hi) \
	VMOVDQU (j*32)(SI), lo; \
	VPSRLW $4, lo, hi; \
	VPAND Y15, lo, lo; \
	VPAND Y15, hi, hi

#define DOTC(c, w) \
	VPMADDUBSW (c*32)(DI), w, Y9; \
	VPBROADCASTW (c*2)(DX), Y8; \
	VPMADDWD Y8, Y9, Y9; \
	VPADDD Y9, Y14, Y14


// func q4kStepAVX2(q *byte, a *q8KAct, astride, n int, sm *uint32, scratch *int16, dW, dminW float32, acc *float32)
// One repacked Q4_K block against n activation blocks (a, then every
// astride bytes), the whole step of ggml_gemv_q4_K_8x8_q8_K for each:
// s = sum_c sc[c]*(w*x over sub-block c), smin = sum_c min[c]*(the
// activation sums of c's two halves), acc[2v] = fma(float(s), dW*d,
// acc[2v]), acc[2v+1] = fma(float(smin), dminW*d, acc[2v+1]) with d the
// activation block's scale. sm: the 8 scale bytes then the 8 min bytes,
// as ggml's utmp shuffle leaves them; scratch: 8 int16 for the scales.
TEXT ·q4kStepAVX2(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ astride+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ sm+32(FP), R10
	MOVQ scratch+40(FP), DX
	MOVQ acc+56(FP), R8
	VMOVQ (R10), X8
	VPMOVZXBW X8, X8
	VMOVDQU X8, (DX)
	VMOVQ 8(R10), X9
	VPUNPCKLBW X9, X9, X9
	VPMOVZXBW X9, Y11
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	UNPACK(0, Y0, Y1)
	UNPACK(1, Y2, Y3)
	UNPACK(2, Y4, Y5)
	UNPACK(3, Y6, Y7)
	TESTQ CX, CX
	JEQ q4ksdone

q4ksloop:
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
	VCVTDQ2PS X14, X14          // float(s)
	VPMADDWD 256(DI), Y11, Y10   // mins * bsums, by pairs
	VEXTRACTI128 $1, Y10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0x4E, X10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0xB1, X10, X9
	VPADDD X9, X10, X10
	VCVTDQ2PS X10, X10          // float(sm)
	VMOVSS 288(DI), X12          // d
	VMULSS dW+48(FP), X12, X13   // dW*d
	VMOVSS (R8), X9
	VFMADD231SS X13, X14, X9     // X9 = s*(dW*d) + acc
	VMOVSS X9, (R8)
	VMULSS dminW+52(FP), X12, X13
	VMOVSS 4(R8), X9
	VFMADD231SS X13, X10, X9
	VMOVSS X9, 4(R8)
	ADDQ $8, R8
	ADDQ R9, DI
	DECQ CX
	JNZ q4ksloop

q4ksdone:
	VZEROUPPER
	RET

// func q6kStepAVX2(ql, qh, sc *byte, a *q8KAct, astride, n int, scratch *int16, shuf *byte, dW float32, acc *float32)
// One Q6_K block against n activation blocks, the whole step of
// ggml_vec_dot_q6_K_q8_K (AVX2) for each: the lanes with the sub-block
// scales, less 32*(bsums*sc by pairs), then acc[8v:8v+8] =
// fma(d_x*dW, float(lanes), acc[8v:8v+8]). sc: the block's 16 int8
// scales; the per-chunk scale vectors (each chunk's two scales, eight
// int16 each, as ggml's get_scale_shuffle makes them with shuf's eight
// masks) and the 16 scales widened go to scratch (144 int16) once.
TEXT ·q6kStepAVX2(SB), NOSPLIT, $0-80
	MOVQ ql+0(FP), SI
	MOVQ qh+8(FP), BX
	MOVQ sc+16(FP), AX
	MOVQ a+24(FP), DI
	MOVQ astride+32(FP), R9
	MOVQ n+40(FP), CX
	MOVQ scratch+48(FP), DX
	MOVQ shuf+56(FP), R11
	MOVQ acc+72(FP), R8
	VMOVDQU (AX), X8
	VPMOVSXBW X8, Y9
	VMOVDQU Y9, 256(DX)

#define SCV(c) \
	VPSHUFB (c*16)(R11), X8, X10; \
	VPMOVSXBW X10, Y10; \
	VMOVDQU Y10, (c*32)(DX)

	SCV(0)
	SCV(1)
	SCV(2)
	SCV(3)
	SCV(4)
	SCV(5)
	SCV(6)
	SCV(7)
	LEAQ 256(DX), R10
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x03030303, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12

// Q6U(n, c0, c1, c2, c3): the four chunks of values 128n..128n+127.
#define Q6U(n, c0, c1, c2, c3) \
	VMOVDQU (n*64)(SI), Y8; \
	VMOVDQU (n*64+32)(SI), Y9; \
	VMOVDQU (n*32)(BX), Y10; \
	VPAND Y12, Y10, c0; \
	VPSLLW $4, c0, c0; \
	VPAND Y15, Y8, Y11; \
	VPOR Y11, c0, c0; \
	VPSRLW $2, Y10, c1; \
	VPAND Y12, c1, c1; \
	VPSLLW $4, c1, c1; \
	VPAND Y15, Y9, Y11; \
	VPOR Y11, c1, c1; \
	VPSRLW $4, Y10, c2; \
	VPAND Y12, c2, c2; \
	VPSLLW $4, c2, c2; \
	VPSRLW $4, Y8, Y11; \
	VPAND Y15, Y11, Y11; \
	VPOR Y11, c2, c2; \
	VPSRLW $6, Y10, c3; \
	VPAND Y12, c3, c3; \
	VPSLLW $4, c3, c3; \
	VPSRLW $4, Y9, Y11; \
	VPAND Y15, Y11, Y11; \
	VPOR Y11, c3, c3

// Q6UR is Q6U with the 0x03 mask in Y13 (q6kRowAVX2 keeps its lanes in Y12).
#define Q6UR(n, c0, c1, c2, c3) \
	VMOVDQU (n*64)(SI), Y8; \
	VMOVDQU (n*64+32)(SI), Y9; \
	VMOVDQU (n*32)(BX), Y10; \
	VPAND Y13, Y10, c0; \
	VPSLLW $4, c0, c0; \
	VPAND Y15, Y8, Y11; \
	VPOR Y11, c0, c0; \
	VPSRLW $2, Y10, c1; \
	VPAND Y13, c1, c1; \
	VPSLLW $4, c1, c1; \
	VPAND Y15, Y9, Y11; \
	VPOR Y11, c1, c1; \
	VPSRLW $4, Y10, c2; \
	VPAND Y13, c2, c2; \
	VPSLLW $4, c2, c2; \
	VPSRLW $4, Y8, Y11; \
	VPAND Y15, Y11, Y11; \
	VPOR Y11, c2, c2; \
	VPSRLW $6, Y10, c3; \
	VPAND Y13, c3, c3; \
	VPSLLW $4, c3, c3; \
	VPSRLW $4, Y9, Y11; \
	VPAND Y15, Y11, Y11; \
	VPOR Y11, c3, c3

	Q6U(0, Y0, Y1, Y2, Y3)
	Q6U(1, Y4, Y5, Y6, Y7)
	VBROADCASTSS dW+64(FP), Y13
	TESTQ CX, CX
	JEQ q6ksdone

#define DOT6(c, w) \
	VPMADDUBSW (c*32)(DI), w, Y9; \
	VPMADDWD (c*32)(DX), Y9, Y9; \
	VPADDD Y9, Y14, Y14

q6ksloop:
	VPXOR Y14, Y14, Y14
	DOT6(0, Y0)
	DOT6(1, Y1)
	DOT6(2, Y2)
	DOT6(3, Y3)
	DOT6(4, Y4)
	DOT6(5, Y5)
	DOT6(6, Y6)
	DOT6(7, Y7)
	VMOVDQU 256(DI), Y10
	VPMADDWD (R10), Y10, Y10
	VPSLLD $5, Y10, Y10
	VPSUBD Y10, Y14, Y14
	VCVTDQ2PS Y14, Y14
	VBROADCASTSS 288(DI), Y9
	VMULPS Y13, Y9, Y9          // d_x*dW
	VMOVUPS (R8), Y10
	VFMADD231PS Y9, Y14, Y10    // acc = lanes*d + acc
	VMOVUPS Y10, (R8)
	ADDQ $32, R8
	ADDQ R9, DI
	DECQ CX
	JNZ q6ksloop

q6ksdone:
	VZEROUPPER
	RET

// func legacyRowRepackedAVX2(row *byte, act *q8Act, nb int, lut *int8) float32
// One row of nb Q4_0 or IQ4_NL blocks (18 bytes: F16 d, 16 nibble bytes)
// against one vector's Q8_0 blocks, in the arithmetic of ggml's repacked
// gemv (gemv_q4_b32_8x8_q8_0_lut_avx): per block, the integer dot of the
// 32 values (lut[nibble]: n-8 for Q4_0, kvalues_iq4nl for IQ4_NL) with
// the quants, then acc = fma(float(dot), d_w*d_x, acc).
TEXT ·legacyRowRepackedAVX2(SB), NOSPLIT, $0-36
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ lut+24(FP), DX
	VBROADCASTI128 (DX), Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x00010001, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VXORPS X0, X0, X0
	TESTQ CX, CX
	JEQ lrdone

lrloop:
	MOVWLZX (SI), AX
	VMOVD AX, X1
	VCVTPH2PS X1, X1
	VMULSS 32(DI), X1, X1        // d_w * d_x
	VMOVDQU 2(SI), X2
	VPSRLW $4, X2, X3
	VPAND X14, X2, X2
	VPAND X14, X3, X3
	VINSERTI128 $1, X3, Y2, Y2   // values 0-15: low nibbles, 16-31: high
	VPSHUFB Y2, Y15, Y2          // the levels
	VMOVDQU (DI), Y4
	VPSIGNB Y2, Y2, Y5           // |w|
	VPSIGNB Y2, Y4, Y6           // x * sign(w)
	VPMADDUBSW Y6, Y5, Y5
	VPMADDWD Y13, Y5, Y5
	VEXTRACTI128 $1, Y5, X6
	VPADDD X6, X5, X5
	VPSHUFD $0x4E, X5, X6
	VPADDD X6, X5, X5
	VPSHUFD $0xB1, X5, X6
	VPADDD X6, X5, X5
	VCVTDQ2PS X5, X5
	VFMADD231SS X1, X5, X0       // acc = dot*d + acc
	ADDQ $18, SI
	ADDQ $36, DI
	DECQ CX
	JNZ lrloop

lrdone:
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// func q4kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16) float32
// A whole row of nb repacked Q4_K blocks against one vector (decode): the
// steps of q4kStepAVX2 block after block, the scales unpacked from the
// block's twelve bytes here (ggml's utmp shuffle), and the result
// acc - accMin.
TEXT ·q4kRowAVX2(SB), NOSPLIT, $0-36
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ scratch+24(FP), DX
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VXORPS X12, X12, X12
	VXORPS X13, X13, X13
	TESTQ CX, CX
	JEQ q4krdone

q4krloop:
	MOVL 4(SI), R10              // u0
	MOVL 8(SI), R11              // u1
	MOVL 12(SI), R12             // u2
	MOVL R11, R13
	SHRL $6, R13
	ANDL $0x03030303, R13
	SHLL $4, R13
	MOVL R12, AX
	SHRL $4, AX
	ANDL $0x0F0F0F0F, AX
	ORL AX, R13                  // sm3 = mins 4-7
	MOVL R11, BX
	ANDL $0x3F3F3F3F, BX         // sm2 = mins 0-3
	MOVL R10, AX
	SHRL $6, AX
	ANDL $0x03030303, AX
	SHLL $4, AX
	ANDL $0x0F0F0F0F, R12
	ORL AX, R12                  // sm1 = scales 4-7
	ANDL $0x3F3F3F3F, R10        // sm0 = scales 0-3
	VMOVD R10, X8
	VPINSRD $1, R12, X8, X8
	VPMOVZXBW X8, X8
	VMOVDQU X8, (DX)             // the scales as int16, for DOTC's broadcasts
	VMOVD BX, X9
	VPINSRD $1, R13, X9, X9
	VPUNPCKLBW X9, X9, X9
	VPMOVZXBW X9, Y11            // each min twice
	ADDQ $16, SI                 // the quants
	UNPACK(0, Y0, Y1)
	UNPACK(1, Y2, Y3)
	UNPACK(2, Y4, Y5)
	UNPACK(3, Y6, Y7)
	SUBQ $16, SI
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
	VCVTDQ2PS X14, X14           // float(s)
	VPMADDWD 256(DI), Y11, Y10
	VEXTRACTI128 $1, Y10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0x4E, X10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0xB1, X10, X9
	VPADDD X9, X10, X10
	VCVTDQ2PS X10, X10           // float(sm)
	MOVWLZX (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8             // d_w
	MOVWLZX 2(SI), AX
	VMOVD AX, X9
	VCVTPH2PS X9, X9             // dmin_w
	VMULSS 288(DI), X8, X8       // d_w*d_x
	VMULSS 288(DI), X9, X9       // dmin_w*d_x
	VFMADD231SS X8, X14, X12
	VFMADD231SS X9, X10, X13
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q4krloop

q4krdone:
	VSUBSS X13, X12, X12
	VZEROUPPER
	MOVSS X12, ret+32(FP)
	RET

// DOT6R(c, w): DOT6 with chunk c's scale vector made in registers from the
// block's scales (X8) by ggml's get_scale_shuffle mask c.
#define DOT6R(c, w) \
	VPSHUFB (c*16)(R11), X8, X10; \
	VPMOVSXBW X10, Y10; \
	VPMADDUBSW (c*32)(DI), w, Y9; \
	VPMADDWD Y10, Y9, Y9; \
	VPADDD Y9, Y14, Y14

// func q6kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, shuf *byte, acc *float32)
// A whole row of nb Q6_K blocks against one vector (decode): the steps of
// q6kStepAVX2 block after block, the eight lanes kept in Y12 and stored to
// acc at the end (the caller adds them as hsum_float_8 does).
TEXT ·q6kRowAVX2(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), R12
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ scratch+24(FP), DX
	MOVQ shuf+32(FP), R11
	MOVQ acc+40(FP), R8
	VXORPS Y12, Y12, Y12
	TESTQ CX, CX
	JEQ q6krdone

q6krloop:
	MOVQ R12, SI                 // ql
	LEAQ 128(R12), BX            // qh
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x03030303, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	Q6UR(0, Y0, Y1, Y2, Y3)
	Q6UR(1, Y4, Y5, Y6, Y7)
	VMOVDQU 192(R12), X8         // the 16 scales
	VPMOVSXBW X8, Y11            // widened, for the offset's correction
	VPXOR Y14, Y14, Y14
	DOT6R(0, Y0)
	DOT6R(1, Y1)
	DOT6R(2, Y2)
	DOT6R(3, Y3)
	DOT6R(4, Y4)
	DOT6R(5, Y5)
	DOT6R(6, Y6)
	DOT6R(7, Y7)
	VMOVDQU 256(DI), Y10
	VPMADDWD Y11, Y10, Y10
	VPSLLD $5, Y10, Y10
	VPSUBD Y10, Y14, Y14
	VCVTDQ2PS Y14, Y14
	MOVWLZX 208(R12), AX
	VMOVD AX, X9
	VCVTPH2PS X9, X9             // d_w
	VMULSS 288(DI), X9, X9       // d_x*d_w (ggml: y.d * x.d)
	VBROADCASTSS X9, Y9
	VFMADD231PS Y9, Y14, Y12
	ADDQ $210, R12
	ADDQ $292, DI
	DECQ CX
	JNZ q6krloop

q6krdone:
	VMOVUPS Y12, (R8)
	VZEROUPPER
	RET

// func q5kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, out *float32)
// A whole row of nb Q5_K blocks against one vector, in the arithmetic of
// ggml_vec_dot_q5_K_q8_K (AVX2): per block the eight lanes (low nibble
// plus the fifth bit from qh, times the activations, the sub-block scales
// by VPMADDWD), lanes = fma(d_x*d_w, float(lanes), lanes), and summs =
// fma(-d_x*dmin_w, float(mins . bsums), summs). out: the eight lanes, then
// summs (the caller adds hsum_float_8(lanes) + summs).
TEXT ·q5kRowAVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ scratch+24(FP), DX
	MOVQ out+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VXORPS Y12, Y12, Y12
	VXORPS X13, X13, X13
	TESTQ CX, CX
	JEQ q5krdone

#define Q5UNPACK(j, lo, hi) \
	VMOVDQU (48+j*32)(SI), lo; \
	VPSRLW $4, lo, hi; \
	VPAND Y15, lo, lo; \
	VPAND Y15, hi, hi; \
	VPSRLW $(2*j), Y10, Y8; \
	VPAND Y11, Y8, Y8; \
	VPSLLW $4, Y8, Y8; \
	VPOR Y8, lo, lo; \
	VPSRLW $(2*j+1), Y10, Y8; \
	VPAND Y11, Y8, Y8; \
	VPSLLW $4, Y8, Y8; \
	VPOR Y8, hi, hi

q5krloop:
	MOVL 4(SI), R10              // u0
	MOVL 8(SI), R11              // u1
	MOVL 12(SI), R12             // u2
	MOVL R11, R13
	SHRL $6, R13
	ANDL $0x03030303, R13
	SHLL $4, R13
	MOVL R12, AX
	SHRL $4, AX
	ANDL $0x0F0F0F0F, AX
	ORL AX, R13                  // mins 4-7
	MOVL R11, BX
	ANDL $0x3F3F3F3F, BX         // mins 0-3
	MOVL R10, AX
	SHRL $6, AX
	ANDL $0x03030303, AX
	SHLL $4, AX
	ANDL $0x0F0F0F0F, R12
	ORL AX, R12                  // scales 4-7
	ANDL $0x3F3F3F3F, R10        // scales 0-3
	VMOVD R10, X8
	VPINSRD $1, R12, X8, X8
	VPMOVZXBW X8, X8
	VMOVDQU X8, (DX)
	MOVL $0x01010101, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	VMOVDQU 16(SI), Y10          // qh
	Q5UNPACK(0, Y0, Y1)
	Q5UNPACK(1, Y2, Y3)
	Q5UNPACK(2, Y4, Y5)
	Q5UNPACK(3, Y6, Y7)
	VPXOR Y14, Y14, Y14
	DOTC(0, Y0)
	DOTC(1, Y1)
	DOTC(2, Y2)
	DOTC(3, Y3)
	DOTC(4, Y4)
	DOTC(5, Y5)
	DOTC(6, Y6)
	DOTC(7, Y7)
	VMOVD BX, X9
	VPINSRD $1, R13, X9, X9
	VPUNPCKLBW X9, X9, X9
	VPMOVZXBW X9, Y11            // each min twice
	VPMADDWD 256(DI), Y11, Y10
	VEXTRACTI128 $1, Y10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0x4E, X10, X9
	VPADDD X9, X10, X10
	VPSHUFD $0xB1, X10, X9
	VPADDD X9, X10, X10
	VCVTDQ2PS X10, X10           // float(mins . bsums)
	MOVWLZX 2(SI), AX
	VMOVD AX, X9
	VCVTPH2PS X9, X9             // dmin_w
	VMULSS 288(DI), X9, X9       // d_x*dmin_w
	VFNMADD231SS X9, X10, X13    // summs -= (d_x*dmin_w)*sm, fused
	VCVTDQ2PS Y14, Y14
	MOVWLZX (SI), AX
	VMOVD AX, X9
	VCVTPH2PS X9, X9             // d_w
	VMULSS 288(DI), X9, X9       // d_x*d_w
	VBROADCASTSS X9, Y9
	VFMADD231PS Y9, Y14, Y12
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q5krloop

q5krdone:
	VMOVUPS Y12, (R8)
	VMOVSS X13, 32(R8)
	VZEROUPPER
	RET

// func iq4xsRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, lut *int8, acc *float32)
// A whole row of nb IQ4_XS blocks (136 bytes: F16 d, u16 scales_h, 4
// scales_l, 128 nibble bytes) against one vector, in the arithmetic of
// ggml_vec_dot_iq4_xs_q8_K (AVX2): per block the eight lanes (levels
// kvalues_iq4nl[nibble] times the activations, by the sign trick; each
// 32-value sub-block's 6-bit scale less 32 by VPMADDWD), then lanes =
// fma(d_w*d_x, float(lanes), lanes). acc receives the eight lanes (the
// caller adds them as hsum_float_8 does).
TEXT ·iq4xsRowAVX2(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ scratch+24(FP), DX
	MOVQ lut+32(FP), R11
	MOVQ acc+40(FP), R8
	VBROADCASTI128 (R11), Y13
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VXORPS Y12, Y12, Y12
	TESTQ CX, CX
	JEQ iq4rdone

iq4rloop:
	// the eight scales: ((scales_l[ib/2] >> 4*(ib%2)) & 15) | ((scales_h >> 2*ib) & 3) << 4, less 32
	MOVWLZX 2(SI), BX            // scales_h
	MOVL 4(SI), R10              // scales_l (4 bytes)
	XORQ R12, R12
iq4sc:
	MOVL R10, AX
	ANDL $15, AX
	MOVL BX, R13
	ANDL $3, R13
	SHLL $4, R13
	ORL R13, AX
	SUBL $32, AX
	MOVW AX, (DX)(R12*2)
	SHRL $4, R10
	SHRL $2, BX
	INCQ R12
	CMPQ R12, $8
	JLT iq4sc
	VPXOR Y14, Y14, Y14

#define IQ4C(c) \
	VMOVDQU (8+c*16)(SI), X2; \
	VPSRLW $4, X2, X3; \
	VPAND X15, X2, X2; \
	VPAND X15, X3, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPSHUFB Y2, Y13, Y2; \
	VMOVDQU (c*32)(DI), Y4; \
	VPSIGNB Y2, Y2, Y5; \
	VPSIGNB Y2, Y4, Y6; \
	VPMADDUBSW Y6, Y5, Y5; \
	VPBROADCASTW (c*2)(DX), Y8; \
	VPMADDWD Y8, Y5, Y5; \
	VPADDD Y5, Y14, Y14

	IQ4C(0)
	IQ4C(1)
	IQ4C(2)
	IQ4C(3)
	IQ4C(4)
	IQ4C(5)
	IQ4C(6)
	IQ4C(7)
	VCVTDQ2PS Y14, Y14
	MOVWLZX (SI), AX
	VMOVD AX, X9
	VCVTPH2PS X9, X9             // d_w
	VMULSS 288(DI), X9, X9       // d_w*d_x
	VBROADCASTSS X9, Y9
	VFMADD231PS Y9, Y14, Y12
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ iq4rloop

iq4rdone:
	VMOVUPS Y12, (R8)
	VZEROUPPER
	RET
