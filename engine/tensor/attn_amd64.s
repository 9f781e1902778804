#include "textflag.h"

// AVX2 + FMA + F16C kernels of the attention paths (attn_kernels.go has their
// plain-Go twins and says what each computes). Every lane performs exactly
// the operations of its twin, in the same order: the kernels only run
// eight (or more) independent lanes at once.

#define K32(name, bits) DATA name<>+0(SB)/4, $bits; GLOBL name<>(SB), RODATA|NOPTR, $4

// ggml_v_expf's constants, which vec512_amd64.s's AVX-512 form reads too:
// package symbols (·name), not private to the file as K32's are. (The
// assembler's macros cannot paste a name after the middle dot.)

DATA ·attnRound+0(SB)/4, $0x4b400000   // 0x1.8p23
GLOBL ·attnRound(SB), RODATA|NOPTR, $4
DATA ·attnLog2e+0(SB)/4, $0x3fb8aa3b   // 0x1.715476p+0
GLOBL ·attnLog2e(SB), RODATA|NOPTR, $4
DATA ·attnLn2hi+0(SB)/4, $0x3f317200   // 0x1.62e4p-1
GLOBL ·attnLn2hi(SB), RODATA|NOPTR, $4
DATA ·attnLn2lo+0(SB)/4, $0x35bfbe8e   // 0x1.7f7d1cp-20
GLOBL ·attnLn2lo(SB), RODATA|NOPTR, $4
DATA ·attnOne+0(SB)/4, $0x3f800000     // 1
GLOBL ·attnOne(SB), RODATA|NOPTR, $4
DATA ·attnP1+0(SB)/4, $0x3c072010      // 0x1.0e4020p-7
GLOBL ·attnP1(SB), RODATA|NOPTR, $4
DATA ·attnP2+0(SB)/4, $0x3d2b9f17      // 0x1.573e2ep-5
GLOBL ·attnP2(SB), RODATA|NOPTR, $4
DATA ·attnP3+0(SB)/4, $0x3e2aaf33      // 0x1.555e66p-3
GLOBL ·attnP3(SB), RODATA|NOPTR, $4
DATA ·attnP4+0(SB)/4, $0x3efffedb      // 0x1.fffdb6p-2
GLOBL ·attnP4(SB), RODATA|NOPTR, $4
DATA ·attnP5+0(SB)/4, $0x3f7ffff6      // 0x1.ffffecp-1
GLOBL ·attnP5(SB), RODATA|NOPTR, $4
DATA ·attnAbs+0(SB)/4, $0x7fffffff
GLOBL ·attnAbs(SB), RODATA|NOPTR, $4
DATA ·attn126+0(SB)/4, $0x42fc0000
GLOBL ·attn126(SB), RODATA|NOPTR, $4
DATA ·attn192+0(SB)/4, $0x43400000
GLOBL ·attn192(SB), RODATA|NOPTR, $4
DATA ·attnG+0(SB)/4, $0x82000000
GLOBL ·attnG(SB), RODATA|NOPTR, $4
DATA ·attn7F+0(SB)/4, $0x7f000000
GLOBL ·attn7F(SB), RODATA|NOPTR, $4

// VEXPF sets Y0 = ggml_v_expf(Y0), instruction for instruction, with
// Y11 = bits(1.0), Y12 = ln2lo, Y13 = ln2hi, Y14 = log2e, Y15 = 0x1.8p23
// (EXPCONSTS). ggml returns k*j+k early when no lane has |n| > 126; the
// blends below pick that same value in every such lane, so always taking
// them changes nothing. Clobbers Y1-Y9.
#define EXPCONSTS \
	VBROADCASTSS ·attnOne(SB), Y11; \
	VBROADCASTSS ·attnLn2lo(SB), Y12; \
	VBROADCASTSS ·attnLn2hi(SB), Y13; \
	VBROADCASTSS ·attnLog2e(SB), Y14; \
	VBROADCASTSS ·attnRound(SB), Y15

