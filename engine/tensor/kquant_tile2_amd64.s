#include "textflag.h"

// Register tiles for Q5_0, Q4_1, Q5_1, Q3_K and IQ4_XS on AVX-512 VNNI,
// then the AVX2 forms of those and of the Q2_K and Q5_K tiles (the twins
// are q5_0TileGo, q8_1TileGo, q3kTileGo, iq4xsTileGo, q2kTileGo and
// q5kTileGo in kquant_tile.go): each weight block decoded once for all
// the vectors, each (row, vector) in the arithmetic of its one-row
// function (legacyRowQ5_0AVX2, legacyRowQ4_1AVX2, legacyRowQ5_1AVX2,
// q3kRowAVX2, iq4xsRowAVX2, q2kRowAVX2, q5kRowAVX2: integer lanes are
// exact whatever the instructions that sum them; the float steps are the
// same fused multiply-adds of the same values in the same order).

// q5Idx: VPERMD indices, the four rows' d_w (dwords 0-3) as rows 0|1
// and rows 2|3, eight lanes each.
DATA q5Idx<>+0(SB)/8, $0x0000000000000000
DATA q5Idx<>+8(SB)/8, $0x0000000000000000
DATA q5Idx<>+16(SB)/8, $0x0000000000000000
DATA q5Idx<>+24(SB)/8, $0x0000000000000000
DATA q5Idx<>+32(SB)/8, $0x0000000100000001
DATA q5Idx<>+40(SB)/8, $0x0000000100000001
DATA q5Idx<>+48(SB)/8, $0x0000000100000001
DATA q5Idx<>+56(SB)/8, $0x0000000100000001
DATA q5Idx<>+64(SB)/8, $0x0000000200000002
DATA q5Idx<>+72(SB)/8, $0x0000000200000002
DATA q5Idx<>+80(SB)/8, $0x0000000200000002
DATA q5Idx<>+88(SB)/8, $0x0000000200000002
DATA q5Idx<>+96(SB)/8, $0x0000000300000003
DATA q5Idx<>+104(SB)/8, $0x0000000300000003
DATA q5Idx<>+112(SB)/8, $0x0000000300000003
DATA q5Idx<>+120(SB)/8, $0x0000000300000003
GLOBL q5Idx<>(SB), RODATA|NOPTR, $128

// q5Shift: VPSRLVW counts, the low nibbles for values 0-15 of a row
// (128-bit lanes 0 and 2), the high for values 16-31 (lanes 1 and 3).
DATA q5Shift<>+0(SB)/8, $0x0000000000000000
DATA q5Shift<>+8(SB)/8, $0x0000000000000000
DATA q5Shift<>+16(SB)/8, $0x0004000400040004
DATA q5Shift<>+24(SB)/8, $0x0004000400040004
DATA q5Shift<>+32(SB)/8, $0x0000000000000000
DATA q5Shift<>+40(SB)/8, $0x0000000000000000
DATA q5Shift<>+48(SB)/8, $0x0004000400040004
DATA q5Shift<>+56(SB)/8, $0x0004000400040004
GLOBL q5Shift<>(SB), RODATA|NOPTR, $64

// q5Pick64, q5Bit64: q5Pick and q5Bit in both halves of a zmm register.
DATA q5Pick64<>+0(SB)/8, $0x0000000000000000
DATA q5Pick64<>+8(SB)/8, $0x0101010101010101
DATA q5Pick64<>+16(SB)/8, $0x0202020202020202
DATA q5Pick64<>+24(SB)/8, $0x0303030303030303
DATA q5Pick64<>+32(SB)/8, $0x0000000000000000
DATA q5Pick64<>+40(SB)/8, $0x0101010101010101
DATA q5Pick64<>+48(SB)/8, $0x0202020202020202
DATA q5Pick64<>+56(SB)/8, $0x0303030303030303
GLOBL q5Pick64<>(SB), RODATA|NOPTR, $64
DATA q5Bit64<>+0(SB)/8, $0x8040201008040201
DATA q5Bit64<>+8(SB)/8, $0x8040201008040201
DATA q5Bit64<>+16(SB)/8, $0x8040201008040201
DATA q5Bit64<>+24(SB)/8, $0x8040201008040201
DATA q5Bit64<>+32(SB)/8, $0x8040201008040201
DATA q5Bit64<>+40(SB)/8, $0x8040201008040201
DATA q5Bit64<>+48(SB)/8, $0x8040201008040201
DATA q5Bit64<>+56(SB)/8, $0x8040201008040201
GLOBL q5Bit64<>(SB), RODATA|NOPTR, $64

// k16Even, k16Odd: VPERMI2D indices, the even (odd) dwords of row 0's
// sixteen pair sums then of row 1's; lane l of a row is the sum of its
// pair sums 2l and 2l+1.
DATA k16Even<>+0(SB)/8, $0x0000000200000000
DATA k16Even<>+8(SB)/8, $0x0000000600000004
DATA k16Even<>+16(SB)/8, $0x0000000a00000008
DATA k16Even<>+24(SB)/8, $0x0000000e0000000c
DATA k16Even<>+32(SB)/8, $0x0000001200000010
DATA k16Even<>+40(SB)/8, $0x0000001600000014
DATA k16Even<>+48(SB)/8, $0x0000001a00000018
DATA k16Even<>+56(SB)/8, $0x0000001e0000001c
GLOBL k16Even<>(SB), RODATA|NOPTR, $64
DATA k16Odd<>+0(SB)/8, $0x0000000300000001
DATA k16Odd<>+8(SB)/8, $0x0000000700000005
DATA k16Odd<>+16(SB)/8, $0x0000000b00000009
DATA k16Odd<>+24(SB)/8, $0x0000000f0000000d
DATA k16Odd<>+32(SB)/8, $0x0000001300000011
DATA k16Odd<>+40(SB)/8, $0x0000001700000015
DATA k16Odd<>+48(SB)/8, $0x0000001b00000019
DATA k16Odd<>+56(SB)/8, $0x0000001f0000001d
GLOBL k16Odd<>(SB), RODATA|NOPTR, $64

