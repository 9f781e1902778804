#include "textflag.h"

// NEON tile kernels for MatMul with several vectors (gemm_arm64.go), for
// CPUs with the dot-product extension (SDOT; useNEONDot): one weight row
// against a tile group of 2, 4 or 8 vectors, packed by packQ8Tile (Q8_0)
// or packNVQ8Tile (NVFP4 W4A8) in gemm.go. Each weight block is loaded
// and unpacked once for the group; each (row, vector) pair keeps the
// one-vector kernel's eight lanes (q8neon_arm64.s), so its steps are
// those of the twins (dotQ8, dotNVFP4Q8): SDOT gives a lane the exact sum
// of four products, SCVTF makes it an F32 (exact: |isum| <= 4*128*128 <
// 2^24), and FMLA adds it times the block factor with one rounding, the
// fma32 the twins emulate. The factor is the twin's float32 product.
//
// Go's assembler has no mnemonics for SDOT, SCVTF, FCVTL, vector FMUL and
// FMLA by element: the macros below encode them (checked with llvm-mc and
// llvm-objdump), operands as register numbers.
//
// Instructions per weight block, loop overhead included (the same SDOT,
// SCVTF and FMLA per (row, vector) as the one-vector kernels, which run
// 18 per block for Q8_0 and 53 for W4A8; the rest is shared):
//	Q8_0 1x2: 26, 13 per (row, vector); 1x4: 43, 11; 1x8: 79, 10.
//	W4A8 1x2: 63, 32 per (row, vector); 1x4: 102, 26; 1x8: 181, 23.
// SMMLA (I8MM) is not used: see gemm_arm64.go.

// SDOT Vd.4S, Vn.16B, Vm.16B
#define SDOT(d, n, m) WORD $(0x4e809400|((m)<<16)|((n)<<5)|(d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF(d, n) WORD $(0x4e21d800|((n)<<5)|(d))
// FCVTL Vd.4S, Vn.4H
#define FCVTL(d, n) WORD $(0x0e217800|((n)<<5)|(d))
// FMUL Vd.4S, Vn.4S, Vm.S[i]
#define FMULE(d, n, m, i) WORD $(0x4f809000|(((i)&1)<<21)|(((i)>>1)<<11)|((m)<<16)|((n)<<5)|(d))
// FMLA Vd.4S, Vn.4S, Vm.S[i]
#define FMLAE(d, n, m, i) WORD $(0x4f801000|(((i)&1)<<21)|(((i)>>1)<<11)|((m)<<16)|((n)<<5)|(d))
// FMLA Vd.4S, Vn.4S, Vm.4S
#define FMLAV(d, n, m) WORD $(0x4e20cc00|((m)<<16)|((n)<<5)|(d))

// Q8PAIR runs vectors k and k+1 of a Q8_0 group through one block: their
// 64 quants at R1 (post-incremented) against the weight quants in V2 V3,
// into the lanes a0 a1 (vector k, lanes 0-3 and 4-7) and b0 b1 (vector
// k+1), times the block factors d = V<s>.S[i] and V<s>.S[i+1].
#define Q8PAIR(a0, a1, b0, b1, s, i) \
	VLD1.P 64(R1), [V4.B16, V5.B16, V6.B16, V7.B16] \
	VEOR V8.B16, V8.B16, V8.B16 \
	VEOR V9.B16, V9.B16, V9.B16 \
	VEOR V10.B16, V10.B16, V10.B16 \
	VEOR V11.B16, V11.B16, V11.B16 \
	SDOT(8, 2, 4) \
	SDOT(9, 3, 5) \
	SDOT(10, 2, 6) \
	SDOT(11, 3, 7) \
	SCVTF(8, 8) \
	SCVTF(9, 9) \
	SCVTF(10, 10) \
	SCVTF(11, 11) \
	FMLAE(a0, 8, s, i) \
	FMLAE(a1, 9, s, i) \
	FMLAE(b0, 10, s, (i)+1) \
	FMLAE(b1, 11, s, (i)+1)