#define VEXPF \
	VMOVAPS Y15, Y1; \
	VFMADD231PS Y14, Y0, Y1; \
	VSUBPS Y15, Y1, Y2; \
	VMOVAPS Y0, Y3; \
	VFNMADD231PS Y13, Y2, Y3; \
	VFNMADD231PS Y12, Y2, Y3; \
	VPSLLD $23, Y1, Y4; \
	VPADDD Y11, Y4, Y5; \
	VMULPS Y3, Y3, Y6; \
	VBROADCASTSS ·attnP2(SB), Y7; \
	VBROADCASTSS ·attnP1(SB), Y0; \
	VFMADD231PS Y0, Y3, Y7; \
	VBROADCASTSS ·attnP4(SB), Y8; \
	VBROADCASTSS ·attnP3(SB), Y0; \
	VFMADD231PS Y0, Y3, Y8; \
	VFMADD231PS Y6, Y7, Y8; \
	VBROADCASTSS ·attnP5(SB), Y9; \
	VMULPS Y3, Y9, Y9; \
	VFMADD231PS Y6, Y8, Y9; \
	VBROADCASTSS ·attnAbs(SB), Y1; \
	VANDPS Y1, Y2, Y7; \
	VBROADCASTSS ·attn126(SB), Y1; \
	VCMPPS $0x1e, Y1, Y7, Y1; \
	VMOVAPS Y5, Y0; \
	VFMADD231PS Y9, Y5, Y0; \
	VXORPS Y8, Y8, Y8; \
	VCMPPS $0x12, Y8, Y2, Y8; \
	VBROADCASTSS ·attnG(SB), Y3; \
	VANDPS Y3, Y8, Y8; \
	VBROADCASTSS ·attn7F(SB), Y3; \
	VPADDD Y3, Y8, Y3; \
	VPSUBD Y8, Y4, Y4; \
	VBROADCASTSS ·attn192(SB), Y6; \
	VCMPPS $0x1e, Y6, Y7, Y6; \
	VMOVAPS Y4, Y8; \
	VFMADD231PS Y9, Y4, Y8; \
	VMULPS Y3, Y8, Y8; \
	VMULPS Y3, Y3, Y3; \
	VBLENDVPS Y1, Y8, Y0, Y0; \
	VBLENDVPS Y6, Y3, Y0, Y0

// In VEXPF: x in Y0; z = x*log2e + r (Y1); n = z - r (Y2); b = x - n*ln2hi
// - n*ln2lo (Y3, two fused steps); e = z << 23 (Y4); k = e + bits(1) (Y5);
// u = b*b (Y6); j = ((P1*b+P2)*u + (P3*b+P4))*u + P5*b (Y9); c = |n| > 126
// (Y1); k*j+k (Y0); g = (n <= 0) & 0x82000000 (Y8); s1 = g + 0x7f000000
// (Y3); s2 = e - g (Y4); d = |n| > 192 (Y6); (s2*j+s2)*s1 where c, s1*s1
// where d.