// q3Widx: VPERMW indices, chunk c's scales (16 values each) from the
// sixteen int16 scales: 2c for its first 16 words, 2c+1 for the next.
DATA q3Widx<>+0(SB)/8, $0x0000000000000000
DATA q3Widx<>+8(SB)/8, $0x0000000000000000
DATA q3Widx<>+16(SB)/8, $0x0000000000000000
DATA q3Widx<>+24(SB)/8, $0x0000000000000000
DATA q3Widx<>+32(SB)/8, $0x0001000100010001
DATA q3Widx<>+40(SB)/8, $0x0001000100010001
DATA q3Widx<>+48(SB)/8, $0x0001000100010001
DATA q3Widx<>+56(SB)/8, $0x0001000100010001
DATA q3Widx<>+64(SB)/8, $0x0002000200020002
DATA q3Widx<>+72(SB)/8, $0x0002000200020002
DATA q3Widx<>+80(SB)/8, $0x0002000200020002
DATA q3Widx<>+88(SB)/8, $0x0002000200020002
DATA q3Widx<>+96(SB)/8, $0x0003000300030003
DATA q3Widx<>+104(SB)/8, $0x0003000300030003
DATA q3Widx<>+112(SB)/8, $0x0003000300030003
DATA q3Widx<>+120(SB)/8, $0x0003000300030003
DATA q3Widx<>+128(SB)/8, $0x0004000400040004
DATA q3Widx<>+136(SB)/8, $0x0004000400040004
DATA q3Widx<>+144(SB)/8, $0x0004000400040004
DATA q3Widx<>+152(SB)/8, $0x0004000400040004
DATA q3Widx<>+160(SB)/8, $0x0005000500050005
DATA q3Widx<>+168(SB)/8, $0x0005000500050005
DATA q3Widx<>+176(SB)/8, $0x0005000500050005
DATA q3Widx<>+184(SB)/8, $0x0005000500050005
DATA q3Widx<>+192(SB)/8, $0x0006000600060006
DATA q3Widx<>+200(SB)/8, $0x0006000600060006
DATA q3Widx<>+208(SB)/8, $0x0006000600060006
DATA q3Widx<>+216(SB)/8, $0x0006000600060006
DATA q3Widx<>+224(SB)/8, $0x0007000700070007
DATA q3Widx<>+232(SB)/8, $0x0007000700070007
DATA q3Widx<>+240(SB)/8, $0x0007000700070007
DATA q3Widx<>+248(SB)/8, $0x0007000700070007
DATA q3Widx<>+256(SB)/8, $0x0008000800080008
DATA q3Widx<>+264(SB)/8, $0x0008000800080008
DATA q3Widx<>+272(SB)/8, $0x0008000800080008
DATA q3Widx<>+280(SB)/8, $0x0008000800080008
DATA q3Widx<>+288(SB)/8, $0x0009000900090009
DATA q3Widx<>+296(SB)/8, $0x0009000900090009
DATA q3Widx<>+304(SB)/8, $0x0009000900090009
DATA q3Widx<>+312(SB)/8, $0x0009000900090009
DATA q3Widx<>+320(SB)/8, $0x000a000a000a000a
DATA q3Widx<>+328(SB)/8, $0x000a000a000a000a
DATA q3Widx<>+336(SB)/8, $0x000a000a000a000a
DATA q3Widx<>+344(SB)/8, $0x000a000a000a000a
DATA q3Widx<>+352(SB)/8, $0x000b000b000b000b
DATA q3Widx<>+360(SB)/8, $0x000b000b000b000b
DATA q3Widx<>+368(SB)/8, $0x000b000b000b000b
DATA q3Widx<>+376(SB)/8, $0x000b000b000b000b
DATA q3Widx<>+384(SB)/8, $0x000c000c000c000c
DATA q3Widx<>+392(SB)/8, $0x000c000c000c000c
DATA q3Widx<>+400(SB)/8, $0x000c000c000c000c
DATA q3Widx<>+408(SB)/8, $0x000c000c000c000c
DATA q3Widx<>+416(SB)/8, $0x000d000d000d000d
DATA q3Widx<>+424(SB)/8, $0x000d000d000d000d
DATA q3Widx<>+432(SB)/8, $0x000d000d000d000d
DATA q3Widx<>+440(SB)/8, $0x000d000d000d000d
DATA q3Widx<>+448(SB)/8, $0x000e000e000e000e
DATA q3Widx<>+456(SB)/8, $0x000e000e000e000e
DATA q3Widx<>+464(SB)/8, $0x000e000e000e000e
DATA q3Widx<>+472(SB)/8, $0x000e000e000e000e
DATA q3Widx<>+480(SB)/8, $0x000f000f000f000f
DATA q3Widx<>+488(SB)/8, $0x000f000f000f000f
DATA q3Widx<>+496(SB)/8, $0x000f000f000f000f
DATA q3Widx<>+504(SB)/8, $0x000f000f000f000f
GLOBL q3Widx<>(SB), RODATA|NOPTR, $512

// Q4PAIR(qa, qb, out): the 32 nibbles of legacy block rows a and b (qs
// at qa, qb), row a in the low 256 bits of out: values 0-15 the low
// nibbles, 16-31 the high (VPSRLVW by q5Shift).
#define Q4PAIR(qa, qb, out) \
	VBROADCASTI32X4 qa, out; \
	VBROADCASTI32X4 qb, Z24; \
	VINSERTI64X4 $1, Y24, out, out; \
	VPSRLVW Z30, out, out; \
	VPANDD Z31, out, out

// Q5PAIR(qa, qb, ha, hb, out): Q4PAIR plus 16 where the blocks' qh (at
// ha, hb) has the value's bit: the 32 values 0..31 of Q5_0 or Q5_1.
#define Q5PAIR(qa, qb, ha, hb, out) \
	Q4PAIR(qa, qb, out); \
	VPBROADCASTD ha, Y25; \
	VPBROADCASTD hb, Y24; \
	VINSERTI64X4 $1, Y24, Z25, Z25; \
	VPSHUFB Z27, Z25, Z25; \
	VPTESTMB Z28, Z25, K1; \
	VPADDB Z29, out, K1, out

// LEG4F16(off, x): the F16 at off in the four rows' blocks (SI, SI+BX,
// SI+2BX, SI+R11) as F32 in x's dwords 0-3.
#define LEG4F16(off, x) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, x; \
	MOVWLZX off(SI)(BX*1), AX; \
	VPINSRW $1, AX, x, x; \
	MOVWLZX off(SI)(BX*2), AX; \
	VPINSRW $2, AX, x, x; \
	MOVWLZX off(SI)(R11*1), AX; \
	VPINSRW $3, AX, x, x; \
	VCVTPH2PS x, x

// LQ81VEC(loop): the vector loop of the Q4_1 and Q5_1 tiles: for each of
// R10 vectors (quants at DX, then every R9 bytes; s at R13, every R12
// bytes) the lanes of rows 0 | 1 and 2 | 3 (values 0..31 in Z20, Z21,
// VPDPBUSD), lanes = fma(d_w*d_x, float(lanes), lanes) (d_w in Z10,
// Z11), and the four rows' summs = fma(m_w, s_x, summs) (m_w in X12);
// acc at AX, 36 floats a vector.
#define LQ81VEC(loop) \
loop: \
	VBROADCASTI64X4 (DX), Z16; \
	VPXORD Z0, Z0, Z0; \
	VPDPBUSD Z16, Z20, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPDPBUSD Z16, Z21, Z1; \
	VCVTDQ2PS Z0, Z0; \
	VCVTDQ2PS Z1, Z1; \
	VBROADCASTSS 32(DX), Z2; \
	VMULPS Z10, Z2, Z3; \
	VMULPS Z11, Z2, Z4; \
	VFMADD213PS (AX), Z3, Z0; \
	VFMADD213PS 64(AX), Z4, Z1; \
	VMOVUPS Z0, (AX); \
	VMOVUPS Z1, 64(AX); \
	VBROADCASTSS (R13), X5; \
	VFMADD213PS 128(AX), X12, X5; \
	VMOVUPS X5, 128(AX); \
	ADDQ $144, AX; \
	ADDQ R9, DX; \
	ADDQ R12, R13; \
	DECQ R10; \
	JNZ loop

