#include "textflag.h"

// Register tiles for the repacked block types (kquant_tile.go): eight rows
// at once, as llama.cpp's repacked gemv and gemm keep eight rows in the
// lanes of one register. The rows stay in the file's layout; rows r and
// r+4 share a register (row r in the low 128 bits), so that the
// horizontal sums of the eight rows end, after three VPHADDD, as one
// register of the eight rows' integer dots in row order. Integer sums are
// exact; the float step per (row, vector, block) is the Go twin's.

// LPAIR(p, a, b, lo, hi): the 32 levels of block rows a and b (row a in
// the low 128 bits): values 0-15 of both into scratch[64p:] and their
// absolute values into lo, values 16-31 into scratch[64p+32:] and hi.
#define LPAIR(p, a, b, lo, hi) \
	VMOVDQU a, X12; \
	VINSERTI128 $1, b, Y12, Y12; \
	VPSRLW $4, Y12, Y13; \
	VPAND Y15, Y12, Y12; \
	VPAND Y15, Y13, Y13; \
	VPSHUFB Y12, Y14, Y12; \
	VPSHUFB Y13, Y14, Y13; \
	VMOVDQU Y12, (64*p)(R10); \
	VMOVDQU Y13, (64*p+32)(R10); \
	VPSIGNB Y12, Y12, lo; \
	VPSIGNB Y13, Y13, hi

// LDOT(p, lo, hi, out, t): out = the 8 int32 lanes of pair p's dots with
// the vector's values 0-15 (Y9, both halves) and 16-31 (Y10): the sign
// trick (|w| times x*sign(w)), VPMADDUBSW then VPMADDWD by ones (Y11).
#define LDOT(p, lo, hi, out, t) \
	VPSIGNB (64*p)(R10), Y9, out; \
	VPMADDUBSW out, lo, out; \
	VPMADDWD Y11, out, out; \
	VPSIGNB (64*p+32)(R10), Y10, t; \
	VPMADDUBSW t, hi, t; \
	VPMADDWD Y11, t, t; \
	VPADDD t, out, out

