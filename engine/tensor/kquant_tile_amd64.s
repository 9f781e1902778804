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
