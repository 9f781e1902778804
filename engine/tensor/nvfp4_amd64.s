#include "textflag.h"

// AVX2 + FMA3 + F16C kernels for NVFP4 weights (block_nvfp4: four UE4M3
// scale bytes, then 32 bytes of E2M1 codes). Each runs whole 64-value
// blocks and stores eight lane accumulators per row; the Go wrappers in
// nvfp4_amd64.go add the lanes. W4A8 follows ggml's lane order: per block,
// each half (sub-blocks 2h and 2h+1, code bytes 16h..16h+15) is widened
// with the low nibbles of its 16 bytes in the low 128-bit half of the
// register and the high nibbles in the high half, looked up (VPSHUFB) as
// ggml's doubled E2M1 integers; register lanes 0, 1, 4, 5 then belong to
// sub-block 2h, lanes 2, 3, 6, 7 to 2h+1. W4A4 has its own order, chosen
// for this kernel (nvfp4a4.go; below).
//
// Scale bytes become floats without a table: the low 7 bits shifted left
// by 7 are an F16 whose value is exactly the UE4M3 value times 2^-8
// (subnormals included); the code 0x7F (NaN) is zeroed first, as the
// twins' reader (ggml's) does. The 2^8 is folded into the activation
// factor, and every scale product stays exact.
//
// Registers: Y14 the E2M1 table; per block Y8, Y9 the activation codes
// and X10 (W4A8) or Y10 (W4A4) the activation factors.

DATA nvfp4Tab<>+0(SB)/8, $0x0c08060403020100
DATA nvfp4Tab<>+8(SB)/8, $0xf4f8fafcfdfeff00
DATA nvfp4Tab<>+16(SB)/8, $0x0c08060403020100
DATA nvfp4Tab<>+24(SB)/8, $0xf4f8fafcfdfeff00
GLOBL nvfp4Tab<>(SB), RODATA|NOPTR, $32

DATA nvfp4Low<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvfp4Low<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nvfp4Low<>(SB), RODATA|NOPTR, $16

DATA nvfp4Ones<>+0(SB)/8, $0x0001000100010001
DATA nvfp4Ones<>+8(SB)/8, $0x0001000100010001
DATA nvfp4Ones<>+16(SB)/8, $0x0001000100010001
DATA nvfp4Ones<>+24(SB)/8, $0x0001000100010001
GLOBL nvfp4Ones<>(SB), RODATA|NOPTR, $32

DATA nvfp4W7F<>+0(SB)/8, $0x007f007f007f007f
DATA nvfp4W7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL nvfp4W7F<>(SB), RODATA|NOPTR, $16

// 4 x 128.0 (W4A8: 2^8 times ggml's 1/2 for its doubled table) and
// 256.0 (W4A4).
DATA nvfp4F128<>+0(SB)/8, $0x4300000043000000
DATA nvfp4F128<>+8(SB)/8, $0x4300000043000000
GLOBL nvfp4F128<>(SB), RODATA|NOPTR, $16
DATA nvfp4F256<>+0(SB)/4, $0x43800000
GLOBL nvfp4F256<>(SB), RODATA|NOPTR, $4

// 0x0F in 32 bytes.
DATA nvfp4Low32<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvfp4Low32<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvfp4Low32<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nvfp4Low32<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nvfp4Low32<>(SB), RODATA|NOPTR, $32

// VPSHUFB control: scale bytes b0..b3 to the words b0 b0 b1 b1 b2 b2 b3 b3.
DATA nvfp4Dup<>+0(SB)/8, $0x8001800180008000
DATA nvfp4Dup<>+8(SB)/8, $0x8003800380028002
GLOBL nvfp4Dup<>(SB), RODATA|NOPTR, $16

// NVFP4SCALES loads the four scale bytes at 0(row) as floats (UE4M3 *
// 2^-8) into X1. Clobbers AX, X2.
#define NVFP4SCALES(row) \
	MOVL 0(row), AX; \
	VMOVD AX, X1; \
	VPMOVZXBW X1, X1; \
	VPAND nvfp4W7F<>(SB), X1, X1; \
	VPCMPEQW nvfp4W7F<>(SB), X1, X2; \
	VPSLLW $7, X1, X1; \
	VPANDN X1, X2, X1; \
	VCVTPH2PS X1, X1

// NVFP4CODES widens the 16 code bytes at off(row) into Y4 (doubled E2M1
// integers, nibble order). Clobbers X5.
#define NVFP4CODES(off, row) \
	VMOVDQU off(row), X4; \
	VPSRLW $4, X4, X5; \
	VPAND nvfp4Low<>(SB), X4, X4; \
	VPAND nvfp4Low<>(SB), X5, X5; \
	VINSERTI128 $1, X5, Y4, Y4; \
	VPSHUFB Y4, Y14, Y4

