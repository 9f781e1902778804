#include "textflag.h"

// AVX-512 (F) forms of two attn_amd64.s kernels: SiLU's blocks, sixteen
// lanes where those have eight, and the delta rule's step, two rows at a
// time; each lane performs exactly the operations of the AVX2 kernel (and
// so of the plain-Go twin) in the same order. The constants are
// attn_amd64.s's (EXP32).

// ZEXPCONSTS loads the constants of ZEXPF: Z11 bits(1.0), Z12 ln2lo, Z13
// ln2hi, Z14 log2e, Z15 0x1.8p23, Z16-Z20 P1-P5, Z21 the abs mask, Z22
// 126, Z23 192, Z24 0x82000000, Z25 0x7f000000, Z26 zero.
#define ZEXPCONSTS \
	VBROADCASTSS ·attnOne(SB), Z11; \
	VBROADCASTSS ·attnLn2lo(SB), Z12; \
	VBROADCASTSS ·attnLn2hi(SB), Z13; \
	VBROADCASTSS ·attnLog2e(SB), Z14; \
	VBROADCASTSS ·attnRound(SB), Z15; \
	VBROADCASTSS ·attnP1(SB), Z16; \
	VBROADCASTSS ·attnP2(SB), Z17; \
	VBROADCASTSS ·attnP3(SB), Z18; \
	VBROADCASTSS ·attnP4(SB), Z19; \
	VBROADCASTSS ·attnP5(SB), Z20; \
	VBROADCASTSS ·attnAbs(SB), Z21; \
	VBROADCASTSS ·attn126(SB), Z22; \
	VBROADCASTSS ·attn192(SB), Z23; \
	VBROADCASTSS ·attnG(SB), Z24; \
	VBROADCASTSS ·attn7F(SB), Z25; \
	VPXORD Z26, Z26, Z26

// ZEXPF sets Z0 = ggml_v_expf(Z0) as attn_amd64.s's VEXPF does (the names
// of its comment: z, n, b, e, k, u, j, c, g, s1, s2, d), the blends by
// mask registers: K1 = c, K2 = n <= 0, K3 = d. Clobbers Z1-Z9, K1-K3.
#define ZEXPF \
	VMOVAPS Z15, Z1; \
	VFMADD231PS Z14, Z0, Z1; \
	VSUBPS Z15, Z1, Z2; \
	VMOVAPS Z0, Z3; \
	VFNMADD231PS Z13, Z2, Z3; \
	VFNMADD231PS Z12, Z2, Z3; \
	VPSLLD $23, Z1, Z4; \
	VPADDD Z11, Z4, Z5; \
	VMULPS Z3, Z3, Z6; \
	VMOVAPS Z17, Z7; \
	VFMADD231PS Z16, Z3, Z7; \
	VMOVAPS Z19, Z8; \
	VFMADD231PS Z18, Z3, Z8; \
	VFMADD231PS Z6, Z7, Z8; \
	VMULPS Z3, Z20, Z9; \
	VFMADD231PS Z6, Z8, Z9; \
	VPANDD Z21, Z2, Z7; \
	VCMPPS $0x1e, Z22, Z7, K1; \
	VMOVAPS Z5, Z0; \
	VFMADD231PS Z9, Z5, Z0; \
	VCMPPS $0x12, Z26, Z2, K2; \
	VPXORD Z8, Z8, Z8; \
	VMOVDQA32 Z24, K2, Z8; \
	VPADDD Z25, Z8, Z3; \
	VPSUBD Z8, Z4, Z4; \
	VCMPPS $0x1e, Z23, Z7, K3; \
	VMOVAPS Z4, Z8; \
	VFMADD231PS Z9, Z4, Z8; \
	VMULPS Z3, Z8, Z8; \
	VMULPS Z3, Z3, Z3; \
	VMOVAPS Z8, K1, Z0; \
	VMOVAPS Z3, K3, Z0