// LQ81SETUP: the arguments and constants of the Q4_1 and Q5_1 tiles.
#define LQ81SETUP \
	MOVQ w+0(FP), SI; \
	MOVQ rb+8(FP), BX; \
	MOVQ act+16(FP), DI; \
	MOVQ s+24(FP), R8; \
	MOVQ astride+32(FP), R9; \
	MOVQ R9, R12; \
	SHLQ $2, R12; \
	IMULQ $36, R9; \
	MOVQ nb+40(FP), CX; \
	LEAQ (BX)(BX*2), R11; \
	MOVL $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z31; \
	VMOVDQU64 q5Shift<>(SB), Z30; \
	MOVL $0x10101010, AX; \
	VPBROADCASTD AX, Z29; \
	VMOVDQU64 q5Bit64<>(SB), Z28; \
	VMOVDQU64 q5Pick64<>(SB), Z27; \
	VMOVDQU64 q5Idx<>(SB), Z22; \
	VMOVDQU64 q5Idx<>+64(SB), Z23

// LQ81BLOCK: a block's scales, then the vector loop: d_w at 0 and m_w at
// 2 of the four rows' blocks.
#define LQ81BLOCK(loop) \
	LEG4F16(0, X13); \
	VPERMD Z13, Z22, Z10; \
	VPERMD Z13, Z23, Z11; \
	LEG4F16(2, X12); \
	MOVQ DI, DX; \
	MOVQ R8, R13; \
	MOVQ acc+56(FP), AX; \
	MOVQ n+48(FP), R10; \
	LQ81VEC(loop)

// LQ81SETUP2: the arguments and constants of the AVX2 Q4_1 and Q5_1
// tiles.
#define LQ81SETUP2 \
	MOVQ w+0(FP), SI; \
	MOVQ rb+8(FP), BX; \
	MOVQ act+16(FP), DI; \
	MOVQ s+24(FP), R8; \
	MOVQ astride+32(FP), R9; \
	MOVQ R9, R12; \
	SHLQ $2, R12; \
	IMULQ $36, R9; \
	MOVQ nb+40(FP), CX; \
	MOVQ scratch+56(FP), R14; \
	LEAQ (BX)(BX*2), R11; \
	MOVL $0x00010001, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x0F0F0F0F, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	MOVL $0x10101010, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14

// LQ81BLOCK2(loop): m_w of the four rows into X12, then the vector loop.
#define LQ81BLOCK2(loop) \
	LEG4F16(2, X12); \
	MOVQ DI, DX; \
	MOVQ R8, R13; \
	MOVQ acc+64(FP), AX; \
	MOVQ n+48(FP), R10; \
	LQ81VEC2(loop)

// func q5_0TileAVX512(w *byte, rb int, act *q8Act, astride, nb, n int, acc *float32)
// Four rows of nb Q5_0 blocks (w, then every rb bytes) against n >= 1
// vectors' Q8_0 blocks (act, then every astride bytes), in the arithmetic
// of ggml_vec_dot_q5_0_q8_0 (AVX2) for each (row, vector): per block the
// eight lanes of four values, lanes = fma(d_w*d_x, float(lanes), lanes),
// into acc[32v+8h:32v+8h+8] for row h. The values are taken unsigned
// (0..31) for VPDPBUSD and 16 times the activations' sums by fours taken
// off: the same integer lanes. Rows 0 and 1 share one zmm register, rows
// 2 and 3 another.
TEXT ·q5_0TileAVX512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ astride+24(FP), R9
	MOVQ nb+32(FP), CX
	LEAQ (BX)(BX*2), R11         // 3 rows
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64 q5Shift<>(SB), Z30
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Z29
	VMOVDQU64 q5Bit64<>(SB), Z28
	VMOVDQU64 q5Pick64<>(SB), Z27
	VMOVDQU64 q5Idx<>(SB), Z22
	VMOVDQU64 q5Idx<>+64(SB), Z23
	TESTQ CX, CX
	JEQ q50zdone

q50zblock:
	Q5PAIR(6(SI), 6(SI)(BX*1), 2(SI), 2(SI)(BX*1), Z20)
	Q5PAIR(6(SI)(BX*2), 6(SI)(R11*1), 2(SI)(BX*2), 2(SI)(R11*1), Z21)
	LEG4F16(0, X13)              // d_w of the four rows
	VPERMD Z13, Z22, Z10         // rows 0 | 1, eight lanes each
	VPERMD Z13, Z23, Z11         // rows 2 | 3
	MOVQ DI, DX
	MOVQ acc+48(FP), AX
	MOVQ n+40(FP), R10

q50zvec:
	VBROADCASTI64X4 (DX), Z16    // the vector's 32 quants, both halves
	VPXORD Z18, Z18, Z18
	VPDPBUSD Z16, Z29, Z18       // 16 times the quants, by fours
	VPXORD Z0, Z0, Z0
	VPDPBUSD Z16, Z20, Z0
	VPXORD Z1, Z1, Z1
	VPDPBUSD Z16, Z21, Z1
	VPSUBD Z18, Z0, Z0           // the lanes of rows 0 | 1
	VPSUBD Z18, Z1, Z1           // rows 2 | 3
	VCVTDQ2PS Z0, Z0
	VCVTDQ2PS Z1, Z1
	VBROADCASTSS 32(DX), Z2      // d_x
	VMULPS Z10, Z2, Z3           // d_w*d_x
	VMULPS Z11, Z2, Z4
	VFMADD213PS (AX), Z3, Z0     // lanes = float(lanes)*d + lanes
	VFMADD213PS 64(AX), Z4, Z1
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	ADDQ $128, AX
	ADDQ R9, DX
	DECQ R10
	JNZ q50zvec

	ADDQ $22, SI
	ADDQ $36, DI
	DECQ CX
	JNZ q50zblock

q50zdone:
	VZEROUPPER
	RET

// func q4_1TileAVX512(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, acc *float32)
// Four rows of nb Q4_1 blocks (w, then every rb bytes) against n >= 1
// vectors' Q8_1 blocks (act and s, then every astride blocks), in the
// arithmetic of ggml_vec_dot_q4_1_q8_1 (AVX2) for each (row, vector): per
// block summs = fma(m_w, s_x, summs) and the eight lanes of four values,
// lanes = fma(d_w*d_x, float(lanes), lanes); acc[36v+8h:36v+8h+8] the
// lanes of row h, acc[36v+32+h] its summs.
TEXT ·q4_1TileAVX512(SB), NOSPLIT, $0-64
	LQ81SETUP
	TESTQ CX, CX
	JEQ q41zdone

q41zblock:
	Q4PAIR(4(SI), 4(SI)(BX*1), Z20)
	Q4PAIR(4(SI)(BX*2), 4(SI)(R11*1), Z21)
	LQ81BLOCK(q41zvec)
	ADDQ $20, SI
	ADDQ $36, DI
	ADDQ $4, R8
	DECQ CX
	JNZ q41zblock

q41zdone:
	VZEROUPPER
	RET

// func q5_1TileAVX512(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, acc *float32)
// q4_1TileAVX512 for Q5_1 (ggml_vec_dot_q5_1_q8_1): qh's bits as the
// values' fifth.
TEXT ·q5_1TileAVX512(SB), NOSPLIT, $0-64
	LQ81SETUP
	TESTQ CX, CX
	JEQ q51zdone

q51zblock:
	Q5PAIR(8(SI), 8(SI)(BX*1), 4(SI), 4(SI)(BX*1), Z20)
	Q5PAIR(8(SI)(BX*2), 8(SI)(R11*1), 4(SI)(BX*2), 4(SI)(R11*1), Z21)
	LQ81BLOCK(q51zvec)
	ADDQ $24, SI
	ADDQ $36, DI
	ADDQ $4, R8
	DECQ CX
	JNZ q51zblock

q51zdone:
	VZEROUPPER
	RET