// Q8WEIGHTS loads a Q8_0 weight block at R0 (post-incremented): V14.S[0]
// = its F16 scale as F32, V2 V3 = its quants.
#define Q8WEIGHTS \
	FMOVS (R0), F1 \
	FCVTL(14, 1) \
	ADD $2, R0, R0 \
	VLD1.P 32(R0), [V2.B16, V3.B16]

#define ZERO(r) VEOR r.B16, r.B16, r.B16

// func gemmQ8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)
// Lanes 8k..8k+7 are dotQ8's lanes for vector k of the group. A group's
// block is the vectors' 32 quants each, then their F32 scales.
TEXT ·gemmQ8Lanes1x2(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	CBZ R2, q8x2done

q8x2loop:
	Q8WEIGHTS
	FMOVD 64(R1), F12                // the two vectors' scales
	FMULE(12, 12, 14, 0)             // d = x.d * F16(w.d), the twin's product
	Q8PAIR(16, 17, 18, 19, 12, 0)
	ADD $8, R1, R1
	SUB $1, R2, R2
	CBNZ R2, q8x2loop

q8x2done:
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R3)
	RET

// func gemmQ8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)
TEXT ·gemmQ8Lanes1x4(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	ZERO(V20)
	ZERO(V21)
	ZERO(V22)
	ZERO(V23)
	CBZ R2, q8x4done

q8x4loop:
	Q8WEIGHTS
	FMOVQ 128(R1), F12
	FMULE(12, 12, 14, 0)
	Q8PAIR(16, 17, 18, 19, 12, 0)
	Q8PAIR(20, 21, 22, 23, 12, 2)
	ADD $16, R1, R1
	SUB $1, R2, R2
	CBNZ R2, q8x4loop

q8x4done:
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R3)
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R3)
	RET

// func gemmQ8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)
// V16-V31 hold the 64 lanes; V12 V13 the eight block factors.
TEXT ·gemmQ8Lanes1x8(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	ZERO(V20)
	ZERO(V21)
	ZERO(V22)
	ZERO(V23)
	ZERO(V24)
	ZERO(V25)
	ZERO(V26)
	ZERO(V27)
	ZERO(V28)
	ZERO(V29)
	ZERO(V30)
	ZERO(V31)
	CBZ R2, q8x8done

q8x8loop:
	Q8WEIGHTS
	FMOVQ 256(R1), F12
	FMOVQ 272(R1), F13
	FMULE(12, 12, 14, 0)
	FMULE(13, 13, 14, 0)
	Q8PAIR(16, 17, 18, 19, 12, 0)
	Q8PAIR(20, 21, 22, 23, 12, 2)
	Q8PAIR(24, 25, 26, 27, 13, 0)
	Q8PAIR(28, 29, 30, 31, 13, 2)
	ADD $32, R1, R1
	SUB $1, R2, R2
	CBNZ R2, q8x8loop

q8x8done:
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R3)
	VST1.P [V20.S4, V21.S4, V22.S4, V23.S4], 64(R3)
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R3)
	VST1 [V28.S4, V29.S4, V30.S4, V31.S4], (R3)
	RET