// func legacyTileAVX2(w *byte, rb int, act *q8Act, astride, nb, n int, lut *int8, scratch *byte, acc *float32)
// Eight rows of nb Q4_0 or IQ4_NL blocks (w: the first row; rows rb bytes
// apart) against n vectors' Q8_0 blocks (act, then every astride bytes),
// in the arithmetic of ggml's repacked gemv and gemm
// (gemv_q4_b32_8x8_q8_0_lut_avx): per block, the integer dot of the 32
// values (lut[nibble]) with the quants, then acc[8v+r] =
// fma(float(dot), d_w*d_x, acc[8v+r]). scratch: 288 bytes (the block's
// signed levels, then the eight rows' d_w).
TEXT ·legacyTileAVX2(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ astride+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ lut+48(FP), DX
	MOVQ scratch+56(FP), R10
	MOVQ acc+64(FP), R8
	LEAQ (BX)(BX*2), R11         // 3 rows
	LEAQ (SI)(BX*4), R12         // row 4
	MOVL $0x00010001, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	TESTQ CX, CX
	JEQ ltdone

ltblock:
	VBROADCASTI128 (DX), Y14
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	LPAIR(0, 2(SI), 2(R12), Y0, Y1)
	LPAIR(1, 2(SI)(BX*1), 2(R12)(BX*1), Y2, Y3)
	LPAIR(2, 2(SI)(BX*2), 2(R12)(BX*2), Y4, Y5)
	LPAIR(3, 2(SI)(R11*1), 2(R12)(R11*1), Y6, Y7)
	MOVWLZX (SI), AX
	VMOVD AX, X12
	MOVWLZX (SI)(BX*1), AX
	VPINSRW $1, AX, X12, X12
	MOVWLZX (SI)(BX*2), AX
	VPINSRW $2, AX, X12, X12
	MOVWLZX (SI)(R11*1), AX
	VPINSRW $3, AX, X12, X12
	MOVWLZX (R12), AX
	VPINSRW $4, AX, X12, X12
	MOVWLZX (R12)(BX*1), AX
	VPINSRW $5, AX, X12, X12
	MOVWLZX (R12)(BX*2), AX
	VPINSRW $6, AX, X12, X12
	MOVWLZX (R12)(R11*1), AX
	VPINSRW $7, AX, X12, X12
	VCVTPH2PS X12, Y12
	VMOVUPS Y12, 256(R10)        // d_w of the eight rows
	MOVQ n+40(FP), R14
	MOVQ DI, R13
	MOVQ R8, AX
	TESTQ R14, R14
	JEQ ltnext

ltvec:
	VBROADCASTI128 (R13), Y9
	VBROADCASTI128 16(R13), Y10
	LDOT(0, Y0, Y1, Y12, Y13)
	LDOT(1, Y2, Y3, Y13, Y14)
	VPHADDD Y13, Y12, Y12        // rows 0,1 | 4,5
	LDOT(2, Y4, Y5, Y13, Y14)
	LDOT(3, Y6, Y7, Y14, Y15)
	VPHADDD Y14, Y13, Y13        // rows 2,3 | 6,7
	VPHADDD Y13, Y12, Y12        // rows 0-3 | 4-7
	VCVTDQ2PS Y12, Y12
	VBROADCASTSS 32(R13), Y13
	VMULPS 256(R10), Y13, Y13    // d_w * d_x
	VMOVUPS (AX), Y14
	VFMADD231PS Y13, Y12, Y14    // acc += dot * (d_w*d_x)
	VMOVUPS Y14, (AX)
	ADDQ $32, AX
	ADDQ R9, R13
	DECQ R14
	JNZ ltvec

ltnext:
	ADDQ $18, SI
	ADDQ $18, R12
	ADDQ $36, DI
	DECQ CX
	JNZ ltblock

ltdone:
	VZEROUPPER
	RET

// Q4_K's tile: rows one at a time against every vector (phase 1: the
// eight 32-bit lanes of each (row, vector), the row's quants unpacked once
// into Y0-Y7 and its chunk scales broadcast once into scratch), then each
// vector's eight rows summed across lanes by a VPHADDD tree and stepped
// in eight-lane float registers (phase 2).
//
// scratch (416 bytes): 0 the eight chunks' scale vectors (16 int16 each);
// 256 the eight rows' minimums (8 int16 each); 384 d_w and 400 dmin_w of
// the eight rows (F16).

// q4kShuf: VPSHUFB masks, mask c broadcasting byte c as int16.
DATA q4kShuf<>+0(SB)/8, $0x8000800080008000
DATA q4kShuf<>+8(SB)/8, $0x8000800080008000
DATA q4kShuf<>+16(SB)/8, $0x8000800080008000
DATA q4kShuf<>+24(SB)/8, $0x8000800080008000
DATA q4kShuf<>+32(SB)/8, $0x8001800180018001
DATA q4kShuf<>+40(SB)/8, $0x8001800180018001
DATA q4kShuf<>+48(SB)/8, $0x8001800180018001
DATA q4kShuf<>+56(SB)/8, $0x8001800180018001
DATA q4kShuf<>+64(SB)/8, $0x8002800280028002
DATA q4kShuf<>+72(SB)/8, $0x8002800280028002
DATA q4kShuf<>+80(SB)/8, $0x8002800280028002
DATA q4kShuf<>+88(SB)/8, $0x8002800280028002
DATA q4kShuf<>+96(SB)/8, $0x8003800380038003
DATA q4kShuf<>+104(SB)/8, $0x8003800380038003
DATA q4kShuf<>+112(SB)/8, $0x8003800380038003
DATA q4kShuf<>+120(SB)/8, $0x8003800380038003
DATA q4kShuf<>+128(SB)/8, $0x8004800480048004
DATA q4kShuf<>+136(SB)/8, $0x8004800480048004
DATA q4kShuf<>+144(SB)/8, $0x8004800480048004
DATA q4kShuf<>+152(SB)/8, $0x8004800480048004
DATA q4kShuf<>+160(SB)/8, $0x8005800580058005
DATA q4kShuf<>+168(SB)/8, $0x8005800580058005
DATA q4kShuf<>+176(SB)/8, $0x8005800580058005
DATA q4kShuf<>+184(SB)/8, $0x8005800580058005
DATA q4kShuf<>+192(SB)/8, $0x8006800680068006
DATA q4kShuf<>+200(SB)/8, $0x8006800680068006
DATA q4kShuf<>+208(SB)/8, $0x8006800680068006
DATA q4kShuf<>+216(SB)/8, $0x8006800680068006
DATA q4kShuf<>+224(SB)/8, $0x8007800780078007
DATA q4kShuf<>+232(SB)/8, $0x8007800780078007
DATA q4kShuf<>+240(SB)/8, $0x8007800780078007
DATA q4kShuf<>+248(SB)/8, $0x8007800780078007
GLOBL q4kShuf<>(SB), RODATA|NOPTR, $256

// Q4KUNP(j, lo, hi): the low and high nibbles of quant bytes 32j..32j+31
// of the block at SI (sub-blocks 2j and 2j+1).
#define Q4KUNP(j, lo, hi) \
	VMOVDQU (16+j*32)(SI), lo; \
	VPSRLW $4, lo, hi; \
	VPAND Y15, lo, lo; \
	VPAND Y15, hi, hi

// SCV(c): scale vector c from the scale bytes in Y8.
#define SCV(c) \
	VPSHUFB q4kShuf<>+(32*c)(SB), Y8, Y9; \
	VMOVDQU Y9, (32*c)(R14)

// CH(c, w): lanes (Y8) += scale c times the chunk's pair sums.
#define CH(c, w) \
	VPMADDUBSW (32*c)(DX), w, Y9; \
	VPMADDWD (32*c)(R14), Y9, Y9; \
	VPADDD Y9, Y8, Y8

// Q4KPHASE2(mo, do, loop): phase 2 of the Q4_K tiles for block DI, the
// minimums at scratch+mo (16 bytes a row), d_w and dmin_w at scratch+do
// and do+16 (F16): for each vector, the eight rows' sums from rbuf (R12,
// 256 bytes a vector) and their minimums, two eight-lane fused
// multiply-adds into acc.
#define Q4KPHASE2(mo, do, loop) \
	VCVTPH2PS do(R14), Y14; \
	VCVTPH2PS (do+16)(R14), Y15; \
	VMOVDQU mo(R14), X10; \
	VINSERTI128 $1, (mo+64)(R14), Y10, Y10; \
	VMOVDQU (mo+16)(R14), X11; \
	VINSERTI128 $1, (mo+80)(R14), Y11, Y11; \
	VMOVDQU (mo+32)(R14), X12; \
	VINSERTI128 $1, (mo+96)(R14), Y12, Y12; \
	VMOVDQU (mo+48)(R14), X13; \
	VINSERTI128 $1, (mo+112)(R14), Y13, Y13; \
	MOVQ DI, DX; \
	MOVQ R12, AX; \
	MOVQ acc+64(FP), SI; \
	MOVQ n+40(FP), R10; \
loop: \
	VMOVDQU 0(AX), Y0; \
	VPHADDD 32(AX), Y0, Y0; \
	VMOVDQU 64(AX), Y1; \
	VPHADDD 96(AX), Y1, Y1; \
	VPHADDD Y1, Y0, Y0; \
	VMOVDQU 128(AX), Y1; \
	VPHADDD 160(AX), Y1, Y1; \
	VMOVDQU 192(AX), Y2; \
	VPHADDD 224(AX), Y2, Y2; \
	VPHADDD Y2, Y1, Y1; \
	VPERM2I128 $0x20, Y1, Y0, Y2; \
	VPERM2I128 $0x31, Y1, Y0, Y3; \
	VPADDD Y3, Y2, Y2; \
	VCVTDQ2PS Y2, Y2; \
	VBROADCASTSS 288(DX), Y3; \
	VMULPS Y14, Y3, Y4; \
	VMOVUPS (SI), Y5; \
	VFMADD231PS Y4, Y2, Y5; \
	VMOVUPS Y5, (SI); \
	VMOVDQU 256(DX), Y6; \
	VPHADDW Y6, Y6, Y6; \
	VPERMQ $0x88, Y6, Y6; \
	VPMADDWD Y10, Y6, Y7; \
	VPMADDWD Y11, Y6, Y8; \
	VPHADDD Y8, Y7, Y7; \
	VPMADDWD Y12, Y6, Y8; \
	VPMADDWD Y13, Y6, Y9; \
	VPHADDD Y9, Y8, Y8; \
	VPHADDD Y8, Y7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	VMULPS Y15, Y3, Y4; \
	VMOVUPS 32(SI), Y5; \
	VFMADD231PS Y4, Y7, Y5; \
	VMOVUPS Y5, 32(SI); \
	ADDQ $64, SI; \
	ADDQ $256, AX; \
	ADDQ astride+24(FP), DX; \
	DECQ R10; \
	JNZ loop

// func q4kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, rbuf *byte, acc *float32)
// Eight rows of nb repacked Q4_K blocks (w: the first row; rows rb bytes
// apart) against n >= 1 vectors' Q8_K blocks (act, then every astride
// bytes), in the arithmetic of ggml_gemm_q4_K_8x8_q8_K: per block s =
// sum_c sc[c]*(w*x over sub-block c), smin = sum_c min[c]*(c's activation
// sum), acc[16v+r] = fma(float(s), d_w*d_x, acc[16v+r]) and acc[16v+8+r]
// = fma(float(smin), dmin_w*d_x, acc[16v+8+r]). rbuf: 256*n bytes.
TEXT ·q4kTileAVX2(SB), NOSPLIT, $0-72
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVQ rbuf+56(FP), R12
	MOVQ w+0(FP), R8
	TESTQ CX, CX
	JEQ q4ktdone

q4ktblock:
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVQ R8, SI
	XORQ R9, R9

q4ktrow:
	// the utmp shuffle: R10 scales 0-3, R13 scales 4-7, R11 mins 0-3, AX mins 4-7
	MOVL 4(SI), R10
	MOVL 8(SI), R11
	MOVL 12(SI), R13
	MOVL R11, AX
	SHRL $6, AX
	ANDL $0x03030303, AX
	SHLL $4, AX
	MOVL R13, DX
	SHRL $4, DX
	ANDL $0x0F0F0F0F, DX
	ORL DX, AX
	ANDL $0x3F3F3F3F, R11
	MOVL R10, DX
	SHRL $6, DX
	ANDL $0x03030303, DX
	SHLL $4, DX
	ANDL $0x0F0F0F0F, R13
	ORL DX, R13
	ANDL $0x3F3F3F3F, R10
	VMOVD R11, X9
	VPINSRD $1, AX, X9, X9
	VPMOVZXBW X9, X9
	MOVQ R9, AX
	SHLQ $4, AX
	VMOVDQU X9, 256(R14)(AX*1)   // the row's minimums
	VMOVD R10, X8
	VPINSRD $1, R13, X8, X8
	VPBROADCASTQ X8, Y8
	SCV(0)
	SCV(1)
	SCV(2)
	SCV(3)
	SCV(4)
	SCV(5)
	SCV(6)
	SCV(7)
	MOVWLZX (SI), AX
	MOVW AX, 384(R14)(R9*2)
	MOVWLZX 2(SI), AX
	MOVW AX, 400(R14)(R9*2)
	Q4KUNP(0, Y0, Y1)
	Q4KUNP(1, Y2, Y3)
	Q4KUNP(2, Y4, Y5)
	Q4KUNP(3, Y6, Y7)
	MOVQ DI, DX
	MOVQ R9, AX
	SHLQ $5, AX
	ADDQ R12, AX
	MOVQ n+40(FP), R10

q4ktvec:
	VPMADDUBSW 0(DX), Y0, Y9
	VPMADDWD 0(R14), Y9, Y8
	CH(1, Y1)
	CH(2, Y2)
	CH(3, Y3)
	CH(4, Y4)
	CH(5, Y5)
	CH(6, Y6)
	CH(7, Y7)
	VMOVDQU Y8, (AX)
	ADDQ $256, AX
	ADDQ astride+24(FP), DX
	DECQ R10
	JNZ q4ktvec

	ADDQ BX, SI
	INCQ R9
	CMPQ R9, $8
	JLT q4ktrow

	// phase 2: each vector's eight rows (the tree: rows 0,1 | 4,5, then
	// 0-3 with their low and high lanes apart; the minimums by row pairs
	// p, p+4 against the sub-blocks' activation sums in both halves)
	Q4KPHASE2(256, 384, q4kt2)

	ADDQ $144, R8
	ADDQ $292, DI
	DECQ CX
	JNZ q4ktblock

q4ktdone:
	VZEROUPPER
	RET

// Q4KPREP(h): row SI's scales, minimums and F16 scales into scratch for
// half h of the row pair R9 (rows R9, R9+1): the chunk scale vectors at
// 64c+32h, the minimums at 512+16*(R9+h), d_w at 640 and dmin_w at 656.
#define Q4KPREP(h) \
	MOVL 4(SI), R10; \
	MOVL 8(SI), R11; \
	MOVL 12(SI), R13; \
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
	VMOVD R11, X9; \
	VPINSRD $1, AX, X9, X9; \
	VPMOVZXBW X9, X9; \
	MOVQ R9, AX; \
	SHLQ $4, AX; \
	VMOVDQU X9, (512+16*h)(R14)(AX*1); \
	VMOVD R10, X8; \
	VPINSRD $1, R13, X8, X8; \
	VPBROADCASTQ X8, Y8; \
	VPSHUFB q4kShuf<>+0(SB), Y8, Y9; \
	VMOVDQU Y9, (32*h)(R14); \
	VPSHUFB q4kShuf<>+32(SB), Y8, Y9; \
	VMOVDQU Y9, (64+32*h)(R14); \
	VPSHUFB q4kShuf<>+64(SB), Y8, Y9; \
	VMOVDQU Y9, (128+32*h)(R14); \
	VPSHUFB q4kShuf<>+96(SB), Y8, Y9; \
	VMOVDQU Y9, (192+32*h)(R14); \
	VPSHUFB q4kShuf<>+128(SB), Y8, Y9; \
	VMOVDQU Y9, (256+32*h)(R14); \
	VPSHUFB q4kShuf<>+160(SB), Y8, Y9; \
	VMOVDQU Y9, (320+32*h)(R14); \
	VPSHUFB q4kShuf<>+192(SB), Y8, Y9; \
	VMOVDQU Y9, (384+32*h)(R14); \
	VPSHUFB q4kShuf<>+224(SB), Y8, Y9; \
	VMOVDQU Y9, (448+32*h)(R14); \
	MOVWLZX (SI), AX; \
	MOVW AX, (640+2*h)(R14)(R9*2); \
	MOVWLZX 2(SI), AX; \
	MOVW AX, (656+2*h)(R14)(R9*2)

// Q4KUNP512(j, lo, hi): Q4KUNP for rows SI and SI+BX at once (the second
// in the high 256 bits).
#define Q4KUNP512(j, lo, hi) \
	VMOVDQU64 (16+j*32)(SI), Y20; \
	VINSERTI64X4 $1, (16+j*32)(SI)(BX*1), Z20, Z20; \
	VPSRLW $4, Z20, Z21; \
	VPANDD Z31, Z20, lo; \
	VPANDD Z31, Z21, hi

// CH512(c, w, acc): acc += the row pair's scales c times its pair sums
// with the vector's chunk c (in both halves).
#define CH512(c, w, acc) \
	VBROADCASTI64X4 (32*c)(DX), Z16; \
	VPMADDUBSW Z16, w, Z17; \
	VPDPWSSD (64*c)(R14), Z17, acc

// func q4kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, rbuf *byte, acc *float32)
// q4kTileAVX2 with phase 1 on AVX-512 (BW, VNNI): two rows in one zmm
// register, VPDPWSSD for the scales' multiply-add. scratch: 672 bytes.
TEXT ·q4kTileAVX512(SB), NOSPLIT, $0-72
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVQ rbuf+56(FP), R12
	MOVQ w+0(FP), R8
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	TESTQ CX, CX
	JEQ q4kzdone

q4kzblock:
	MOVQ R8, SI
	XORQ R9, R9

q4kzpair:
	Q4KPREP(0)
	ADDQ BX, SI
	Q4KPREP(1)
	SUBQ BX, SI
	Q4KUNP512(0, Z0, Z1)
	Q4KUNP512(1, Z2, Z3)
	Q4KUNP512(2, Z4, Z5)
	Q4KUNP512(3, Z6, Z7)
	MOVQ DI, DX
	MOVQ R9, AX
	SHLQ $5, AX
	ADDQ R12, AX
	MOVQ n+40(FP), R10

q4kzvec:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	CH512(0, Z0, Z8)
	CH512(1, Z1, Z9)
	CH512(2, Z2, Z8)
	CH512(3, Z3, Z9)
	CH512(4, Z4, Z8)
	CH512(5, Z5, Z9)
	CH512(6, Z6, Z8)
	CH512(7, Z7, Z9)
	VPADDD Z9, Z8, Z8
	VMOVDQU64 Z8, (AX)           // rows R9 and R9+1
	ADDQ $256, AX
	ADDQ astride+24(FP), DX
	DECQ R10
	JNZ q4kzvec

	LEAQ (SI)(BX*2), SI
	ADDQ $2, R9
	CMPQ R9, $8
	JLT q4kzpair

	Q4KPHASE2(512, 640, q4kz2)

	ADDQ $144, R8
	ADDQ $292, DI
	DECQ CX
	JNZ q4kzblock

q4kzdone:
	VZEROUPPER
	RET

// q6kShuf: ggml's get_scale_shuffle masks, chunk c's two scales eight
// bytes each (q6kShuffle's).
DATA q6kShuf<>+0(SB)/8, $0x0000000000000000
DATA q6kShuf<>+8(SB)/8, $0x0101010101010101
DATA q6kShuf<>+16(SB)/8, $0x0202020202020202
DATA q6kShuf<>+24(SB)/8, $0x0303030303030303
DATA q6kShuf<>+32(SB)/8, $0x0404040404040404
DATA q6kShuf<>+40(SB)/8, $0x0505050505050505
DATA q6kShuf<>+48(SB)/8, $0x0606060606060606
DATA q6kShuf<>+56(SB)/8, $0x0707070707070707
DATA q6kShuf<>+64(SB)/8, $0x0808080808080808
DATA q6kShuf<>+72(SB)/8, $0x0909090909090909
DATA q6kShuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6kShuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6kShuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6kShuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6kShuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6kShuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6kShuf<>(SB), RODATA|NOPTR, $128

// Q6SCV(c, h): chunk c's scale vector of row h of the pair (scales in X8).
#define Q6SCV(c, h) \
	VPSHUFB q6kShuf<>+(16*c)(SB), X8, X10; \
	VPMOVSXBW X10, Y10; \
	VMOVDQU Y10, (64*c+32*h)(R14)

// Q6PREP(h, row, dreg): row h of the pair (its block at row): the chunk
// scale vectors, the 16 scales widened at 512+32h, d_w broadcast in dreg.
#define Q6PREP(h, row, dreg) \
	VMOVDQU 192(row), X8; \
	VPMOVSXBW X8, Y9; \
	VMOVDQU Y9, (512+32*h)(R14); \
	Q6SCV(0, h); \
	Q6SCV(1, h); \
	Q6SCV(2, h); \
	Q6SCV(3, h); \
	Q6SCV(4, h); \
	Q6SCV(5, h); \
	Q6SCV(6, h); \
	Q6SCV(7, h); \
	MOVWLZX 208(row), AX; \
	VMOVD AX, X9; \
	VCVTPH2PS X9, X9; \
	VBROADCASTSS X9, dreg

// Q6U512(n, c0, c1, c2, c3): Q6U for the row pair (SI, SI+BX), the second
// row in the high 256 bits.
#define Q6U512(n, c0, c1, c2, c3) \
	VMOVDQU64 (n*64)(SI), Y8; \
	VINSERTI64X4 $1, (n*64)(SI)(BX*1), Z8, Z8; \
	VMOVDQU64 (n*64+32)(SI), Y9; \
	VINSERTI64X4 $1, (n*64+32)(SI)(BX*1), Z9, Z9; \
	VMOVDQU64 (128+n*32)(SI), Y10; \
	VINSERTI64X4 $1, (128+n*32)(SI)(BX*1), Z10, Z10; \
	VPANDD Z30, Z10, c0; \
	VPSLLW $4, c0, c0; \
	VPANDD Z31, Z8, Z11; \
	VPORD Z11, c0, c0; \
	VPSRLW $2, Z10, c1; \
	VPANDD Z30, c1, c1; \
	VPSLLW $4, c1, c1; \
	VPANDD Z31, Z9, Z11; \
	VPORD Z11, c1, c1; \
	VPSRLW $4, Z10, c2; \
	VPANDD Z30, c2, c2; \
	VPSLLW $4, c2, c2; \
	VPSRLW $4, Z8, Z11; \
	VPANDD Z31, Z11, Z11; \
	VPORD Z11, c2, c2; \
	VPSRLW $6, Z10, c3; \
	VPANDD Z30, c3, c3; \
	VPSLLW $4, c3, c3; \
	VPSRLW $4, Z9, Z11; \
	VPANDD Z31, Z11, Z11; \
	VPORD Z11, c3, c3

// CH6(c, w, acc): acc += the pair's chunk c scale vectors times its pair
// sums with the vector's chunk c (in both halves).
#define CH6(c, w, acc) \
	VBROADCASTI64X4 (32*c)(DX), Z16; \
	VPMADDUBSW Z16, w, Z17; \
	VPDPWSSD (64*c)(R14), Z17, acc

// func q6kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// Two rows of nb Q6_K blocks (w, w+rb) against n >= 1 vectors' Q8_K
// blocks (act, then every astride bytes), in the arithmetic of
// ggml_vec_dot_q6_K_q8_K (AVX2) for each (row, vector): per block the
// eight lanes (unsigned values times the activations, the chunk scales),
// less 32*(bsums*scales by pairs), then lanes = fma(d_x*d_w,
// float(lanes), lanes) into acc[16v+8h:16v+8h+8] for row h. The two rows
// share one zmm register (row 1 in the high 256 bits). scratch: 576
// bytes.
TEXT ·q6kTileAVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	MOVL $0x03030303, AX
	VPBROADCASTD AX, Z30
	TESTQ CX, CX
	JEQ q6kzdone

q6kzblock:
	LEAQ (SI)(BX*1), R8
	Q6PREP(0, SI, Y13)
	Q6PREP(1, R8, Y12)
	VINSERTF64X4 $1, Y12, Z13, Z13   // d_w of both rows
	Q6U512(0, Z0, Z1, Z2, Z3)
	Q6U512(1, Z4, Z5, Z6, Z7)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10

q6kzvec:
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	CH6(0, Z0, Z14)
	CH6(1, Z1, Z15)
	CH6(2, Z2, Z14)
	CH6(3, Z3, Z15)
	CH6(4, Z4, Z14)
	CH6(5, Z5, Z15)
	CH6(6, Z6, Z14)
	CH6(7, Z7, Z15)
	VPADDD Z15, Z14, Z14
	VBROADCASTI64X4 256(DX), Z16     // bsums
	VPMADDWD 512(R14), Z16, Z17
	VPSLLD $5, Z17, Z17
	VPSUBD Z17, Z14, Z14
	VCVTDQ2PS Z14, Z14
	VBROADCASTSS 288(DX), Z16        // d_x
	VMULPS Z13, Z16, Z16             // d_x*d_w
	VMOVUPS (AX), Z17
	VFMADD231PS Z16, Z14, Z17        // lanes = float(lanes)*d + lanes
	VMOVUPS Z17, (AX)
	ADDQ $64, AX
	ADDQ astride+24(FP), DX
	DECQ R10
	JNZ q6kzvec

	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q6kzblock

q6kzdone:
	VZEROUPPER
	RET

// Q5PREP(h, row): row h of a Q5_K pair (its block at row): the chunk
// scale vectors at 64c+32h (the utmp shuffle, as Q4KPREP), the eight
// minimums at 512+16h, d_w at 544+4h and dmin_w at 552+4h (F32).
#define Q5PREP(h, row) \
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
	VMOVD R11, X9; \
	VPINSRD $1, AX, X9, X9; \
	VPMOVZXBW X9, X9; \
	VMOVDQU X9, (512+16*h)(R14); \
	VMOVD R10, X8; \
	VPINSRD $1, R13, X8, X8; \
	VPBROADCASTQ X8, Y8; \
	VPSHUFB q4kShuf<>+0(SB), Y8, Y9; \
	VMOVDQU Y9, (32*h)(R14); \
	VPSHUFB q4kShuf<>+32(SB), Y8, Y9; \
	VMOVDQU Y9, (64+32*h)(R14); \
	VPSHUFB q4kShuf<>+64(SB), Y8, Y9; \
	VMOVDQU Y9, (128+32*h)(R14); \
	VPSHUFB q4kShuf<>+96(SB), Y8, Y9; \
	VMOVDQU Y9, (192+32*h)(R14); \
	VPSHUFB q4kShuf<>+128(SB), Y8, Y9; \
	VMOVDQU Y9, (256+32*h)(R14); \
	VPSHUFB q4kShuf<>+160(SB), Y8, Y9; \
	VMOVDQU Y9, (320+32*h)(R14); \
	VPSHUFB q4kShuf<>+192(SB), Y8, Y9; \
	VMOVDQU Y9, (384+32*h)(R14); \
	VPSHUFB q4kShuf<>+224(SB), Y8, Y9; \
	VMOVDQU Y9, (448+32*h)(R14); \
	MOVWLZX (row), AX; \
	VMOVD AX, X9; \
	VCVTPH2PS X9, X9; \
	VMOVSS X9, (544+4*h)(R14); \
	MOVWLZX 2(row), AX; \
	VMOVD AX, X9; \
	VCVTPH2PS X9, X9; \
	VMOVSS X9, (552+4*h)(R14)

// Q5U512(j, lo, hi): chunks 2j and 2j+1 of the Q5_K row pair (SI,
// SI+BX; qh of both in Z10): the low and high nibbles of quant bytes
// 32j..32j+31, with bits 2j and 2j+1 of qh as their fifth bits.
#define Q5U512(j, lo, hi) \
	VMOVDQU64 (48+j*32)(SI), Y8; \
	VINSERTI64X4 $1, (48+j*32)(SI)(BX*1), Z8, Z8; \
	VPSRLW $4, Z8, Z9; \
	VPANDD Z31, Z8, lo; \
	VPANDD Z31, Z9, hi; \
	VPSRLW $(2*j), Z10, Z11; \
	VPSLLW $4, Z11, Z9; \
	VPANDD Z29, Z9, Z9; \
	VPORD Z9, lo, lo; \
	VPSLLW $3, Z11, Z9; \
	VPANDD Z29, Z9, Z9; \
	VPORD Z9, hi, hi

// func q5kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// Two rows of nb Q5_K blocks (w, w+rb) against n >= 1 vectors' Q8_K
// blocks (act, then every astride bytes), in the arithmetic of
// ggml_vec_dot_q5_K_q8_K (AVX2) for each (row, vector): per block the
// eight lanes (values 0..31 times the activations, the sub-block scales by
// VPDPWSSD), lanes = fma(d_x*d_w, float(lanes), lanes), and summs =
// fma(-(d_x*dmin_w), float(mins . bsums), summs). acc: 32 floats a
// vector: the lanes of row 0, those of row 1, then row 0's summs four
// times and row 1's four times. scratch: 560 bytes.
TEXT ·q5kTileAVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Z29
	TESTQ CX, CX
	JEQ q5kzdone

q5kzblock:
	LEAQ (SI)(BX*1), R8
	Q5PREP(0, SI)
	Q5PREP(1, R8)
	VBROADCASTSS 544(R14), Y13
	VBROADCASTSS 548(R14), Y12
	VINSERTF64X4 $1, Y12, Z13, Z13   // d_w, eight lanes a row
	VBROADCASTSS 552(R14), X12
	VBROADCASTSS 556(R14), X9
	VINSERTF128 $1, X9, Y12, Y12     // dmin_w, four lanes a row
	VMOVDQU64 16(SI), Y10
	VINSERTI64X4 $1, 16(SI)(BX*1), Z10, Z10   // qh of both rows
	Q5U512(0, Z0, Z1)
	Q5U512(1, Z2, Z3)
	Q5U512(2, Z4, Z5)
	Q5U512(3, Z6, Z7)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10

q5kzvec:
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	CH6(0, Z0, Z14)
	CH6(1, Z1, Z15)
	CH6(2, Z2, Z14)
	CH6(3, Z3, Z15)
	CH6(4, Z4, Z14)
	CH6(5, Z5, Z15)
	CH6(6, Z6, Z14)
	CH6(7, Z7, Z15)
	VPADDD Z15, Z14, Z14
	VCVTDQ2PS Z14, Z14
	VBROADCASTSS 288(DX), Z16        // d_x
	VMULPS Z13, Z16, Z17             // d_x*d_w
	VMOVUPS (AX), Z15
	VFMADD231PS Z17, Z14, Z15        // lanes = float(lanes)*d + lanes
	VMOVUPS Z15, (AX)
	VMOVDQU 256(DX), Y8              // bsums
	VPHADDW Y8, Y8, Y8
	VPERMQ $0x88, Y8, Y8             // the eight sub-blocks' sums, in both halves
	VPMADDWD 512(R14), Y8, Y9        // row 0 | row 1
	VPHADDD Y9, Y9, Y9
	VPHADDD Y9, Y9, Y9               // each row's mins . bsums, four times
	VCVTDQ2PS Y9, Y9
	VBROADCASTSS 288(DX), Y11
	VMULPS Y12, Y11, Y11             // d_x*dmin_w
	VMOVUPS 64(AX), Y8
	VFNMADD231PS Y11, Y9, Y8         // summs = -(d_x*dmin_w)*float(.) + summs
	VMOVUPS Y8, 64(AX)
	ADDQ $128, AX
	ADDQ astride+24(FP), DX
	DECQ R10
	JNZ q5kzvec

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q5kzblock

q5kzdone:
	VZEROUPPER
	RET

// LQUAD(a, b, c, d, lo, hi): the biased levels (lut', Z30) of block rows
// a, b, c, d in the four 128-bit lanes of lo (values 0-15) and hi (16-31).
#define LQUAD(a, b, c, d, lo, hi) \
	VMOVDQU32 a, X24; \
	VINSERTI32X4 $1, b, Z24, Z24; \
	VINSERTI32X4 $2, c, Z24, Z24; \
	VINSERTI32X4 $3, d, Z24, Z24; \
	VPSRLW $4, Z24, Z25; \
	VPANDD Z31, Z24, Z24; \
	VPANDD Z31, Z25, Z25; \
	VPSHUFB Z24, Z30, lo; \
	VPSHUFB Z25, Z30, hi

// func legacyTileAVX512(w *byte, rb int, act *q8Act, astride, nb, n int, lut *byte, bias int, acc *float32)
// legacyTileAVX2 on AVX-512 VNNI: four rows in the 128-bit lanes of one
// zmm register (rows 0, 4, 2, 6 and 1, 5, 3, 7), the levels biased to
// unsigned bytes (lut[nibble] = level + bias) for VPDPBUSD, and bias times
// the sum of the activations taken off each row's lanes; the same integer
// dots, so the same bits.
TEXT ·legacyTileAVX512(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ astride+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ lut+48(FP), DX
	MOVQ bias+56(FP), AX
	MOVQ acc+64(FP), R8
	VPBROADCASTB AX, Z29
	VBROADCASTI32X4 (DX), Z30
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	LEAQ (BX)(BX*2), R11         // 3 rows
	LEAQ (SI)(BX*4), R12         // row 4
	TESTQ CX, CX
	JEQ lzdone

lzblock:
	LQUAD(2(SI), 2(R12), 2(SI)(BX*2), 2(R12)(BX*2), Z20, Z21)
	LQUAD(2(SI)(BX*1), 2(R12)(BX*1), 2(SI)(R11*1), 2(R12)(R11*1), Z22, Z23)
	MOVWLZX (SI), AX
	VMOVD AX, X13
	MOVWLZX (SI)(BX*1), AX
	VPINSRW $1, AX, X13, X13
	MOVWLZX (SI)(BX*2), AX
	VPINSRW $2, AX, X13, X13
	MOVWLZX (SI)(R11*1), AX
	VPINSRW $3, AX, X13, X13
	MOVWLZX (R12), AX
	VPINSRW $4, AX, X13, X13
	MOVWLZX (R12)(BX*1), AX
	VPINSRW $5, AX, X13, X13
	MOVWLZX (R12)(BX*2), AX
	VPINSRW $6, AX, X13, X13
	MOVWLZX (R12)(R11*1), AX
	VPINSRW $7, AX, X13, X13
	VCVTPH2PS X13, Y13           // d_w of the eight rows
	MOVQ n+40(FP), R10
	MOVQ DI, R13
	MOVQ R8, AX
	TESTQ R10, R10
	JEQ lznext

lzvec:
	VBROADCASTI32X4 (R13), Z16   // values 0-15
	VBROADCASTI32X4 16(R13), Z17 // values 16-31
	VPXORD Z18, Z18, Z18
	VPDPBUSD Z16, Z29, Z18
	VPDPBUSD Z17, Z29, Z18       // bias * the activations, by fours
	VPXORD Z0, Z0, Z0
	VPDPBUSD Z16, Z20, Z0
	VPDPBUSD Z17, Z21, Z0
	VPSUBD Z18, Z0, Z0           // rows 0 | 4 | 2 | 6
	VPXORD Z1, Z1, Z1
	VPDPBUSD Z16, Z22, Z1
	VPDPBUSD Z17, Z23, Z1
	VPSUBD Z18, Z1, Z1           // rows 1 | 5 | 3 | 7
	VEXTRACTI64X4 $1, Z0, Y2
	VEXTRACTI64X4 $1, Z1, Y3
	VPHADDD Y1, Y0, Y0           // rows 0,1 | 4,5
	VPHADDD Y3, Y2, Y2           // rows 2,3 | 6,7
	VPHADDD Y2, Y0, Y0           // rows 0-3 | 4-7
	VCVTDQ2PS Y0, Y0
	VBROADCASTSS 32(R13), Y4
	VMULPS Y13, Y4, Y4           // d_x * d_w
	VMOVUPS (AX), Y5
	VFMADD231PS Y4, Y0, Y5       // acc += dot * (d_x*d_w)
	VMOVUPS Y5, (AX)
	ADDQ $32, AX
	ADDQ R9, R13
	DECQ R10
	JNZ lzvec

lznext:
	ADDQ $18, SI
	ADDQ $18, R12
	ADDQ $36, DI
	DECQ CX
	JNZ lzblock

lzdone:
	VZEROUPPER
	RET

// Q2CH(j, v, c): chunk c = 4j+v of a Q2_K block: bits 2v of quant bytes
// 32j.. (Y0/Y1 for j = 0/1) times the activations, by the chunk's scale
// vector (the 4-bit scales in X8 through mask c of q6kShuf), into Y12.
#define Q2CH(src, v, c) \
	VPSRLW $(2*v), src, Y2; \
	VPAND Y15, Y2, Y2; \
	VPMADDUBSW (32*c)(DI), Y2, Y2; \
	VPSHUFB q6kShuf<>+(16*c)(SB), X8, X3; \
	VPMOVZXBW X3, Y3; \
	VPMADDWD Y3, Y2, Y2; \
	VPADDD Y2, Y12, Y12

// func q2kRowAVX2(row *byte, act *q8KAct, nb int, acc *float32)
// A whole row of nb Q2_K blocks (84 bytes: scales[16], qs[64], d, dmin)
// against one vector, in the arithmetic of ggml_vec_dot_q2_K_q8_K (AVX2):
// per block, lanes = fma(-(d_x*dmin_w), float(mins . bsums by pairs),
// lanes), then lanes = fma(d_x*d_w, float(the scaled value lanes),
// lanes). acc: the eight lanes (the caller adds them as hsum_float_8
// does).
TEXT ·q2kRowAVX2(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ acc+24(FP), R8
	MOVL $0x03030303, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y13, Y13, Y13         // the lanes
	TESTQ CX, CX
	JEQ q2krdone

q2krloop:
	VMOVDQU (SI), X8             // scales
	VPSRLW $4, X8, X9
	VPAND X14, X9, X9
	VPMOVZXBW X9, Y9             // the 16 mins
	VPMADDWD 256(DI), Y9, Y9     // mins * bsums, by pairs
	VCVTDQ2PS Y9, Y9
	MOVWLZX 82(SI), AX
	VMOVD AX, X10
	VCVTPH2PS X10, X10           // dmin_w
	VMULSS 288(DI), X10, X10     // d_x*dmin_w
	VBROADCASTSS X10, Y10
	VFNMADD231PS Y10, Y9, Y13    // lanes = -(d_x*dmin_w)*float(.) + lanes
	VPAND X14, X8, X8            // the 16 scales
	VMOVDQU 16(SI), Y0
	VMOVDQU 48(SI), Y1
	VPXOR Y12, Y12, Y12
	Q2CH(Y0, 0, 0)
	Q2CH(Y0, 1, 1)
	Q2CH(Y0, 2, 2)
	Q2CH(Y0, 3, 3)
	Q2CH(Y1, 0, 4)
	Q2CH(Y1, 1, 5)
	Q2CH(Y1, 2, 6)
	Q2CH(Y1, 3, 7)
	VCVTDQ2PS Y12, Y12
	MOVWLZX 80(SI), AX
	VMOVD AX, X10
	VCVTPH2PS X10, X10           // d_w
	VMULSS 288(DI), X10, X10     // d_x*d_w
	VBROADCASTSS X10, Y10
	VFMADD231PS Y10, Y12, Y13    // lanes = float(lanes)*d + lanes
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q2krloop

q2krdone:
	VMOVUPS Y13, (R8)
	VZEROUPPER
	RET

// Q3CH(src, v, c): chunk c = 4j+v of a Q3_K block: the 2-bit values
// (bits 2v of quant bytes 32j.., src) less 4 where bit c of hmask (Y4) is
// clear, times the activations, by the chunk's scale vector (the signed
// scales in X8 through mask c of q6kShuf), into Y12.
#define Q3CH(src, v, c) \
	VPSRLW $(2*v), src, Y2; \
	VPAND Y15, Y2, Y2; \
	VPMADDUBSW (32*c)(DI), Y2, Y2; \
	VPSRLW $c, Y4, Y5; \
	VPAND Y14, Y5, Y5; \
	VPXOR Y14, Y5, Y5; \
	VPSLLW $2, Y5, Y5; \
	VPMADDUBSW (32*c)(DI), Y5, Y5; \
	VPSUBW Y5, Y2, Y2; \
	VPSHUFB q6kShuf<>+(16*c)(SB), X8, X3; \
	VPMOVSXBW X3, Y3; \
	VPMADDWD Y3, Y2, Y2; \
	VPADDD Y2, Y12, Y12

// func q3kRowAVX2(row *byte, act *q8KAct, nb int, acc *float32)
// A whole row of nb Q3_K blocks (110 bytes: hmask[32], qs[64],
// scales[12], d) against one vector, in the arithmetic of
// ggml_vec_dot_q3_K_q8_K (AVX2): per block the eight lanes (values -4..3
// times the activations, the 6-bit scales less 32), lanes = fma(d_x*d_w,
// float(lanes), lanes). acc: the eight lanes.
TEXT ·q3kRowAVX2(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ acc+24(FP), R8
	MOVL $0x03030303, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x01010101, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x20202020, AX
	VMOVD AX, X11
	VPBROADCASTD X11, X11        // 32 in every byte
	VXORPS Y13, Y13, Y13         // the lanes
	TESTQ CX, CX
	JEQ q3krdone

q3krloop:
	// the scales: ggml's kmask shuffle of the twelve bytes, less 32
	MOVL 96(SI), R9              // aux0
	MOVL 100(SI), R10            // aux1
	MOVL 104(SI), R11            // tmp
	MOVL R9, AX
	SHRL $4, AX
	ANDL $0x0F0F0F0F, AX
	MOVL R11, BX
	SHRL $4, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL BX, AX                   // scales 8-11
	MOVL R10, DX
	SHRL $4, DX
	ANDL $0x0F0F0F0F, DX
	MOVL R11, BX
	SHRL $6, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL BX, DX                   // scales 12-15
	ANDL $0x0F0F0F0F, R9
	MOVL R11, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL BX, R9                   // scales 0-3
	ANDL $0x0F0F0F0F, R10
	MOVL R11, BX
	SHRL $2, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL BX, R10                  // scales 4-7
	VMOVD R9, X8
	VPINSRD $1, R10, X8, X8
	VPINSRD $2, AX, X8, X8
	VPINSRD $3, DX, X8, X8
	VPSUBB X11, X8, X8           // the 16 scales, -32..31
	VMOVDQU (SI), Y4             // hmask
	VMOVDQU 32(SI), Y0
	VMOVDQU 64(SI), Y1
	VPXOR Y12, Y12, Y12
	Q3CH(Y0, 0, 0)
	Q3CH(Y0, 1, 1)
	Q3CH(Y0, 2, 2)
	Q3CH(Y0, 3, 3)
	Q3CH(Y1, 0, 4)
	Q3CH(Y1, 1, 5)
	Q3CH(Y1, 2, 6)
	Q3CH(Y1, 3, 7)
	VCVTDQ2PS Y12, Y12
	MOVWLZX 108(SI), AX
	VMOVD AX, X10
	VCVTPH2PS X10, X10           // d_w
	VMULSS 288(DI), X10, X10     // d_x*d_w
	VBROADCASTSS X10, Y10
	VFMADD231PS Y10, Y12, Y13    // lanes = float(lanes)*d + lanes
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q3krloop

q3krdone:
	VMOVUPS Y13, (R8)
	VZEROUPPER
	RET

// bytes_from_bits_32: byte j of a broadcast qh picked (byte j/8) and the
// mask of its bit j%8.
DATA q5Pick<>+0(SB)/8, $0x0000000000000000
DATA q5Pick<>+8(SB)/8, $0x0101010101010101
DATA q5Pick<>+16(SB)/8, $0x0202020202020202
DATA q5Pick<>+24(SB)/8, $0x0303030303030303
GLOBL q5Pick<>(SB), RODATA|NOPTR, $32
DATA q5Bit<>+0(SB)/8, $0x8040201008040201
DATA q5Bit<>+8(SB)/8, $0x8040201008040201
DATA q5Bit<>+16(SB)/8, $0x8040201008040201
DATA q5Bit<>+24(SB)/8, $0x8040201008040201
GLOBL q5Bit<>(SB), RODATA|NOPTR, $32

// The vec_dot legacy types against Q8_0 (Q8_1) activations, a whole row
// per call, in the arithmetic of ggml_vec_dot_q4_0_q8_0, q5_0_q8_0,
// q4_1_q8_1 and q5_1_q8_1 (AVX2): per block the eight lanes (four values
// each), lanes = fma(d_w*d_x, float(lanes), lanes); Q4_1 and Q5_1 also
// summs = fma(m_w, s_x, summs). out: the lanes, then summs (the caller
// adds hsum_float_8(lanes) + summs). s: the Q8_1 blocks' s (Q4_1, Q5_1).

// func legacyRowQ4_0AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)
TEXT ·legacyRowQ4_0AVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ s+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x00010001, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x8080808, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	VXORPS Y14, Y14, Y14
	VXORPS X9, X9, X9
	TESTQ CX, CX
	JEQ legacyRowQ4_0AVX2_done

legacyRowQ4_0AVX2_loop:
	VMOVDQU 2(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VINSERTI128 $1, X3, Y2, Y2   // the nibbles of values 0-31
	VPSUBB Y8, Y2, Y2            // signed values
	VMOVDQU (DI), Y4
	VPSIGNB Y2, Y4, Y4
	VPABSB Y2, Y2
	VPMADDUBSW Y4, Y2, Y2
	VPMADDWD Y13, Y2, Y2
	VCVTDQ2PS Y2, Y2
	MOVWLZX 0(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VMULSS 32(DI), X5, X5        // d_w*d_x
	VBROADCASTSS X5, Y5
	VFMADD231PS Y5, Y2, Y14      // lanes = float(lanes)*d + lanes
	ADDQ $18, SI
	ADDQ $36, DI
	DECQ CX
	JNZ legacyRowQ4_0AVX2_loop

legacyRowQ4_0AVX2_done:
	VMOVUPS Y14, (R8)
	VMOVSS X9, 32(R8)
	VZEROUPPER
	RET

// func legacyRowQ5_0AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)
TEXT ·legacyRowQ5_0AVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ s+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x00010001, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VMOVDQU q5Pick<>(SB), Y12
	VMOVDQU q5Bit<>(SB), Y11
	MOVL $0x10101010, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0x10101010, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	VXORPS Y14, Y14, Y14
	VXORPS X9, X9, X9
	TESTQ CX, CX
	JEQ legacyRowQ5_0AVX2_done

legacyRowQ5_0AVX2_loop:
	VMOVDQU 6(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VINSERTI128 $1, X3, Y2, Y2   // the nibbles of values 0-31
	VPBROADCASTD 2(SI), Y3
	VPSHUFB Y12, Y3, Y3
	VPAND Y11, Y3, Y3
	VPCMPEQB Y11, Y3, Y3
	VPAND Y10, Y3, Y3
	VPOR Y3, Y2, Y2              // the fifth bits
	VPSUBB Y8, Y2, Y2            // signed values
	VMOVDQU (DI), Y4
	VPSIGNB Y2, Y4, Y4
	VPABSB Y2, Y2
	VPMADDUBSW Y4, Y2, Y2
	VPMADDWD Y13, Y2, Y2
	VCVTDQ2PS Y2, Y2
	MOVWLZX 0(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VMULSS 32(DI), X5, X5        // d_w*d_x
	VBROADCASTSS X5, Y5
	VFMADD231PS Y5, Y2, Y14      // lanes = float(lanes)*d + lanes
	ADDQ $22, SI
	ADDQ $36, DI
	DECQ CX
	JNZ legacyRowQ5_0AVX2_loop

legacyRowQ5_0AVX2_done:
	VMOVUPS Y14, (R8)
	VMOVSS X9, 32(R8)
	VZEROUPPER
	RET

// func legacyRowQ4_1AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)
TEXT ·legacyRowQ4_1AVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ s+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x00010001, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS X9, X9, X9
	TESTQ CX, CX
	JEQ legacyRowQ4_1AVX2_done

legacyRowQ4_1AVX2_loop:
	VMOVDQU 4(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VINSERTI128 $1, X3, Y2, Y2   // the nibbles of values 0-31
	VPMADDUBSW (DI), Y2, Y2
	VPMADDWD Y13, Y2, Y2
	VCVTDQ2PS Y2, Y2
	MOVWLZX 0(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VMULSS 32(DI), X5, X5        // d_w*d_x
	VBROADCASTSS X5, Y5
	VFMADD231PS Y5, Y2, Y14      // lanes = float(lanes)*d + lanes
	MOVWLZX 2(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5             // m_w
	VFMADD231SS (R9), X5, X9     // summs = m_w*s_x + summs
	ADDQ $4, R9
	ADDQ $20, SI
	ADDQ $36, DI
	DECQ CX
	JNZ legacyRowQ4_1AVX2_loop

legacyRowQ4_1AVX2_done:
	VMOVUPS Y14, (R8)
	VMOVSS X9, 32(R8)
	VZEROUPPER
	RET

// func legacyRowQ5_1AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)
TEXT ·legacyRowQ5_1AVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ s+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), R8
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x00010001, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VMOVDQU q5Pick<>(SB), Y12
	VMOVDQU q5Bit<>(SB), Y11
	MOVL $0x10101010, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	VXORPS Y14, Y14, Y14
	VXORPS X9, X9, X9
	TESTQ CX, CX
	JEQ legacyRowQ5_1AVX2_done

legacyRowQ5_1AVX2_loop:
	VMOVDQU 8(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VINSERTI128 $1, X3, Y2, Y2   // the nibbles of values 0-31
	VPBROADCASTD 4(SI), Y3
	VPSHUFB Y12, Y3, Y3
	VPAND Y11, Y3, Y3
	VPCMPEQB Y11, Y3, Y3
	VPAND Y10, Y3, Y3
	VPOR Y3, Y2, Y2              // the fifth bits
	VPMADDUBSW (DI), Y2, Y2
	VPMADDWD Y13, Y2, Y2
	VCVTDQ2PS Y2, Y2
	MOVWLZX 0(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5
	VMULSS 32(DI), X5, X5        // d_w*d_x
	VBROADCASTSS X5, Y5
	VFMADD231PS Y5, Y2, Y14      // lanes = float(lanes)*d + lanes
	MOVWLZX 2(SI), AX
	VMOVD AX, X5
	VCVTPH2PS X5, X5             // m_w
	VFMADD231SS (R9), X5, X9     // summs = m_w*s_x + summs
	ADDQ $4, R9
	ADDQ $24, SI
	ADDQ $36, DI
	DECQ CX
	JNZ legacyRowQ5_1AVX2_loop

legacyRowQ5_1AVX2_done:
	VMOVUPS Y14, (R8)
	VMOVSS X9, 32(R8)
	VZEROUPPER
	RET

// Q2PREP(h, row): row h of a Q2_K pair (its block at row): the chunk
// scale vectors (the low nibbles of the 16 scale bytes through the
// q6kShuf masks) at 64c+32h, the 16 mins (the high nibbles) at 512+32h,
// d_w at 576+4h and dmin_w at 584+4h (F32).
#define Q2PREP(h, row) \
	VMOVDQU (row), X8; \
	VPSRLW $4, X8, X9; \
	VPAND X14, X9, X9; \
	VPMOVZXBW X9, Y9; \
	VMOVDQU Y9, (512+32*h)(R14); \
	VPAND X14, X8, X8; \
	VPSHUFB q6kShuf<>+0(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (32*h)(R14); \
	VPSHUFB q6kShuf<>+16(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (64+32*h)(R14); \
	VPSHUFB q6kShuf<>+32(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (128+32*h)(R14); \
	VPSHUFB q6kShuf<>+48(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (192+32*h)(R14); \
	VPSHUFB q6kShuf<>+64(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (256+32*h)(R14); \
	VPSHUFB q6kShuf<>+80(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (320+32*h)(R14); \
	VPSHUFB q6kShuf<>+96(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (384+32*h)(R14); \
	VPSHUFB q6kShuf<>+112(SB), X8, X10; \
	VPMOVZXBW X10, Y10; \
	VMOVDQU Y10, (448+32*h)(R14); \
	MOVWLZX 80(row), AX; \
	VMOVD AX, X9; \
	VCVTPH2PS X9, X9; \
	VMOVSS X9, (576+4*h)(R14); \
	MOVWLZX 82(row), AX; \
	VMOVD AX, X9; \
	VCVTPH2PS X9, X9; \
	VMOVSS X9, (584+4*h)(R14)

// Q2U512(src, v, w): chunk 4j+v of the Q2_K pair: bits 2v of src's bytes.
#define Q2U512(src, v, w) \
	VPSRLW $(2*v), src, w; \
	VPANDD Z30, w, w

// func q2kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)
// Two rows of nb Q2_K blocks (w, w+rb) against n >= 1 vectors' Q8_K
// blocks, in the arithmetic of ggml_vec_dot_q2_K_q8_K (AVX2) for each
// (row, vector), the two rows in one zmm register: per block lanes =
// fma(-(d_x*dmin_w), float(mins . bsums by pairs), lanes), then lanes =
// fma(d_x*d_w, float(the scaled value lanes), lanes), into
// acc[16v+8h:16v+8h+8] for row h. scratch: 592 bytes.
TEXT ·q2kTileAVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ rb+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nb+32(FP), CX
	MOVQ scratch+48(FP), R14
	MOVL $0x03030303, AX
	VPBROADCASTD AX, Z30
	TESTQ CX, CX
	JEQ q2kzdone

q2kzblock:
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, X14        // the nibble mask (Z14 is a sum below)
	LEAQ (SI)(BX*1), R8
	Q2PREP(0, SI)
	Q2PREP(1, R8)
	VBROADCASTSS 576(R14), Y13
	VBROADCASTSS 580(R14), Y12
	VINSERTF64X4 $1, Y12, Z13, Z13   // d_w of both rows
	VBROADCASTSS 584(R14), Y12
	VBROADCASTSS 588(R14), Y11
	VINSERTF64X4 $1, Y11, Z12, Z12   // dmin_w of both rows
	VMOVDQU64 16(SI), Y8
	VINSERTI64X4 $1, 16(SI)(BX*1), Z8, Z8
	VMOVDQU64 48(SI), Y9
	VINSERTI64X4 $1, 48(SI)(BX*1), Z9, Z9
	Q2U512(Z8, 0, Z0)
	Q2U512(Z8, 1, Z1)
	Q2U512(Z8, 2, Z2)
	Q2U512(Z8, 3, Z3)
	Q2U512(Z9, 0, Z4)
	Q2U512(Z9, 1, Z5)
	Q2U512(Z9, 2, Z6)
	Q2U512(Z9, 3, Z7)
	MOVQ DI, DX
	MOVQ acc+56(FP), AX
	MOVQ n+40(FP), R10

q2kzvec:
	VMOVUPS (AX), Z18                // the lanes
	VBROADCASTSS 288(DX), Z19        // d_x
	VBROADCASTI64X4 256(DX), Z16     // bsums
	VPMADDWD 512(R14), Z16, Z17      // mins * bsums, by pairs
	VCVTDQ2PS Z17, Z17
	VMULPS Z12, Z19, Z20             // d_x*dmin_w
	VFNMADD231PS Z20, Z17, Z18       // lanes = -(d_x*dmin_w)*float(.) + lanes
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	CH6(0, Z0, Z14)
	CH6(1, Z1, Z15)
	CH6(2, Z2, Z14)
	CH6(3, Z3, Z15)
	CH6(4, Z4, Z14)
	CH6(5, Z5, Z15)
	CH6(6, Z6, Z14)
	CH6(7, Z7, Z15)
	VPADDD Z15, Z14, Z14
	VCVTDQ2PS Z14, Z14
	VMULPS Z13, Z19, Z20             // d_x*d_w
	VFMADD231PS Z20, Z14, Z18        // lanes = float(lanes)*d + lanes
	VMOVUPS Z18, (AX)
	ADDQ $64, AX
	ADDQ astride+24(FP), DX
	DECQ R10
	JNZ q2kzvec

	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q2kzblock

q2kzdone:
	VZEROUPPER
	RET