// The Q3_K and IQ4_XS tiles keep a row pair's block as 256 int16 values
// already times their sub-block's scale (at most 4*32 and 127*32: exact
// in int16), chunk c (values 32c..32c+31) of row 0 in Z(c) and of row 1
// in Z(8+c), and sum them against each vector's quants widened to int16
// by VPMADDWD and VPDPWSSD: sixteen exact pair sums a row, lane l the sum
// of pairs 2l and 2l+1 (K16VEC).

// K16VEC(loop): the vector loop of the int16 tiles: for each of R10
// vectors (DX, then every R9 bytes) the two rows' eight lanes, then
// lanes = fma(d_w*d_x, float(lanes), lanes) into acc (AX, 64 bytes a
// vector); d_w of both rows in Z28.
#define K16VEC(loop) \
loop: \
	VPMOVSXBW (DX), Z16; \
	VPMOVSXBW 32(DX), Z17; \
	VPMADDWD Z16, Z0, Z18; \
	VPMADDWD Z16, Z8, Z20; \
	VPMADDWD Z17, Z1, Z19; \
	VPMADDWD Z17, Z9, Z21; \
	VPMOVSXBW 64(DX), Z16; \
	VPMOVSXBW 96(DX), Z17; \
	VPDPWSSD Z16, Z2, Z18; \
	VPDPWSSD Z16, Z10, Z20; \
	VPDPWSSD Z17, Z3, Z19; \
	VPDPWSSD Z17, Z11, Z21; \
	VPMOVSXBW 128(DX), Z16; \
	VPMOVSXBW 160(DX), Z17; \
	VPDPWSSD Z16, Z4, Z18; \
	VPDPWSSD Z16, Z12, Z20; \
	VPDPWSSD Z17, Z5, Z19; \
	VPDPWSSD Z17, Z13, Z21; \
	VPMOVSXBW 192(DX), Z16; \
	VPMOVSXBW 224(DX), Z17; \
	VPDPWSSD Z16, Z6, Z18; \
	VPDPWSSD Z16, Z14, Z20; \
	VPDPWSSD Z17, Z7, Z19; \
	VPDPWSSD Z17, Z15, Z21; \
	VPADDD Z19, Z18, Z18; \
	VPADDD Z21, Z20, Z20; \
	VMOVDQA64 Z26, Z22; \
	VPERMI2D Z20, Z18, Z22; \
	VMOVDQA64 Z27, Z23; \
	VPERMI2D Z20, Z18, Z23; \
	VPADDD Z23, Z22, Z22; \
	VCVTDQ2PS Z22, Z22; \
	VBROADCASTSS 288(DX), Z23; \
	VMULPS Z28, Z23, Z23; \
	VFMADD213PS (AX), Z23, Z22; \
	VMOVUPS Z22, (AX); \
	ADDQ $64, AX; \
	ADDQ R9, DX; \
	DECQ R10; \
	JNZ loop

// K16DW(off): d_w (F16 at off in both rows' blocks, SI and SI+BX) as the
// eight lanes of each row in Z28.
#define K16DW(off) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, X22; \
	VCVTPH2PS X22, X22; \
	VBROADCASTSS X22, Y28; \
	MOVWLZX off(SI)(BX*1), AX; \
	VMOVD AX, X22; \
	VCVTPH2PS X22, X22; \
	VBROADCASTSS X22, Y22; \
	VINSERTF64X4 $1, Y22, Z28, Z28

// Q3SC(row, xt, yo, y32): the sixteen 6-bit scales of the Q3_K block at
// row (ggml's kmask shuffle of the twelve bytes, as q3kRowAVX2), less 32
// (y32: 32 as int16), as int16 in yo; xt is a temporary.
#define Q3SC(row, xt, yo, y32) \
	MOVL 96(row), R9; \
	MOVL 100(row), R10; \
	MOVL 104(row), R11; \
	MOVL R9, AX; \
	SHRL $4, AX; \
	ANDL $0x0F0F0F0F, AX; \
	MOVL R11, R12; \
	SHRL $4, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, AX; \
	MOVL R10, R13; \
	SHRL $4, R13; \
	ANDL $0x0F0F0F0F, R13; \
	MOVL R11, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R13; \
	ANDL $0x0F0F0F0F, R9; \
	MOVL R11, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R9; \
	ANDL $0x0F0F0F0F, R10; \
	MOVL R11, R12; \
	SHRL $2, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R10; \
	VMOVD R9, xt; \
	VPINSRD $1, R10, xt, xt; \
	VPINSRD $2, AX, xt, xt; \
	VPINSRD $3, R13, xt, xt; \
	VPMOVSXBW xt, yo; \
	VPSUBW y32, yo, yo

// Q3W(q, v, bit, c, out): chunk c of the Q3_K block whose hmask is in Y23
// and quant bytes 32j.. in q: bits 2v of q, less 4 where hmask's bit is
// clear, as int16 times the chunk's scales (Z29 through q3Widx).
#define Q3W(q, v, bit, c, out) \
	VPSRLW $(2*v), q, Y22; \
	VPANDD Y31, Y22, Y22; \
	MOVL $(0x01010101<<bit), AX; \
	VPBROADCASTD AX, Y21; \
	VPTESTNMB Y21, Y23, K1; \
	VPSUBB Y20, Y22, K1, Y22; \
	VPMOVSXBW Y22, out; \
	VMOVDQU64 q3Widx<>+(64*c)(SB), Z21; \
	VPERMW Z29, Z21, Z21; \
	VPMULLW Z21, out, out

// Q3ROW(row, o0, ..., o7): the Q3_K block at row into o0..o7.
#define Q3ROW(row, o0, o1, o2, o3, o4, o5, o6, o7) \
	Q3SC(row, X22, Y29, Y30); \
	VMOVDQU64 (row), Y23; \
	VMOVDQU64 32(row), Y24; \
	VMOVDQU64 64(row), Y25; \
	Q3W(Y24, 0, 0, 0, o0); \
	Q3W(Y24, 1, 1, 1, o1); \
	Q3W(Y24, 2, 2, 2, o2); \
	Q3W(Y24, 3, 3, 3, o3); \
	Q3W(Y25, 0, 4, 4, o4); \
	Q3W(Y25, 1, 5, 5, o5); \
	Q3W(Y25, 2, 6, 6, o6); \
	Q3W(Y25, 3, 7, 7, o7)

// func q3kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// Two rows of nb Q3_K blocks (w, w+rb) against n >= 1 vectors' Q8_K
// blocks (act, then every astride bytes), in the arithmetic of
// ggml_vec_dot_q3_K_q8_K (AVX2) for each (row, vector): per block the
// eight lanes (values -4..3 times the activations, the 6-bit scales less
// 32), lanes = fma(d_x*d_w, float(lanes), lanes), into
// acc[16v+8h:16v+8h+8] for row h. scratch is not used.
TEXT ·q3kTileAVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVL $0x03030303, AX
	VPBROADCASTD AX, Y31
	MOVL $0x00200020, AX
	VPBROADCASTD AX, Y30         // 32 as int16
	VMOVDQU64 k16Even<>(SB), Z26
	VMOVDQU64 k16Odd<>(SB), Z27
	TESTQ CX, CX
	JEQ q3kzdone