// The W4A8 constants, loaded into V4-V7 once per block (the 1x8 kernel
// needs all 32 registers in the vector loop): the TBL control that
// spreads the four scale bytes b0..b3 to the halfwords b0 b1 b2 b3 0 0 0
// 0 (index 0xFF reads as 0), 0x007F per halfword, ggml's kvalues_fp4
// (doubled E2M1 values) as a TBL table, and the low-nibble mask.
DATA nvTileConst<>+0(SB)/8, $0xff03ff02ff01ff00
DATA nvTileConst<>+8(SB)/8, $0xffffffffffffffff
DATA nvTileConst<>+16(SB)/8, $0x007f007f007f007f
DATA nvTileConst<>+24(SB)/8, $0x007f007f007f007f
DATA nvTileConst<>+32(SB)/8, $0x0c08060403020100
DATA nvTileConst<>+40(SB)/8, $0xf4f8fafcfdfeff00
DATA nvTileConst<>+48(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvTileConst<>+56(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nvTileConst<>(SB), RODATA|NOPTR, $64

// NVWEIGHTS unpacks the NVFP4 weight block at R0 (post-incremented; R5
// = $nvTileConst<>): V14 = s0 s0 s1 s1 and V15 = s2 s2 s3 s3, where s_j
// = nvScale[b_j] * 2^-8 exactly (the UE4M3 code's low 7 bits shifted
// into an F16, 0x7F zeroed, FCVTL; the packed activation factors carry
// the 2^8 * 0.5), and V0-V3 = the doubled E2M1 values of the low nibbles
// of codes 0-15, their high nibbles, the low nibbles of codes 16-31 and
// their high nibbles: the values of sub-blocks (0, 1) in the quadword
// order packNVQ8Tile gives the activations.
#define NVWEIGHTS \
	VLD1 (R5), [V4.B16, V5.B16, V6.B16, V7.B16] \
	FMOVS (R0), F8 \
	VTBL V4.B16, [V8.B16], V9.B16 \
	VAND V5.B16, V9.B16, V9.B16 \
	VCMEQ V5.H8, V9.H8, V10.H8 \
	VSHL $7, V9.H8, V9.H8 \
	VEOR V11.B16, V11.B16, V11.B16 \
	VBIF V10.B16, V9.B16, V11.B16 \
	FCVTL(11, 11) \
	VZIP1 V11.S4, V11.S4, V14.S4 \
	VZIP2 V11.S4, V11.S4, V15.S4 \
	ADD $4, R0, R0 \
	VLD1.P 32(R0), [V8.B16, V9.B16] \
	VAND V7.B16, V8.B16, V10.B16 \
	VUSHR $4, V8.B16, V11.B16 \
	VAND V7.B16, V9.B16, V12.B16 \
	VUSHR $4, V9.B16, V13.B16 \
	VTBL V10.B16, [V6.B16], V0.B16 \
	VTBL V11.B16, [V6.B16], V1.B16 \
	VTBL V12.B16, [V6.B16], V2.B16 \
	VTBL V13.B16, [V6.B16], V3.B16

// NVVEC runs one vector of a W4A8 group through one NVFP4 block: its 64
// quants at R1 (post-incremented) against V0-V3, into the lanes a (the
// twin's lanes 0 1 4 5) and b (lanes 2 3 6 7), with the factors d_j =
// s_j * x.d*128 rounded to F32 (the twin's nvScale*0.5*x.d), x.d*128
// being V<m0>.S[i0] for the first Q8_0 block (sub-blocks 0 and 1) and
// V<m1>.S[i1] for the second (2 and 3). Lane order: sub-block 0 or 1,
// then 2 or 3, as the twin.
#define NVVEC(a, b, m0, i0, m1, i1) \
	VLD1.P 64(R1), [V4.B16, V5.B16, V6.B16, V7.B16] \
	VEOR V8.B16, V8.B16, V8.B16 \
	VEOR V9.B16, V9.B16, V9.B16 \
	VEOR V10.B16, V10.B16, V10.B16 \
	VEOR V11.B16, V11.B16, V11.B16 \
	SDOT(8, 0, 4) \
	SDOT(9, 1, 5) \
	SDOT(10, 2, 6) \
	SDOT(11, 3, 7) \
	FMULE(4, 14, m0, i0) \
	FMULE(5, 15, m1, i1) \
	SCVTF(8, 8) \
	SCVTF(9, 9) \
	SCVTF(10, 10) \
	SCVTF(11, 11) \
	FMLAV(a, 8, 4) \
	FMLAV(b, 9, 4) \
	FMLAV(a, 10, 5) \
	FMLAV(b, 11, 5)

// func gemmNVFP4Q8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)
// Lanes 8k..8k+7 are dotNVFP4Q8's lanes 0 1 4 5 2 3 6 7 for vector k of
// the group. A group's block (packNVQ8Tile) is the vectors' 64 quants
// each, then their factors x0.d*128, then their x1.d*128.
TEXT ·gemmNVFP4Q8Lanes1x2(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	MOVD $nvTileConst<>(SB), R5
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	CBZ R2, nvx2done

nvx2loop:
	NVWEIGHTS
	FMOVQ 128(R1), F12               // x0.d*128 of both vectors, then x1.d*128
	NVVEC(16, 17, 12, 0, 12, 2)
	NVVEC(18, 19, 12, 1, 12, 3)
	ADD $16, R1, R1
	SUB $1, R2, R2
	CBNZ R2, nvx2loop

nvx2done:
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R3)
	RET

// func gemmNVFP4Q8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)
TEXT ·gemmNVFP4Q8Lanes1x4(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	MOVD $nvTileConst<>(SB), R5
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	ZERO(V20)
	ZERO(V21)
	ZERO(V22)
	ZERO(V23)
	CBZ R2, nvx4done

nvx4loop:
	NVWEIGHTS
	FMOVQ 256(R1), F12               // x0.d*128 of the four vectors
	FMOVQ 272(R1), F13               // x1.d*128
	NVVEC(16, 17, 12, 0, 13, 0)
	NVVEC(18, 19, 12, 1, 13, 1)
	NVVEC(20, 21, 12, 2, 13, 2)
	NVVEC(22, 23, 12, 3, 13, 3)
	ADD $32, R1, R1
	SUB $1, R2, R2
	CBNZ R2, nvx4loop

nvx4done:
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R3)
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R3)
	RET

// func gemmNVFP4Q8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)
// All 32 registers: V0-V3 weights, V4-V11 one vector's quants and
// products, V12 V13 four vectors' factors at a time, V14 V15 the scales,
// V16-V31 the lanes. R4 points at the block's factors.
TEXT ·gemmNVFP4Q8Lanes1x8(SB), NOSPLIT, $0-32
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nblk+16(FP), R2
	MOVD lanes+24(FP), R3
	MOVD $nvTileConst<>(SB), R5
	ZERO(V16)
	ZERO(V17)
	ZERO(V18)
	ZERO(V19)
	ZERO(V20)
	ZERO(V21)
	ZERO(V22)
	ZERO(V23)
	ZERO(V24)
	ZERO(V25)
	ZERO(V26)
	ZERO(V27)
	ZERO(V28)
	ZERO(V29)
	ZERO(V30)
	ZERO(V31)
	CBZ R2, nvx8done

nvx8loop:
	NVWEIGHTS
	ADD $512, R1, R4
	FMOVQ (R4), F12                  // x0.d*128 of vectors 0-3
	FMOVQ 32(R4), F13                // x1.d*128 of vectors 0-3
	NVVEC(16, 17, 12, 0, 13, 0)
	NVVEC(18, 19, 12, 1, 13, 1)
	NVVEC(20, 21, 12, 2, 13, 2)
	NVVEC(22, 23, 12, 3, 13, 3)
	FMOVQ 16(R4), F12                // vectors 4-7
	FMOVQ 48(R4), F13
	NVVEC(24, 25, 12, 0, 13, 0)
	NVVEC(26, 27, 12, 1, 13, 1)
	NVVEC(28, 29, 12, 2, 13, 2)
	NVVEC(30, 31, 12, 3, 13, 3)
	ADD $64, R1, R1
	SUB $1, R2, R2
	CBNZ R2, nvx8loop

nvx8done:
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R3)
	VST1.P [V20.S4, V21.S4, V22.S4, V23.S4], 64(R3)
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R3)
	VST1 [V28.S4, V29.S4, V30.S4, V31.S4], (R3)
	RET