// NVFP4DOT: Y5 holds 32 int8 activations in nibble order, Y4 the weights,
// Y3 the lane scales; acc += Y3 * (sums of four products), one fused
// multiply-add per lane. Clobbers Y4-Y6.
#define NVFP4DOT(acc) \
	VPSIGNB Y4, Y5, Y5; \
	VPABSB Y4, Y4; \
	VPMADDUBSW Y5, Y4, Y6; \
	VPMADDWD nvfp4Ones<>(SB), Y6, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VFMADD231PS Y6, Y3, acc

// NVFP4ROW runs one block of the row at 0(row) into acc: lane scales
// X10 * the block's scales, spread as [s0 s0 s1 s1 s0 s0 s1 s1] for half 0
// and [s2 s2 s3 s3 ...] for half 1. Clobbers AX, X1-Y6.
#define NVFP4ROW(row, acc) \
	NVFP4SCALES(row); \
	VMULPS X10, X1, X1; \
	VPERMILPS $0x50, X1, X3; \
	VINSERTF128 $1, X3, Y3, Y3; \
	NVFP4CODES(4, row); \
	VMOVDQU Y8, Y5; \
	NVFP4DOT(acc); \
	VPERMILPS $0xFA, X1, X3; \
	VINSERTF128 $1, X3, Y3, Y3; \
	NVFP4CODES(20, row); \
	VMOVDQU Y9, Y5; \
	NVFP4DOT(acc)

// NVFP4Q8ACT readies the W4A8 activations of one NVFP4 block at 0(DI) (two
// q8Act blocks of 36 bytes: 32 quants, F32 scale): Y8, Y9 the quants in
// nibble order (VPERMQ quadwords 0 2 1 3), X10 = [d0 d0 d1 d1] * 128, so
// that a lane scale is (UE4M3 * 2^-8) * d * 128 = UE4M3 * d / 2, exactly
// dotNVFP4Q8's. Clobbers X7.
#define NVFP4Q8ACT \
	VPERMQ $0xD8, (DI), Y8; \
	VPERMQ $0xD8, 36(DI), Y9; \
	VBROADCASTSS 32(DI), X10; \
	VBROADCASTSS 68(DI), X7; \
	VBLENDPS $0x0C, X7, X10, X10; \
	VMULPS nvfp4F128<>(SB), X10, X10