q3kzblock:
	MOVL $0x04040404, AX
	VPBROADCASTD AX, Y20         // (K16VEC uses Z20)
	LEAQ (SI)(BX*1), R8
	Q3ROW(SI, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	Q3ROW(R8, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	K16DW(108)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	K16VEC(q3kzvec)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q3kzblock

q3kzdone:
	VZEROUPPER
	RET

// IQ4SC(row, off, loop): the eight scales of the IQ4_XS block at row,
// ((scales_l[ib/2] >> 4*(ib%2)) & 15) | ((scales_h >> 2*ib) & 3) << 4,
// less 32, as int16 at scratch+off.
#define IQ4SC(row, off, loop) \
	MOVWLZX 2(row), R12; \
	MOVL 4(row), R10; \
	XORQ R9, R9; \
loop: \
	MOVL R10, AX; \
	ANDL $15, AX; \
	MOVL R12, R13; \
	ANDL $3, R13; \
	SHLL $4, R13; \
	ORL R13, AX; \
	SUBL $32, AX; \
	MOVW AX, off(R14)(R9*2); \
	SHRL $4, R10; \
	SHRL $2, R12; \
	INCQ R9; \
	CMPQ R9, $8; \
	JLT loop

// IQ4W(row, h, c, out): chunk c of the IQ4_XS block at row: the levels
// (kvalues_iq4nl through VPSHUFB, Y30) of the low nibbles of qs[16c:],
// then the high, as int16 times the chunk's scale.
#define IQ4W(row, h, c, out) \
	VMOVDQU64 (8+16*c)(row), X22; \
	VPSRLW $4, X22, X23; \
	VPANDD X31, X22, X22; \
	VPANDD X31, X23, X23; \
	VINSERTI32X4 $1, X23, Y22, Y22; \
	VPSHUFB Y22, Y30, Y22; \
	VPMOVSXBW Y22, out; \
	VPBROADCASTW (16*h+2*c)(R14), Z23; \
	VPMULLW Z23, out, out

#define IQ4ROW(row, h, loop, o0, o1, o2, o3, o4, o5, o6, o7) \
	IQ4SC(row, (16*h), loop); \
	IQ4W(row, h, 0, o0); \
	IQ4W(row, h, 1, o1); \
	IQ4W(row, h, 2, o2); \
	IQ4W(row, h, 3, o3); \
	IQ4W(row, h, 4, o4); \
	IQ4W(row, h, 5, o5); \
	IQ4W(row, h, 6, o6); \
	IQ4W(row, h, 7, o7)

// func iq4xsTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// Two rows of nb IQ4_XS blocks (w, w+rb) against n >= 1 vectors' Q8_K
// blocks, in the arithmetic of ggml_vec_dot_iq4_xs_q8_K (AVX2) for each
// (row, vector): per block the eight lanes (kvalues_iq4nl[nibble] times
// the activations, each 32 values' 6-bit scale less 32), lanes =
// fma(d_w*d_x, float(lanes), lanes), into acc[16v+8h:16v+8h+8] for row h.
// scratch: 32 bytes (the two rows' scales).
TEXT ·iq4xsTileAVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y31
	LEAQ ·kvaluesIQ4NL(SB), AX
	VBROADCASTI32X4 (AX), Y30
	VMOVDQU64 k16Even<>(SB), Z26
	VMOVDQU64 k16Odd<>(SB), Z27
	TESTQ CX, CX
	JEQ iq4zdone

iq4zblock:
	LEAQ (SI)(BX*1), R8
	IQ4ROW(SI, 0, iq4sc0, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	IQ4ROW(R8, 1, iq4sc1, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	K16DW(0)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	K16VEC(iq4zvec)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ iq4zblock

iq4zdone:
	VZEROUPPER
	RET

// Q5ROW2(row, h, abs, sgn): row h of the AVX2 Q5_0 tile (its block at
// row): the 32 signed values (as legacyRowQ5_0AVX2) into sgn, their
// absolute values into abs, d_w broadcast at scratch+32h.
#define Q5ROW2(row, h, abs, sgn) \
	VMOVDQU 6(row), X8; \
	VPSRLW $4, X8, X9; \
	VPAND X13, X8, X8; \
	VPAND X13, X9, X9; \
	VINSERTI128 $1, X9, Y8, sgn; \
	VPBROADCASTD 2(row), Y9; \
	VPSHUFB q5Pick64<>(SB), Y9, Y9; \
	VPAND q5Bit64<>(SB), Y9, Y9; \
	VPCMPEQB q5Bit64<>(SB), Y9, Y9; \
	VPAND Y14, Y9, Y9; \
	VPOR Y9, sgn, sgn; \
	VPSUBB Y14, sgn, sgn; \
	VPABSB sgn, abs; \
	MOVWLZX (row), AX; \
	VMOVD AX, X8; \
	VCVTPH2PS X8, X8; \
	VBROADCASTSS X8, Y8; \
	VMOVUPS Y8, (32*h)(R14)

// Q5VEC2(h, abs, sgn): row h's step for the vector at DX (quants in Y8,
// d_x in Y9): the sign trick's lanes, lanes = fma(d_w*d_x, float(lanes),
// lanes) at AX+32h.
#define Q5VEC2(h, abs, sgn) \
	VPSIGNB sgn, Y8, Y10; \
	VPMADDUBSW Y10, abs, Y10; \
	VPMADDWD Y15, Y10, Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS (32*h)(R14), Y9, Y11; \
	VFMADD213PS (32*h)(AX), Y11, Y10; \
	VMOVUPS Y10, (32*h)(AX)

// func q5_0TileAVX2(w *byte, rb int, act *q8Act, astride, nb, n int, scratch *byte, acc *float32)
// q5_0TileAVX512 without AVX-512: the same four rows and acc layout, the
// lanes by legacyRowQ5_0AVX2's sign trick (VPSIGNB, VPMADDUBSW of the
// absolute values, VPMADDWD by ones), one row's eight lanes per ymm
// register. scratch: 128 bytes (the rows' d_w).
TEXT ·q5_0TileAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ astride+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	LEAQ (BX)(BX*2), R11         // 3 rows
	MOVL $0x00010001, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15        // ones (int16)
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x10101010, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	TESTQ CX, CX
	JEQ q50ydone

q50yblock:
	LEAQ (SI)(BX*1), R8
	LEAQ (SI)(BX*2), R12
	LEAQ (SI)(R11*1), R13
	Q5ROW2(SI, 0, Y0, Y4)
	Q5ROW2(R8, 1, Y1, Y5)
	Q5ROW2(R12, 2, Y2, Y6)
	Q5ROW2(R13, 3, Y3, Y7)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10

q50yvec:
	VMOVDQU (DX), Y8             // the vector's 32 quants
	VBROADCASTSS 32(DX), Y9      // d_x
	Q5VEC2(0, Y0, Y4)
	Q5VEC2(1, Y1, Y5)
	Q5VEC2(2, Y2, Y6)
	Q5VEC2(3, Y3, Y7)
	ADDQ $128, AX
	ADDQ R9, DX
	DECQ R10
	JNZ q50yvec

	ADDQ $22, SI
	ADDQ $36, DI
	DECQ CX
	JNZ q50yblock

q50ydone:
	VZEROUPPER
	RET

// The AVX2 forms of the Q3_K and IQ4_XS tiles: the same int16 values
// times their scales, but in scratch (512 bytes a row: AVX2's sixteen
// registers do not hold them), each vector's quants widened 16 at a time
// and VPMADDWD against both rows; the first and second 16 values of each
// chunk in their own accumulators, VPHADDD and VPERMQ then give the eight
// lanes. scratch: 0 and 512 the rows' values, 1024 and 1056 their d_w
// (eight lanes), 1088 the block's scales (int16).

// K16DW2(off): d_w (F16 at off in both rows' blocks) at scratch+1024
// and 1056, eight lanes each.
#define K16DW2(off) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	VBROADCASTSS X4, Y4; \
	VMOVUPS Y4, 1024(R14); \
	MOVWLZX off(SI)(BX*1), AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	VBROADCASTSS X4, Y4; \
	VMOVUPS Y4, 1056(R14)

// K16CH2(c): chunk c of the vector at DX against both rows.
#define K16CH2(c) \
	VPMOVSXBW (32*c)(DX), Y8; \
	VPMADDWD (64*c)(R14), Y8, Y9; \
	VPADDD Y9, Y0, Y0; \
	VPMADDWD (512+64*c)(R14), Y8, Y9; \
	VPADDD Y9, Y2, Y2; \
	VPMOVSXBW (32*c+16)(DX), Y8; \
	VPMADDWD (64*c+32)(R14), Y8, Y9; \
	VPADDD Y9, Y1, Y1; \
	VPMADDWD (512+64*c+32)(R14), Y8, Y9; \
	VPADDD Y9, Y3, Y3

// K16VEC2(loop): K16VEC in AVX2 (Y12-Y15 kept).
#define K16VEC2(loop) \
loop: \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	K16CH2(0); \
	K16CH2(1); \
	K16CH2(2); \
	K16CH2(3); \
	K16CH2(4); \
	K16CH2(5); \
	K16CH2(6); \
	K16CH2(7); \
	VPHADDD Y1, Y0, Y0; \
	VPERMQ $0xD8, Y0, Y0; \
	VPHADDD Y3, Y2, Y2; \
	VPERMQ $0xD8, Y2, Y2; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y2, Y2; \
	VBROADCASTSS 288(DX), Y10; \
	VMULPS 1024(R14), Y10, Y11; \
	VFMADD213PS (AX), Y11, Y0; \
	VMOVUPS Y0, (AX); \
	VMULPS 1056(R14), Y10, Y11; \
	VFMADD213PS 32(AX), Y11, Y2; \
	VMOVUPS Y2, 32(AX); \
	ADDQ $64, AX; \
	ADDQ R9, DX; \
	DECQ R10; \
	JNZ loop

// Q3W2(q, v, bit, c, h): chunk c of row h's Q3_K block (hmask in Y1,
// quant bytes 32j.. in q) into scratch+512h+64c as int16 times the
// scales (scratch+1088).
#define Q3W2(q, v, bit, c, h) \
	VPSRLW $(2*v), q, Y4; \
	VPAND Y14, Y4, Y4; \
	MOVL $(0x01010101<<bit), AX; \
	VMOVD AX, X5; \
	VPBROADCASTD X5, Y5; \
	VPAND Y1, Y5, Y5; \
	VPCMPEQB Y13, Y5, Y5; \
	VPAND Y12, Y5, Y5; \
	VPSUBB Y5, Y4, Y4; \
	VPMOVSXBW X4, Y6; \
	VPBROADCASTW (1088+4*c)(R14), Y7; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c)(R14); \
	VEXTRACTI128 $1, Y4, X4; \
	VPMOVSXBW X4, Y6; \
	VPBROADCASTW (1088+4*c+2)(R14), Y7; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c+32)(R14)

#define Q3ROW2(row, h) \
	Q3SC(row, X0, Y0, Y15); \
	VMOVDQU Y0, 1088(R14); \
	VMOVDQU (row), Y1; \
	VMOVDQU 32(row), Y2; \
	VMOVDQU 64(row), Y3; \
	Q3W2(Y2, 0, 0, 0, h); \
	Q3W2(Y2, 1, 1, 1, h); \
	Q3W2(Y2, 2, 2, 2, h); \
	Q3W2(Y2, 3, 3, 3, h); \
	Q3W2(Y3, 0, 4, 4, h); \
	Q3W2(Y3, 1, 5, 5, h); \
	Q3W2(Y3, 2, 6, 6, h); \
	Q3W2(Y3, 3, 7, 7, h)

// func q3kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// q3kTileAVX512 without AVX-512 (the same rows, arithmetic and acc
// layout). scratch: 1120 bytes.
TEXT ·q3kTileAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x04040404, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	VPXOR Y13, Y13, Y13
	MOVL $0x03030303, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x00200020, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15        // 32 as int16
	TESTQ CX, CX
	JEQ q3kydone

q3kyblock:
	LEAQ (SI)(BX*1), R8
	Q3ROW2(SI, 0)
	Q3ROW2(R8, 1)
	K16DW2(108)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	K16VEC2(q3kyvec)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q3kyblock

q3kydone:
	VZEROUPPER
	RET

// IQ4W2(row, c, h): chunk c of row h's IQ4_XS block into
// scratch+512h+64c: the levels (lut in X12) of qs[16c:]'s low nibbles,
// then the high, as int16 times the chunk's scale.
#define IQ4W2(row, c, h) \
	VMOVDQU (8+16*c)(row), X4; \
	VPSRLW $4, X4, X5; \
	VPAND X14, X4, X4; \
	VPAND X14, X5, X5; \
	VPSHUFB X4, X12, X4; \
	VPSHUFB X5, X12, X5; \
	VPBROADCASTW (1088+2*c)(R14), Y7; \
	VPMOVSXBW X4, Y6; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c)(R14); \
	VPMOVSXBW X5, Y6; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c+32)(R14)