// func siluBlocks16(x *float32, nblk int)
// x = x / (1 + ggml_v_expf(0 - x)) for nblk blocks of sixteen.
TEXT ·siluBlocks16(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ nblk+8(FP), CX
	TESTQ CX, CX
	JZ zsiludone
	ZEXPCONSTS

zsiluloop:
	VMOVUPS (DI), Z10
	VSUBPS Z10, Z26, Z0
	ZEXPF
	VADDPS Z11, Z0, Z0
	VDIVPS Z0, Z10, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ zsiluloop

zsiludone:
	VZEROUPPER
	RET

// ZREDUCE32 sums the 32 lanes of za (ggml's accumulators 0 and 1) and zb
// (2 and 3) into the low lane of xa as attn_amd64.s's REDUCE32:
// (acc0+acc2) + (acc1+acc3), the high half added to the low one, two
// horizontal adds. ya/yb and xa/xb name the same registers; zb is
// clobbered.
#define ZREDUCE32(za, zb, ya, yb, xa, xb) \
	VADDPS zb, za, za; \
	VEXTRACTF64X4 $1, za, yb; \
	VADDPS yb, ya, ya; \
	VEXTRACTF128 $1, ya, xb; \
	VADDPS xb, xa, xa; \
	VHADDPS xa, xa, xa; \
	VHADDPS xa, xa, xa

// func deltaStepRows2(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32)
// deltaStepRows two rows at a time (dk a multiple of 32): rows j and j+1
// go through the same steps side by side, so that one's dependency chains
// (its dot products and their sums) overlap the other's. Each row's
// four 8-lane accumulators are two registers, [acc0 | acc1] and
// [acc2 | acc3]: row j in Z0, Z1; row j+1 in Z2, Z3.
TEXT ·deltaStepRows2(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ q+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ dk+32(FP), BX
	VBROADCASTSS eg+40(FP), Z12
	VMOVSS beta+44(FP), X13
	VMOVSS scale+48(FP), X14
	MOVQ o+56(FP), R10
	MOVQ BX, DX
	SHRQ $5, DX        // blocks of 32 per row
	MOVQ BX, R15
	SHLQ $2, R15       // row bytes
	SHRQ $1, BX        // pairs of rows
	TESTQ DX, DX
	JZ zd2done

zd2row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, R11
	LEAQ (DI)(R15*1), CX
	MOVQ SI, R12
	MOVQ DX, R13

zd2a: // S_j *= eg, S_j·k for both rows
	VMULPS 0(R11), Z12, Z4
	VMULPS 64(R11), Z12, Z5
	VMULPS 0(CX), Z12, Z6
	VMULPS 64(CX), Z12, Z7
	VMOVUPS Z4, 0(R11)
	VMOVUPS Z5, 64(R11)
	VMOVUPS Z6, 0(CX)
	VMOVUPS Z7, 64(CX)
	VMOVUPS 0(R12), Z8
	VMOVUPS 64(R12), Z9
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z8, Z6, Z2
	VFMADD231PS Z9, Z7, Z3
	ADDQ $128, R11
	ADDQ $128, CX
	ADDQ $128, R12
	DECQ R13
	JNZ zd2a
	ZREDUCE32(Z0, Z1, Y0, Y1, X0, X1)
	ZREDUCE32(Z2, Z3, Y2, Y3, X2, X3)
	VMOVSS (R9), X5
	VSUBSS X0, X5, X5
	VMULSS X13, X5, X5
	VBROADCASTSS X5, Z10
	VMOVSS 4(R9), X6
	VSUBSS X2, X6, X6
	VMULSS X13, X6, X6
	VBROADCASTSS X6, Z11

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, R11
	LEAQ (DI)(R15*1), CX
	MOVQ SI, R12
	MOVQ R8, R14
	MOVQ DX, R13

zd2b: // S_j += k*delta_j, S_j·q for both rows
	VMOVUPS 0(R11), Z4
	VMOVUPS 64(R11), Z5
	VMOVUPS 0(CX), Z6
	VMOVUPS 64(CX), Z7
	VMOVUPS 0(R12), Z8
	VMOVUPS 64(R12), Z9
	VFMADD231PS Z8, Z10, Z4
	VFMADD231PS Z9, Z10, Z5
	VFMADD231PS Z8, Z11, Z6
	VFMADD231PS Z9, Z11, Z7
	VMOVUPS Z4, 0(R11)
	VMOVUPS Z5, 64(R11)
	VMOVUPS Z6, 0(CX)
	VMOVUPS Z7, 64(CX)
	VMOVUPS 0(R14), Z8
	VMOVUPS 64(R14), Z9
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z8, Z6, Z2
	VFMADD231PS Z9, Z7, Z3
	ADDQ $128, R11
	ADDQ $128, CX
	ADDQ $128, R12
	ADDQ $128, R14
	DECQ R13
	JNZ zd2b
	ZREDUCE32(Z0, Z1, Y0, Y1, X0, X1)
	ZREDUCE32(Z2, Z3, Y2, Y3, X2, X3)
	VMULSS X14, X0, X0
	VMOVSS X0, (R10)
	VMULSS X14, X2, X2
	VMOVSS X2, 4(R10)

	LEAQ (DI)(R15*2), DI
	ADDQ $8, R9
	ADDQ $8, R10
	DECQ BX
	JNZ zd2row

zd2done:
	VZEROUPPER
	RET