// func attnExpShiftBlocks(dst, src *float32, nblk int, m float32)
// dst[i] = ggml_v_expf(src[i] - m) for nblk blocks of eight.
TEXT ·attnExpShiftBlocks(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nblk+16(FP), CX
	VBROADCASTSS m+24(FP), Y10
	EXPCONSTS
	TESTQ CX, CX
	JZ expdone

exploop:
	VMOVUPS (SI), Y0
	VSUBPS Y10, Y0, Y0
	VEXPF
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ exploop

expdone:
	VZEROUPPER
	RET

// func siluBlocks(x *float32, nblk int)
// x = x / (1 + ggml_v_expf(0 - x)) for nblk blocks of eight: ggml_v_silu.
// (0 - x and -x differ only for x = +0, whose exponential is 1 either way.)
TEXT ·siluBlocks(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ nblk+8(FP), CX
	EXPCONSTS
	TESTQ CX, CX
	JZ siludone

siluloop:
	VMOVUPS (DI), Y10
	VXORPS Y0, Y0, Y0
	VSUBPS Y10, Y0, Y0
	VEXPF
	VADDPS Y11, Y0, Y0
	VDIVPS Y0, Y10, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ siluloop

siludone:
	VZEROUPPER
	RET

// func attnScores64(s *[64]float32, kt, q *float32, hd int, scale float32)
// s[l] = (fma chain over d of q[d]*kt[d*64+l], from +0, d increasing) * scale.
TEXT ·attnScores64(SB), NOSPLIT, $0-36
	MOVQ s+0(FP), DX
	MOVQ kt+8(FP), DI
	MOVQ q+16(FP), SI
	MOVQ hd+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JZ scdone

scloop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y8, Y1
	VFMADD231PS 64(DI), Y8, Y2
	VFMADD231PS 96(DI), Y8, Y3
	VFMADD231PS 128(DI), Y8, Y4
	VFMADD231PS 160(DI), Y8, Y5
	VFMADD231PS 192(DI), Y8, Y6
	VFMADD231PS 224(DI), Y8, Y7
	ADDQ $4, SI
	ADDQ $256, DI
	DECQ CX
	JNZ scloop

scdone:
	VBROADCASTSS scale+32(FP), Y8
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	VMULPS Y8, Y2, Y2
	VMULPS Y8, Y3, Y3
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VMULPS Y8, Y6, Y6
	VMULPS Y8, Y7, Y7
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET


// REDUCE32 sums the four accumulators Y0..Y3 into X0 as ggml's
// GGML_F32x8_REDUCE does: (Y0+Y2) + (Y1+Y3), the high half added to the
// low one, then two horizontal adds. Clobbers Y1, Y2.
#define REDUCE32 \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y3, Y1, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; \
	VHADDPS X0, X0, X0

// func deltaStepRows(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32)
// One token of the gated delta rule for one head, row by row (dk rows of
// dk, dk a multiple of 32): S_j *= eg with delta_j = (v_j - S_j·k)*beta,
// then S_j += k*delta_j with o_j = (S_j·q)*scale; the dot products in
// ggml_vec_dot_f32's order (four 8-lane FMA accumulators over blocks of
// 32, REDUCE32).
TEXT ·deltaStepRows(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ q+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ dk+32(FP), BX
	VBROADCASTSS eg+40(FP), Y12
	VMOVSS beta+44(FP), X13
	VMOVSS scale+48(FP), X14
	MOVQ o+56(FP), R10
	MOVQ BX, DX
	SHRQ $5, DX        // blocks of 32 per row
	MOVQ BX, R15
	SHLQ $2, R15       // row bytes
	TESTQ DX, DX
	JZ dsdone

dsrow:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, R11
	MOVQ SI, R12
	MOVQ DX, R13

dsa:
	VMULPS 0(R11), Y12, Y4
	VMULPS 32(R11), Y12, Y5
	VMULPS 64(R11), Y12, Y6
	VMULPS 96(R11), Y12, Y7
	VMOVUPS Y4, 0(R11)
	VMOVUPS Y5, 32(R11)
	VMOVUPS Y6, 64(R11)
	VMOVUPS Y7, 96(R11)
	VFMADD231PS 0(R12), Y4, Y0
	VFMADD231PS 32(R12), Y5, Y1
	VFMADD231PS 64(R12), Y6, Y2
	VFMADD231PS 96(R12), Y7, Y3
	ADDQ $128, R11
	ADDQ $128, R12
	DECQ R13
	JNZ dsa
	REDUCE32
	VMOVSS (R9), X5
	VSUBSS X0, X5, X5
	VMULSS X13, X5, X5
	VBROADCASTSS X5, Y8

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, R11
	MOVQ SI, R12
	MOVQ R8, R14
	MOVQ DX, R13

dsb:
	VMOVUPS 0(R11), Y4
	VMOVUPS 32(R11), Y5
	VMOVUPS 64(R11), Y6
	VMOVUPS 96(R11), Y7
	VFMADD231PS 0(R12), Y8, Y4
	VFMADD231PS 32(R12), Y8, Y5
	VFMADD231PS 64(R12), Y8, Y6
	VFMADD231PS 96(R12), Y8, Y7
	VMOVUPS Y4, 0(R11)
	VMOVUPS Y5, 32(R11)
	VMOVUPS Y6, 64(R11)
	VMOVUPS Y7, 96(R11)
	VFMADD231PS 0(R14), Y4, Y0
	VFMADD231PS 32(R14), Y5, Y1
	VFMADD231PS 64(R14), Y6, Y2
	VFMADD231PS 96(R14), Y7, Y3
	ADDQ $128, R11
	ADDQ $128, R12
	ADDQ $128, R14
	DECQ R13
	JNZ dsb
	REDUCE32
	VMULSS X14, X0, X0
	VMOVSS X0, (R10)

	ADDQ R15, DI
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ BX
	JNZ dsrow

dsdone:
	VZEROUPPER
	RET

// func attnDotF16Rows(dst *float32, k *uint16, stride int, q *float32, nblk, rows int)
// dst[r] = the 32-lane part of ggml_vec_dot_f16 of F16 row r of k (stride
// bytes apart; nblk blocks of 32) with q (F16 values widened): four 8-lane
// accumulators, REDUCE32. The products of two F16 values are exact, so
// the FMA adds the same rounded sum as a multiply then add.
TEXT ·attnDotF16Rows(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R10
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), BX
	MOVQ q+24(FP), SI
	MOVQ nblk+32(FP), DX
	MOVQ rows+40(FP), CX
	TESTQ CX, CX
	JZ dfdone

dfrow:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, R11
	MOVQ SI, R12
	MOVQ DX, R13
	TESTQ R13, R13
	JZ dfred

dfblk:
	VCVTPH2PS 0(R11), Y4
	VCVTPH2PS 16(R11), Y5
	VCVTPH2PS 32(R11), Y6
	VCVTPH2PS 48(R11), Y7
	VFMADD231PS 0(R12), Y4, Y0
	VFMADD231PS 32(R12), Y5, Y1
	VFMADD231PS 64(R12), Y6, Y2
	VFMADD231PS 96(R12), Y7, Y3
	ADDQ $64, R11
	ADDQ $128, R12
	DECQ R13
	JNZ dfblk

dfred:
	REDUCE32
	VMOVSS X0, (R10)
	ADDQ $4, R10
	ADDQ BX, DI
	DECQ CX
	JNZ dfrow

dfdone:
	VZEROUPPER
	RET

// ROUND16(Y) rounds Y to F16 and back (round to nearest even), as an F16
// store and load, through X (the low half of Y).
#define ROUND16(Y, X) \
	VCVTPS2PH $0, Y, X; \
	VCVTPH2PS X, Y

// func attnAccF16(acc *float32, v *uint16, stride int, ms, vs *float32, rows, nblk int)
// For each block of eight dims of acc (nblk of them), for r = 0..rows-1 in
// order: if ms[r] != 1, acc = f16(acc*ms[r]) (ggml_vec_scale_f16); then
// acc = f16(fma(F16 row r of v, vs[r], acc)) (ggml_vec_mad_f16). Rows are
// stride bytes apart; four blocks go together while four are left.
TEXT ·attnAccF16(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ ms+24(FP), DX
	MOVQ vs+32(FP), R8
	MOVQ rows+40(FP), CX
	MOVQ nblk+48(FP), R9
	VBROADCASTSS ·attnOne(SB), X15
	TESTQ CX, CX
	JZ accdone

accquad:
	CMPQ R9, $4
	JLT accone
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ SI, R11
	MOVQ DX, R12
	MOVQ R8, R13
	MOVQ CX, R14

accquadloop:
	VMOVSS (R12), X8
	VUCOMISS X15, X8
	JNE accquadscale
	JPS accquadscale
	JMP accquadmad

accquadscale:
	VBROADCASTSS X8, Y8
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	VMULPS Y8, Y2, Y2
	VMULPS Y8, Y3, Y3
	ROUND16(Y0, X0)
	ROUND16(Y1, X1)
	ROUND16(Y2, X2)
	ROUND16(Y3, X3)

accquadmad:
	VBROADCASTSS (R13), Y9
	VCVTPH2PS 0(R11), Y4
	VCVTPH2PS 16(R11), Y5
	VCVTPH2PS 32(R11), Y6
	VCVTPH2PS 48(R11), Y7
	VFMADD231PS Y9, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y9, Y6, Y2
	VFMADD231PS Y9, Y7, Y3
	ROUND16(Y0, X0)
	ROUND16(Y1, X1)
	ROUND16(Y2, X2)
	ROUND16(Y3, X3)
	ADDQ BX, R11
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ R14
	JNZ accquadloop
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $64, SI
	SUBQ $4, R9
	JMP accquad

accone:
	TESTQ R9, R9
	JZ accdone
	VMOVUPS 0(DI), Y0
	MOVQ SI, R11
	MOVQ DX, R12
	MOVQ R8, R13
	MOVQ CX, R14

acconeloop:
	VMOVSS (R12), X8
	VUCOMISS X15, X8
	JNE acconescale
	JPS acconescale
	JMP acconemad

acconescale:
	VBROADCASTSS X8, Y8
	VMULPS Y8, Y0, Y0
	ROUND16(Y0, X0)

acconemad:
	VBROADCASTSS (R13), Y9
	VCVTPH2PS 0(R11), Y4
	VFMADD231PS Y9, Y4, Y0
	ROUND16(Y0, X0)
	ADDQ BX, R11
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ R14
	JNZ acconeloop
	VMOVUPS Y0, 0(DI)
	ADDQ $32, DI
	ADDQ $16, SI
	DECQ R9
	JMP accone

accdone:
	VZEROUPPER
	RET

// func attnKT8(kt *float32, k *uint16, stride, groups, hd8 int)
// Widens and transposes groups of eight F16 key rows (stride bytes apart)
// into kt (rows of 64 floats, one per dimension): kt[d*64+r] = k row r,
// dim d, eight rows by eight dims at a time through an 8x8 register
// transpose. Exact: it only moves widened values.
TEXT ·attnKT8(SB), NOSPLIT, $0-40
	MOVQ kt+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ groups+24(FP), CX
	MOVQ hd8+32(FP), DX
	TESTQ CX, CX
	JZ ktdone
	TESTQ DX, DX
	JZ ktdone
	LEAQ (BX)(BX*2), R12   // 3*stride

ktgroup:
	MOVQ SI, R8            // row 0 of the group, current dims
	MOVQ DI, R9            // kt column of the group, current dims
	MOVQ DX, R10

ktblock:
	LEAQ (R8)(BX*4), R11   // row 4
	VCVTPH2PS (R8), Y0
	VCVTPH2PS (R8)(BX*1), Y1
	VCVTPH2PS (R8)(BX*2), Y2
	VCVTPH2PS (R8)(R12*1), Y3
	VCVTPH2PS (R11), Y4
	VCVTPH2PS (R11)(BX*1), Y5
	VCVTPH2PS (R11)(BX*2), Y6
	VCVTPH2PS (R11)(R12*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xee, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xee, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xee, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xee, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, 0(R9)
	VMOVUPS Y9, 256(R9)
	VMOVUPS Y10, 512(R9)
	VMOVUPS Y11, 768(R9)
	VMOVUPS Y12, 1024(R9)
	VMOVUPS Y13, 1280(R9)
	VMOVUPS Y14, 1536(R9)
	VMOVUPS Y15, 1792(R9)
	ADDQ $16, R8
	ADDQ $2048, R9
	DECQ R10
	JNZ ktblock
	LEAQ (SI)(BX*8), SI
	ADDQ $32, DI
	DECQ CX
	JNZ ktgroup

ktdone:
	VZEROUPPER
	RET

DATA attnIota<>+0(SB)/8, $0x0000000100000000
DATA attnIota<>+8(SB)/8, $0x0000000300000002
DATA attnIota<>+16(SB)/8, $0x0000000500000004
DATA attnIota<>+24(SB)/8, $0x0000000700000006
GLOBL attnIota<>(SB), RODATA|NOPTR, $32

// func attnExpSum(p, s *float32, m int, mx float32) float64
// p[i] = ggml_v_expf(s[i] - mx) for i < m (m in 1..64), zero for the
// other lanes of the last block of eight; returns the sum in float64,
// block by block in order, of each block's float32 hsum (high half onto
// low half, then (l0+l2)+(l1+l3)): ggml_vec_soft_max_f32's sum.
TEXT ·attnExpSum(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ m+16(FP), CX
	VBROADCASTSS mx+24(FP), Y10
	EXPCONSTS
	MOVQ $0, ret+32(FP)    // the float64 sum, +0
	TESTQ CX, CX
	JLE esdone

esloop:
	VMOVUPS (SI), Y0
	VSUBPS Y10, Y0, Y0
	VEXPF
	CMPQ CX, $8
	JGE esfull
	MOVQ CX, X1
	VPBROADCASTD X1, Y1
	VMOVDQU attnIota<>(SB), Y2
	VPCMPGTD Y2, Y1, Y1    // lane < m
	VANDPS Y1, Y0, Y0

esfull:
	VMOVUPS Y0, (DI)
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0      // a0..a3 = l[i] + l[i+4]
	VMOVHLPS X0, X0, X1    // a2, a3
	VADDPS X1, X0, X0      // a0+a2, a1+a3
	VMOVSHDUP X0, X1       // a1+a3
	VADDSS X1, X0, X0      // (a0+a2) + (a1+a3)
	VCVTSS2SD X0, X0, X0
	VADDSD ret+32(FP), X0, X0
	VMOVSD X0, ret+32(FP)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JG esloop

esdone:
	VZEROUPPER
	RET

// func attnDotF32Rows(dst *float32, k *float32, stride int, q *float32, nblk, rows int)
// dst[r] = the 32-lane part of ggml_vec_dot_f32 of row r of k (stride
// bytes apart; nblk blocks of 32) with q: four 8-lane FMA accumulators,
// REDUCE32.
TEXT ·attnDotF32Rows(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R10
	MOVQ k+8(FP), DI
	MOVQ stride+16(FP), BX
	MOVQ q+24(FP), SI
	MOVQ nblk+32(FP), DX
	MOVQ rows+40(FP), CX
	TESTQ CX, CX
	JZ d32done

d32row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, R11
	MOVQ SI, R12
	MOVQ DX, R13
	TESTQ R13, R13
	JZ d32red

d32blk:
	VMOVUPS 0(R11), Y4
	VMOVUPS 32(R11), Y5
	VMOVUPS 64(R11), Y6
	VMOVUPS 96(R11), Y7
	VFMADD231PS 0(R12), Y4, Y0
	VFMADD231PS 32(R12), Y5, Y1
	VFMADD231PS 64(R12), Y6, Y2
	VFMADD231PS 96(R12), Y7, Y3
	ADDQ $128, R11
	ADDQ $128, R12
	DECQ R13
	JNZ d32blk

d32red:
	REDUCE32
	VMOVSS X0, (R10)
	ADDQ $4, R10
	ADDQ BX, DI
	DECQ CX
	JNZ d32row

d32done:
	VZEROUPPER
	RET

// func attnMadF32(y, x *float32, nblk int, a float32)
// y = fma(x, a, y) for nblk blocks of eight (ggml_vec_mad_f32's SIMD part).
TEXT ·attnMadF32(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ nblk+16(FP), CX
	VBROADCASTSS a+24(FP), Y8
	TESTQ CX, CX
	JZ m32done

m32loop:
	VMOVUPS (DI), Y0
	VFMADD231PS (SI), Y8, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ m32loop

m32done:
	VZEROUPPER
	RET

// func attnWidenF16(dst *float32, src *uint16, stride, rows, nblk int)
// dst row r (nblk*8 values, rows packed) = F16 row r of src (stride bytes
// apart), widened.
TEXT ·attnWidenF16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ rows+24(FP), CX
	MOVQ nblk+32(FP), DX
	TESTQ CX, CX
	JZ wddone
	TESTQ DX, DX
	JZ wddone

wdrow:
	MOVQ SI, R8
	MOVQ DX, R9

wdblk:
	VCVTPH2PS (R8), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, R8
	ADDQ $32, DI
	DECQ R9
	JNZ wdblk
	ADDQ BX, SI
	DECQ CX
	JNZ wdrow

wddone:
	VZEROUPPER
	RET

// func attnMadRows(o *float32, v *float32, stride int, p *float32, m, nblk int)
// For each block of eight dims of o (nblk of them), for j = 0..m-1 in
// order: o = fma(p[j], row j of v (stride bytes apart), o). Eight blocks go
// together while eight are left (eight independent chains keep both FMA
// units busy), then one at a time.
TEXT ·attnMadRows(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ p+24(FP), DX
	MOVQ m+32(FP), CX
	MOVQ nblk+40(FP), R9
	TESTQ CX, CX
	JZ mrdone

mroct:
	CMPQ R9, $8
	JLT mrone
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ SI, R8
	MOVQ DX, R10
	MOVQ CX, R11

mroctloop:
	VBROADCASTSS (R10), Y8
	VFMADD231PS 0(R8), Y8, Y0
	VFMADD231PS 32(R8), Y8, Y1
	VFMADD231PS 64(R8), Y8, Y2
	VFMADD231PS 96(R8), Y8, Y3
	VFMADD231PS 128(R8), Y8, Y4
	VFMADD231PS 160(R8), Y8, Y5
	VFMADD231PS 192(R8), Y8, Y6
	VFMADD231PS 224(R8), Y8, Y7
	ADDQ BX, R8
	ADDQ $4, R10
	DECQ R11
	JNZ mroctloop
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, DI
	ADDQ $256, SI
	SUBQ $8, R9
	JMP mroct

mrone:
	TESTQ R9, R9
	JZ mrdone
	VMOVUPS 0(DI), Y0
	MOVQ SI, R8
	MOVQ DX, R10
	MOVQ CX, R11

mroneloop:
	VBROADCASTSS (R10), Y8
	VFMADD231PS 0(R8), Y8, Y0
	ADDQ BX, R8
	ADDQ $4, R10
	DECQ R11
	JNZ mroneloop
	VMOVUPS Y0, 0(DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ R9
	JMP mrone

mrdone:
	VZEROUPPER
	RET

// func attnScores64x2(s0, s1 *[64]float32, kt, q0, q1 *float32, hd int, scale float32)
// attnScores64 for two queries at once, 32 keys per pass: each key vector
// loaded serves both queries, which halves the traffic over kt.
TEXT ·attnScores64x2(SB), NOSPLIT, $0-52
	MOVQ s0+0(FP), DX
	MOVQ s1+8(FP), R8
	MOVQ kt+16(FP), DI
	MOVQ q0+24(FP), SI
	MOVQ q1+32(FP), R9
	MOVQ hd+40(FP), BX
	VBROADCASTSS scale+48(FP), Y14
	MOVQ $2, R12           // two passes of 32 keys

sx2pass:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DI, R10
	MOVQ SI, R11
	MOVQ R9, R13
	MOVQ BX, CX
	TESTQ CX, CX
	JZ sx2store

sx2loop:
	VBROADCASTSS (R11), Y8
	VBROADCASTSS (R13), Y9
	VMOVUPS 0(R10), Y10
	VMOVUPS 32(R10), Y11
	VMOVUPS 64(R10), Y12
	VMOVUPS 96(R10), Y13
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y9, Y5
	VFMADD231PS Y12, Y9, Y6
	VFMADD231PS Y13, Y9, Y7
	ADDQ $4, R11
	ADDQ $4, R13
	ADDQ $256, R10
	DECQ CX
	JNZ sx2loop

sx2store:
	VMULPS Y14, Y0, Y0
	VMULPS Y14, Y1, Y1
	VMULPS Y14, Y2, Y2
	VMULPS Y14, Y3, Y3
	VMULPS Y14, Y4, Y4
	VMULPS Y14, Y5, Y5
	VMULPS Y14, Y6, Y6
	VMULPS Y14, Y7, Y7
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 0(R8)
	VMOVUPS Y5, 32(R8)
	VMOVUPS Y6, 64(R8)
	VMOVUPS Y7, 96(R8)
	ADDQ $128, DX
	ADDQ $128, R8
	ADDQ $128, DI
	DECQ R12
	JNZ sx2pass
	VZEROUPPER
	RET

// func attnMadRowsx2(o0, o1, v *float32, stride int, p0, p1 *float32, m, nblk int)
// attnMadRows for two outputs with their own weights over the same rows,
// 32 dims per pass while four blocks are left, then 8.
TEXT ·attnMadRowsx2(SB), NOSPLIT, $0-64
	MOVQ o0+0(FP), DI
	MOVQ o1+8(FP), R14
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), BX
	MOVQ p0+32(FP), DX
	MOVQ p1+40(FP), R15
	MOVQ m+48(FP), CX
	MOVQ nblk+56(FP), R9
	TESTQ CX, CX
	JZ mx2done

mx2quad:
	CMPQ R9, $4
	JLT mx2one
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 0(R14), Y4
	VMOVUPS 32(R14), Y5
	VMOVUPS 64(R14), Y6
	VMOVUPS 96(R14), Y7
	MOVQ SI, R8
	MOVQ DX, R10
	MOVQ R15, R12
	MOVQ CX, R11

mx2quadloop:
	VBROADCASTSS (R10), Y8
	VBROADCASTSS (R12), Y9
	VMOVUPS 0(R8), Y10
	VMOVUPS 32(R8), Y11
	VMOVUPS 64(R8), Y12
	VMOVUPS 96(R8), Y13
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y9, Y5
	VFMADD231PS Y12, Y9, Y6
	VFMADD231PS Y13, Y9, Y7
	ADDQ BX, R8
	ADDQ $4, R10
	ADDQ $4, R12
	DECQ R11
	JNZ mx2quadloop
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 0(R14)
	VMOVUPS Y5, 32(R14)
	VMOVUPS Y6, 64(R14)
	VMOVUPS Y7, 96(R14)
	ADDQ $128, DI
	ADDQ $128, R14
	ADDQ $128, SI
	SUBQ $4, R9
	JMP mx2quad

mx2one:
	TESTQ R9, R9
	JZ mx2done
	VMOVUPS 0(DI), Y0
	VMOVUPS 0(R14), Y4
	MOVQ SI, R8
	MOVQ DX, R10
	MOVQ R15, R12
	MOVQ CX, R11

mx2oneloop:
	VBROADCASTSS (R10), Y8
	VBROADCASTSS (R12), Y9
	VMOVUPS 0(R8), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	ADDQ BX, R8
	ADDQ $4, R10
	ADDQ $4, R12
	DECQ R11
	JNZ mx2oneloop
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y4, 0(R14)
	ADDQ $32, DI
	ADDQ $32, R14
	ADDQ $32, SI
	DECQ R9
	JMP mx2one

mx2done:
	VZEROUPPER
	RET

// func convTapsBlocks(out, win, mix, taps *float32, c, k, unfused, nblk int)
// The causal depthwise convolution of one token for nblk blocks of eight
// channels (the first 8*nblk of c): out[ch] = sum over taps j < k of
// u_j[ch]*taps[j*c+ch], u_j = win[j*c+ch] for j < k-1 and mix[ch] for the
// last, summed from +0 in order, taps j < unfused as a rounded product then
// a rounded add, the others fused.
TEXT ·convTapsBlocks(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ win+8(FP), SI
	MOVQ mix+16(FP), R8
	MOVQ taps+24(FP), R9
	MOVQ c+32(FP), BX
	SHLQ $2, BX            // row bytes
	MOVQ k+40(FP), R12
	MOVQ unfused+48(FP), R13
	MOVQ nblk+56(FP), CX
	TESTQ CX, CX
	JZ cvdone
	TESTQ R12, R12
	JZ cvdone

cvblk:
	VXORPS Y0, Y0, Y0
	MOVQ SI, R10           // window row j
	MOVQ R9, R11           // taps row j
	XORQ DX, DX            // j

cvtap:
	LEAQ 1(DX), AX
	CMPQ AX, R12
	JEQ cvlast
	VMOVUPS (R10), Y1
	JMP cvmul

cvlast:
	VMOVUPS (R8), Y1

cvmul:
	CMPQ DX, R13
	JGE cvfused
	VMULPS (R11), Y1, Y1
	VADDPS Y1, Y0, Y0
	JMP cvnext

cvfused:
	VFMADD231PS (R11), Y1, Y0

cvnext:
	ADDQ BX, R10
	ADDQ BX, R11
	INCQ DX
	CMPQ DX, R12
	JLT cvtap
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ cvblk

cvdone:
	VZEROUPPER
	RET

DATA attnW7F<>+0(SB)/8, $0x007f007f007f007f
DATA attnW7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL attnW7F<>(SB), RODATA|NOPTR, $16
DATA attnW80<>+0(SB)/8, $0x0080008000800080
DATA attnW80<>+8(SB)/8, $0x0080008000800080
GLOBL attnW80<>(SB), RODATA|NOPTR, $16
K32(attnF256, 0x43800000)

// E4W decodes the eight E4M3 codes at addr into Y (X its low half), as
// e4m3_amd64.s's E4M3WIDEN: magnitude << 7 and the sign to bit 15 make an
// F16 of value E4M3 * 2^-8, widened and multiplied by 256 (Y15), exactly;
// the NaN codes become all ones. XT, XU/YU are scratch.
#define E4W(addr, X, Y, XT, XU, YU) \
	VPMOVZXBW addr, X; \
	VPAND attnW80<>(SB), X, XT; \
	VPSLLW $8, XT, XT; \
	VPAND attnW7F<>(SB), X, X; \
	VPCMPEQW attnW7F<>(SB), X, XU; \
	VPSLLW $7, X, X; \
	VPOR XT, X, X; \
	VCVTPH2PS X, Y; \
	VMULPS Y15, Y, Y; \
	VPMOVSXWD XU, YU; \
	VORPS YU, Y, Y

// func attnAccE4M3(acc *float32, v *byte, stride int, ms, vs *float32, rows, nblk int)
// For each block of eight dims of acc (nblk of them), for r = 0..rows-1 in
// order: if ms[r] != 1, acc *= ms[r]; then acc += float32(vs[r] * E4M3(v
// row r)) (rows stride bytes apart); four blocks together while four are
// left.
TEXT ·attnAccE4M3(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ ms+24(FP), DX
	MOVQ vs+32(FP), R8
	MOVQ rows+40(FP), CX
	MOVQ nblk+48(FP), R9
	VBROADCASTSS ·attnOne(SB), X14
	VBROADCASTSS attnF256<>(SB), Y15
	TESTQ CX, CX
	JZ e8done

e8quad:
	CMPQ R9, $4
	JLT e8one
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ SI, R11
	MOVQ DX, R12
	MOVQ R8, R13
	MOVQ CX, R14

e8quadloop:
	VMOVSS (R12), X8
	VUCOMISS X14, X8
	JNE e8quadscale
	JPS e8quadscale
	JMP e8quadmad

e8quadscale:
	VBROADCASTSS X8, Y8
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	VMULPS Y8, Y2, Y2
	VMULPS Y8, Y3, Y3

e8quadmad:
	VBROADCASTSS (R13), Y9
	E4W(0(R11), X4, Y4, X10, X11, Y11)
	E4W(8(R11), X5, Y5, X10, X11, Y11)
	E4W(16(R11), X6, Y6, X10, X11, Y11)
	E4W(24(R11), X7, Y7, X10, X11, Y11)
	VMULPS Y9, Y4, Y4
	VMULPS Y9, Y5, Y5
	VMULPS Y9, Y6, Y6
	VMULPS Y9, Y7, Y7
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	ADDQ BX, R11
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ R14
	JNZ e8quadloop
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $32, SI
	SUBQ $4, R9
	JMP e8quad

e8one:
	TESTQ R9, R9
	JZ e8done
	VMOVUPS 0(DI), Y0
	MOVQ SI, R11
	MOVQ DX, R12
	MOVQ R8, R13
	MOVQ CX, R14

e8oneloop:
	VMOVSS (R12), X8
	VUCOMISS X14, X8
	JNE e8onescale
	JPS e8onescale
	JMP e8onemad

e8onescale:
	VBROADCASTSS X8, Y8
	VMULPS Y8, Y0, Y0

e8onemad:
	VBROADCASTSS (R13), Y9
	E4W(0(R11), X4, Y4, X10, X11, Y11)
	VMULPS Y9, Y4, Y4
	VADDPS Y4, Y0, Y0
	ADDQ BX, R11
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ R14
	JNZ e8oneloop
	VMOVUPS Y0, 0(DI)
	ADDQ $32, DI
	ADDQ $8, SI
	DECQ R9
	JMP e8one

e8done:
	VZEROUPPER
	RET