#define IQ4ROW2(row, h, loop) \
	IQ4SC(row, 1088, loop); \
	IQ4W2(row, 0, h); \
	IQ4W2(row, 1, h); \
	IQ4W2(row, 2, h); \
	IQ4W2(row, 3, h); \
	IQ4W2(row, 4, h); \
	IQ4W2(row, 5, h); \
	IQ4W2(row, 6, h); \
	IQ4W2(row, 7, h)

// func iq4xsTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// iq4xsTileAVX512 without AVX-512 (the same rows, arithmetic and acc
// layout). scratch: 1120 bytes.
TEXT ·iq4xsTileAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	LEAQ ·kvaluesIQ4NL(SB), AX
	VMOVDQU (AX), X12
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	TESTQ CX, CX
	JEQ iq4ydone

iq4yblock:
	LEAQ (SI)(BX*1), R8
	IQ4ROW2(SI, 0, iq4ysc0)
	IQ4ROW2(R8, 1, iq4ysc1)
	K16DW2(0)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	K16VEC2(iq4yvec)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ iq4yblock

iq4ydone:
	VZEROUPPER
	RET

// Q2W2(q, v, c, h): chunk c = 4j+v of row h's Q2_K block (quant bytes
// 32j.. in q): bits 2v, as int16 times the chunk's scales (scratch+1088),
// into scratch+512h+64c.
#define Q2W2(q, v, c, h) \
	VPSRLW $(2*v), q, Y4; \
	VPAND Y14, Y4, Y4; \
	VPMOVZXBW X4, Y6; \
	VPBROADCASTW (1088+4*c)(R14), Y7; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c)(R14); \
	VEXTRACTI128 $1, Y4, X4; \
	VPMOVZXBW X4, Y6; \
	VPBROADCASTW (1088+4*c+2)(R14), Y7; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c+32)(R14)