// func dotNVFP4Q8Lanes(row *byte, act *q8Act, nblk int, lanes *[8]float32)
// W4A8, one row. Register lane j holds twin lane [0 1 4 5 2 3 6 7][j].
TEXT ·dotNVFP4Q8Lanes(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VMOVDQU nvfp4Tab<>(SB), Y14
	TESTQ CX, CX
	JZ nvq8done

nvq8loop:
	NVFP4Q8ACT
	NVFP4ROW(SI, Y0)
	ADDQ $36, SI
	ADDQ $72, DI
	DECQ CX
	JNZ nvq8loop

nvq8done:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func dotNVFP4Q8Lanes4(row *byte, stride int, act *q8Act, nblk int, lanes *[32]float32)
// W4A8, four rows stride bytes apart sharing the activations:
// lanes[8*r+j] is register lane j of row r. Four independent chains.
TEXT ·dotNVFP4Q8Lanes4(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (SI)(BX*1), R9
	LEAQ (SI)(BX*2), R8
	LEAQ (R8)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VMOVDQU nvfp4Tab<>(SB), Y14
	TESTQ CX, CX
	JZ nvq8x4done

nvq8x4loop:
	NVFP4Q8ACT
	NVFP4ROW(SI, Y0)
	NVFP4ROW(R9, Y11)
	NVFP4ROW(R8, Y12)
	NVFP4ROW(R10, Y13)
	ADDQ $36, SI
	ADDQ $36, R9
	ADDQ $36, R8
	ADDQ $36, R10
	ADDQ $72, DI
	DECQ CX
	JNZ nvq8x4loop

nvq8x4done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y11, 32(DX)
	VMOVUPS Y12, 64(DX)
	VMOVUPS Y13, 96(DX)
	VZEROUPPER
	RET

// W4A4 (nvfp4a4.go's layout): the 32 code bytes of a block are loaded
// whole; their low nibbles give lanes 0-7, their high nibbles lanes 8-15,
// with no shuffle across 128-bit halves. Y8, Y9: the activation's doubled
// codes for the low and high nibbles; Y10: its lane factors SF/4 * 256.

// NVFP4FP4ROW runs one block of the row at 0(row) into accLo (lanes 0-7)
// and accHi (lanes 8-15): lane scale Y1 = (UE4M3 * 2^-8 of sub-block k/2,
// the scale bytes spread to words b0 b0 b1 b1 .. by VPSHUFB) * Y10.
// Clobbers AX, Y1, Y4-Y6.
#define NVFP4FP4ROW(row, accLo, accHi) \
	MOVL 0(row), AX; \
	VMOVD AX, X1; \
	VPSHUFB nvfp4Dup<>(SB), X1, X1; \
	VPAND nvfp4W7F<>(SB), X1, X1; \
	VPCMPEQW nvfp4W7F<>(SB), X1, X6; \
	VPSLLW $7, X1, X1; \
	VPANDN X1, X6, X1; \
	VCVTPH2PS X1, Y1; \
	VMULPS Y10, Y1, Y1; \
	VMOVDQU 4(row), Y4; \
	VPSRLW $4, Y4, Y5; \
	VPAND nvfp4Low32<>(SB), Y4, Y4; \
	VPAND nvfp4Low32<>(SB), Y5, Y5; \
	VPSHUFB Y4, Y14, Y4; \
	VPSHUFB Y5, Y14, Y5; \
	VPSIGNB Y4, Y8, Y6; \
	VPABSB Y4, Y4; \
	VPMADDUBSW Y6, Y4, Y6; \
	VPMADDWD nvfp4Ones<>(SB), Y6, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VFMADD231PS Y6, Y1, accLo; \
	VPSIGNB Y5, Y9, Y6; \
	VPABSB Y5, Y5; \
	VPMADDUBSW Y6, Y5, Y6; \
	VPMADDWD nvfp4Ones<>(SB), Y6, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VFMADD231PS Y6, Y1, accHi

// NVFP4FP4ACT readies one fp4Act block at 0(DI) (96 bytes: 64 doubled
// codes in nibble order, eight F32 lane factors SF/4).
#define NVFP4FP4ACT \
	VMOVDQU (DI), Y8; \
	VMOVDQU 32(DI), Y9; \
	VBROADCASTSS nvfp4F256<>(SB), Y10; \
	VMULPS 64(DI), Y10, Y10

// func dotNVFP4FP4Lanes(row *byte, act *fp4Act, nblk int, lanes *[8]float32)
// W4A4, one row: lanes[k] = lane k + lane k+8 of the twin.
TEXT ·dotNVFP4FP4Lanes(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), SI
	MOVQ act+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VMOVDQU nvfp4Tab<>(SB), Y14
	TESTQ CX, CX
	JZ nvf4done

nvf4loop:
	NVFP4FP4ACT
	NVFP4FP4ROW(SI, Y0, Y2)
	ADDQ $36, SI
	ADDQ $96, DI
	DECQ CX
	JNZ nvf4loop

nvf4done:
	VADDPS Y2, Y0, Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func dotNVFP4FP4Lanes4(row *byte, stride int, act *fp4Act, nblk int, lanes *[32]float32)
// W4A4, four rows stride bytes apart sharing the activations:
// lanes[8*r+k] as dotNVFP4FP4Lanes for row r. Eight independent chains;
// every vector register is in use.
TEXT ·dotNVFP4FP4Lanes4(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ act+16(FP), DI
	MOVQ nblk+24(FP), CX
	MOVQ lanes+32(FP), DX
	LEAQ (SI)(BX*1), R9
	LEAQ (SI)(BX*2), R8
	LEAQ (R8)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y7, Y7, Y7
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y15, Y15, Y15
	VMOVDQU nvfp4Tab<>(SB), Y14
	TESTQ CX, CX
	JZ nvf4x4done

nvf4x4loop:
	NVFP4FP4ACT
	NVFP4FP4ROW(SI, Y0, Y2)
	NVFP4FP4ROW(R9, Y3, Y7)
	NVFP4FP4ROW(R8, Y11, Y12)
	NVFP4FP4ROW(R10, Y13, Y15)
	ADDQ $36, SI
	ADDQ $36, R9
	ADDQ $36, R8
	ADDQ $36, R10
	ADDQ $96, DI
	DECQ CX
	JNZ nvf4x4loop

nvf4x4done:
	VADDPS Y2, Y0, Y0
	VADDPS Y7, Y3, Y3
	VADDPS Y12, Y11, Y11
	VADDPS Y15, Y13, Y13
	VMOVUPS Y0, (DX)
	VMOVUPS Y3, 32(DX)
	VMOVUPS Y11, 64(DX)
	VMOVUPS Y13, 96(DX)
	VZEROUPPER
	RET
