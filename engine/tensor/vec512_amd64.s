#include "textflag.h"

// The AVX-512 (F) form of attn_amd64.s's SiLU blocks: sixteen lanes where
// those have eight, each lane performing exactly the operations of the
// AVX2 kernel (and so of the plain-Go twin) in the same order. The constants are attn_amd64.s's (the same values, defined again
// here: a DATA symbol is private to its file).

#define K32(name, bits) DATA name<>+0(SB)/4, $bits; GLOBL name<>(SB), RODATA|NOPTR, $4

K32(zRound, 0x4b400000)   // 0x1.8p23
K32(zLog2e, 0x3fb8aa3b)   // 0x1.715476p+0
K32(zLn2hi, 0x3f317200)   // 0x1.62e4p-1
K32(zLn2lo, 0x35bfbe8e)   // 0x1.7f7d1cp-20
K32(zOne, 0x3f800000)     // 1
K32(zP1, 0x3c072010)      // 0x1.0e4020p-7
K32(zP2, 0x3d2b9f17)      // 0x1.573e2ep-5
K32(zP3, 0x3e2aaf33)      // 0x1.555e66p-3
K32(zP4, 0x3efffedb)      // 0x1.fffdb6p-2
K32(zP5, 0x3f7ffff6)      // 0x1.ffffecp-1
K32(zAbs, 0x7fffffff)
K32(z126, 0x42fc0000)
K32(z192, 0x43400000)
K32(zG, 0x82000000)
K32(z7F, 0x7f000000)

// ZEXPCONSTS loads the constants of ZEXPF: Z11 bits(1.0), Z12 ln2lo, Z13
// ln2hi, Z14 log2e, Z15 0x1.8p23, Z16-Z20 P1-P5, Z21 the abs mask, Z22
// 126, Z23 192, Z24 0x82000000, Z25 0x7f000000, Z26 zero.
#define ZEXPCONSTS \
	VBROADCASTSS zOne<>(SB), Z11; \
	VBROADCASTSS zLn2lo<>(SB), Z12; \
	VBROADCASTSS zLn2hi<>(SB), Z13; \
	VBROADCASTSS zLog2e<>(SB), Z14; \
	VBROADCASTSS zRound<>(SB), Z15; \
	VBROADCASTSS zP1<>(SB), Z16; \
	VBROADCASTSS zP2<>(SB), Z17; \
	VBROADCASTSS zP3<>(SB), Z18; \
	VBROADCASTSS zP4<>(SB), Z19; \
	VBROADCASTSS zP5<>(SB), Z20; \
	VBROADCASTSS zAbs<>(SB), Z21; \
	VBROADCASTSS z126<>(SB), Z22; \
	VBROADCASTSS z192<>(SB), Z23; \
	VBROADCASTSS zG<>(SB), Z24; \
	VBROADCASTSS z7F<>(SB), Z25; \
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