// Q2ROW2(row, h): row h's Q2_K block at row: the 4-bit scales (low
// nibbles) as int16 at scratch+1088, the mins (high nibbles) at
// 1120+32h, the values times their scales at 512h.
#define Q2ROW2(row, h) \
	VMOVDQU (row), X0; \
	VPAND X13, X0, X1; \
	VPMOVZXBW X1, Y1; \
	VMOVDQU Y1, 1088(R14); \
	VPSRLW $4, X0, X0; \
	VPAND X13, X0, X0; \
	VPMOVZXBW X0, Y0; \
	VMOVDQU Y0, (1120+32*h)(R14); \
	VMOVDQU 16(row), Y2; \
	VMOVDQU 48(row), Y3; \
	Q2W2(Y2, 0, 0, h); \
	Q2W2(Y2, 1, 1, h); \
	Q2W2(Y2, 2, 2, h); \
	Q2W2(Y2, 3, 3, h); \
	Q2W2(Y3, 0, 4, h); \
	Q2W2(Y3, 1, 5, h); \
	Q2W2(Y3, 2, 6, h); \
	Q2W2(Y3, 3, 7, h)

// Q2STEP2(h, lanes, off): row h's step of the vector at DX (d_x in Y10,
// its bsums in Y8): lanes = fma(-(d_x*dmin_w), float(mins . bsums by
// pairs), lanes), then lanes = fma(d_x*d_w, float(the value lanes in
// lanes' register), lanes), at AX+off.
#define Q2STEP2(h, lanes, off) \
	VPMADDWD (1120+32*h)(R14), Y8, Y9; \
	VCVTDQ2PS Y9, Y9; \
	VMULPS (1184+32*h)(R14), Y10, Y11; \
	VMOVUPS off(AX), Y12; \
	VFNMADD231PS Y11, Y9, Y12; \
	VMULPS (1024+32*h)(R14), Y10, Y11; \
	VFMADD231PS Y11, lanes, Y12; \
	VMOVUPS Y12, off(AX)

// Q2VEC2(loop): K16VEC2 for Q2_K: the minimums' step before the
// values', per row, as dotQ2K.
#define Q2VEC2(loop) \
loop: \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	K16CH2(0); \
	K16CH2(1); \
	K16CH2(2); \
	K16CH2(3); \
	K16CH2(4); \
	K16CH2(5); \
	K16CH2(6); \
	K16CH2(7); \
	VPHADDD Y1, Y0, Y0; \
	VPERMQ $0xD8, Y0, Y0; \
	VPHADDD Y3, Y2, Y2; \
	VPERMQ $0xD8, Y2, Y2; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y2, Y2; \
	VBROADCASTSS 288(DX), Y10; \
	VMOVDQU 256(DX), Y8; \
	Q2STEP2(0, Y0, 0); \
	Q2STEP2(1, Y2, 32); \
	ADDQ $64, AX; \
	ADDQ R9, DX; \
	DECQ R10; \
	JNZ loop

// func q2kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// q2kTileAVX512 without AVX-512 (the same rows, arithmetic and acc
// layout), in the manner of q3kTileAVX2. scratch: 1248 bytes (as
// q3kTileAVX2's, then the rows' mins at 1120 and 1152, dmin_w at 1184
// and 1216).
TEXT ·q2kTileAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x03030303, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	TESTQ CX, CX
	JEQ q2kydone

q2kyblock:
	LEAQ (SI)(BX*1), R8
	Q2ROW2(SI, 0)
	Q2ROW2(R8, 1)
	K16DW2(80)
	MOVWLZX 82(SI), AX
	VMOVD AX, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS X4, Y4
	VMOVUPS Y4, 1184(R14)
	MOVWLZX 82(SI)(BX*1), AX
	VMOVD AX, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS X4, Y4
	VMOVUPS Y4, 1216(R14)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	Q2VEC2(q2kyvec)
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q2kyblock

q2kydone:
	VZEROUPPER
	RET

// Q5KSC2(row, h): the Q5_K block at row's eight 6-bit scales (ggml's utmp
// shuffle, as Q5PREP) as int16 at scratch+1088, its eight mins as int16
// at 1120+16h.
#define Q5KSC2(row, h) \
	MOVL 4(row), R10; \
	MOVL 8(row), R11; \
	MOVL 12(row), R13; \
	MOVL R11, AX; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	MOVL R13, DX; \
	SHRL $4, DX; \
	ANDL $0x0F0F0F0F, DX; \
	ORL DX, AX; \
	ANDL $0x3F3F3F3F, R11; \
	MOVL R10, DX; \
	SHRL $6, DX; \
	ANDL $0x03030303, DX; \
	SHLL $4, DX; \
	ANDL $0x0F0F0F0F, R13; \
	ORL DX, R13; \
	ANDL $0x3F3F3F3F, R10; \
	VMOVD R11, X5; \
	VPINSRD $1, AX, X5, X5; \
	VPMOVZXBW X5, X5; \
	VMOVDQU X5, (1120+16*h)(R14); \
	VMOVD R10, X5; \
	VPINSRD $1, R13, X5, X5; \
	VPMOVZXBW X5, X5; \
	VMOVDQU X5, 1088(R14)

// Q5KW2(j, c, shift, h): chunk c (2j, or 2j+1 with shift 4) of row h's
// Q5_K block at SI (qh in Y1, the fifth bit c's mask broadcast in Y2):
// the nibbles of quant bytes 32j.. plus 16 where qh's bit c is set, as
// int16 times the chunk's scale (scratch+1088+2c), into scratch+512h+64c.
#define Q5KW2(row, j, c, shift, h) \
	VMOVDQU (48+32*j)(row), Y4; \
	VPSRLW $shift, Y4, Y4; \
	VPAND Y13, Y4, Y4; \
	MOVL $(0x01010101<<c), AX; \
	VMOVD AX, X5; \
	VPBROADCASTD X5, Y5; \
	VPAND Y1, Y5, Y6; \
	VPCMPEQB Y5, Y6, Y6; \
	VPAND Y14, Y6, Y6; \
	VPOR Y6, Y4, Y4; \
	VPBROADCASTW (1088+2*c)(R14), Y7; \
	VPMOVZXBW X4, Y6; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c)(R14); \
	VEXTRACTI128 $1, Y4, X4; \
	VPMOVZXBW X4, Y6; \
	VPMULLW Y7, Y6, Y6; \
	VMOVDQU Y6, (512*h+64*c+32)(R14)

#define Q5KROW2(row, h) \
	Q5KSC2(row, h); \
	VMOVDQU 16(row), Y1; \
	Q5KW2(row, 0, 0, 0, h); \
	Q5KW2(row, 0, 1, 4, h); \
	Q5KW2(row, 1, 2, 0, h); \
	Q5KW2(row, 1, 3, 4, h); \
	Q5KW2(row, 2, 4, 0, h); \
	Q5KW2(row, 2, 5, 4, h); \
	Q5KW2(row, 3, 6, 0, h); \
	Q5KW2(row, 3, 7, 4, h)

// Q5KVEC2(loop): K16VEC2 for Q5_K: the lanes' step of both rows, then
// each row's summs = fma(-(d_x*dmin_w), float(mins . bsums), summs)
// (four copies a row, as q5kTileAVX512); acc 128 bytes a vector.
#define Q5KVEC2(loop) \
loop: \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	K16CH2(0); \
	K16CH2(1); \
	K16CH2(2); \
	K16CH2(3); \
	K16CH2(4); \
	K16CH2(5); \
	K16CH2(6); \
	K16CH2(7); \
	VPHADDD Y1, Y0, Y0; \
	VPERMQ $0xD8, Y0, Y0; \
	VPHADDD Y3, Y2, Y2; \
	VPERMQ $0xD8, Y2, Y2; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y2, Y2; \
	VBROADCASTSS 288(DX), Y10; \
	VMULPS 1024(R14), Y10, Y11; \
	VFMADD213PS (AX), Y11, Y0; \
	VMOVUPS Y0, (AX); \
	VMULPS 1056(R14), Y10, Y11; \
	VFMADD213PS 32(AX), Y11, Y2; \
	VMOVUPS Y2, 32(AX); \
	VMOVDQU 256(DX), Y8; \
	VPHADDW Y8, Y8, Y8; \
	VPERMQ $0x88, Y8, Y8; \
	VPMADDWD 1120(R14), Y8, Y9; \
	VPHADDD Y9, Y9, Y9; \
	VPHADDD Y9, Y9, Y9; \
	VCVTDQ2PS Y9, Y9; \
	VMULPS 1152(R14), Y10, Y11; \
	VMOVUPS 64(AX), Y8; \
	VFNMADD231PS Y11, Y9, Y8; \
	VMOVUPS Y8, 64(AX); \
	ADDQ $128, AX; \
	ADDQ R9, DX; \
	DECQ R10; \
	JNZ loop

// func q5kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// q5kTileAVX512 without AVX-512 (the same rows, arithmetic and acc
// layout), in the manner of q3kTileAVX2. scratch: 1184 bytes (as
// q3kTileAVX2's, then the rows' mins at 1120 and 1136, dmin_w at 1152,
// four lanes a row).
TEXT ·q5kTileAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x10101010, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	TESTQ CX, CX
	JEQ q5kydone

q5kyblock:
	LEAQ (SI)(BX*1), R8
	Q5KROW2(SI, 0)
	Q5KROW2(R8, 1)
	K16DW2(0)
	MOVWLZX 2(SI), AX
	VMOVD AX, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS X4, X4
	MOVWLZX 2(SI)(BX*1), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VBROADCASTSS X5, X5
	VINSERTI128 $1, X5, Y4, Y4
	VMOVUPS Y4, 1152(R14)        // dmin_w, four lanes a row
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10
	MOVQ astride+24(FP), R9
	Q5KVEC2(q5kyvec)
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q5kyblock

q5kydone:
	VZEROUPPER
	RET

// Q41ROW2(row, h, out): row h of the AVX2 Q4_1 tile (its block at row):
// the 32 nibbles (values 0-15 the low ones) into out, d_w broadcast at
// scratch+32h.
#define Q41ROW2(row, h, out) \
	VMOVDQU 4(row), X8; \
	VPSRLW $4, X8, X9; \
	VPAND X13, X8, X8; \
	VPAND X13, X9, X9; \
	VINSERTI128 $1, X9, Y8, out; \
	MOVWLZX (row), AX; \
	VMOVD AX, X8; \
	VCVTPH2PS X8, X8; \
	VBROADCASTSS X8, Y8; \
	VMOVUPS Y8, (32*h)(R14)

// Q51ROW2(row, h, out): Q41ROW2 for Q5_1: qs at 8, plus 16 where qh (at
// 4) has the value's bit.
#define Q51ROW2(row, h, out) \
	VMOVDQU 8(row), X8; \
	VPSRLW $4, X8, X9; \
	VPAND X13, X8, X8; \
	VPAND X13, X9, X9; \
	VINSERTI128 $1, X9, Y8, out; \
	VPBROADCASTD 4(row), Y9; \
	VPSHUFB q5Pick64<>(SB), Y9, Y9; \
	VPAND q5Bit64<>(SB), Y9, Y9; \
	VPCMPEQB q5Bit64<>(SB), Y9, Y9; \
	VPAND Y14, Y9, Y9; \
	VPOR Y9, out, out; \
	MOVWLZX (row), AX; \
	VMOVD AX, X8; \
	VCVTPH2PS X8, X8; \
	VBROADCASTSS X8, Y8; \
	VMOVUPS Y8, (32*h)(R14)

// Q81VEC2(h, u): row h's lanes for the vector at DX (quants in Y8, d_x
// in Y9): VPMADDUBSW of the unsigned values u, VPMADDWD by ones, lanes =
// fma(d_w*d_x, float(lanes), lanes) at AX+32h.
#define Q81VEC2(h, u) \
	VPMADDUBSW Y8, u, Y10; \
	VPMADDWD Y15, Y10, Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS (32*h)(R14), Y9, Y11; \
	VFMADD213PS (32*h)(AX), Y11, Y10; \
	VMOVUPS Y10, (32*h)(AX)

// LQ81VEC2(loop): LQ81VEC in AVX2 (values in Y0-Y3, m_w in X12).
#define LQ81VEC2(loop) \
loop: \
	VMOVDQU (DX), Y8; \
	VBROADCASTSS 32(DX), Y9; \
	Q81VEC2(0, Y0); \
	Q81VEC2(1, Y1); \
	Q81VEC2(2, Y2); \
	Q81VEC2(3, Y3); \
	VBROADCASTSS (R13), X10; \
	VFMADD213PS 128(AX), X12, X10; \
	VMOVUPS X10, 128(AX); \
	ADDQ $144, AX; \
	ADDQ R9, DX; \
	ADDQ R12, R13; \
	DECQ R10; \
	JNZ loop

// func q4_1TileAVX2(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, scratch *byte, acc *float32)
// q4_1TileAVX512 without AVX-512 (the same rows, arithmetic and acc
// layout): legacyRowQ4_1AVX2's VPMADDUBSW, one row's lanes per ymm
// register. scratch: 128 bytes (the rows' d_w).
TEXT ·q4_1TileAVX2(SB), NOSPLIT, $0-72
	LQ81SETUP2
	TESTQ CX, CX
	JEQ q41ydone

q41yblock:
	LEAQ (SI)(BX*1), DX
	Q41ROW2(SI, 0, Y0)
	Q41ROW2(DX, 1, Y1)
	LEAQ (SI)(BX*2), DX
	Q41ROW2(DX, 2, Y2)
	LEAQ (SI)(R11*1), DX
	Q41ROW2(DX, 3, Y3)
	LQ81BLOCK2(q41yvec)
	ADDQ $20, SI
	ADDQ $36, DI
	ADDQ $4, R8
	DECQ CX
	JNZ q41yblock

q41ydone:
	VZEROUPPER
	RET

// func q5_1TileAVX2(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, scratch *byte, acc *float32)
// q4_1TileAVX2 for Q5_1.
TEXT ·q5_1TileAVX2(SB), NOSPLIT, $0-72
	LQ81SETUP2
	TESTQ CX, CX
	JEQ q51ydone

q51yblock:
	LEAQ (SI)(BX*1), DX
	Q51ROW2(SI, 0, Y0)
	Q51ROW2(DX, 1, Y1)
	LEAQ (SI)(BX*2), DX
	Q51ROW2(DX, 2, Y2)
	LEAQ (SI)(R11*1), DX
	Q51ROW2(DX, 3, Y3)
	LQ81BLOCK2(q51yvec)
	ADDQ $24, SI
	ADDQ $36, DI
	ADDQ $4, R8
	DECQ CX
	JNZ q51yblock

q51ydone:
	VZEROUPPER
	RET
