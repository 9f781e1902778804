#include "textflag.h"

// AVX2 + F16C loops over E4M3 codes (the FP8 KV cache), twins of DotE4M3
// and AxpyE4M3 in e4m3row.go. A code widens to F16 exactly: magnitude bits
// shifted left by 7, sign bit to bit 15, is an F16 of value E4M3 * 2^-8
// (subnormals included), which VCVTPH2PS widens and a multiply by 256
// restores, exactly. The NaN codes (0x7F, 0xFF) become NaN (all ones).

DATA e4m3W7F<>+0(SB)/8, $0x007f007f007f007f
DATA e4m3W7F<>+8(SB)/8, $0x007f007f007f007f
GLOBL e4m3W7F<>(SB), RODATA|NOPTR, $16
DATA e4m3W80<>+0(SB)/8, $0x0080008000800080
DATA e4m3W80<>+8(SB)/8, $0x0080008000800080
GLOBL e4m3W80<>(SB), RODATA|NOPTR, $16
DATA e4m3F256<>+0(SB)/4, $0x43800000
GLOBL e4m3F256<>(SB), RODATA|NOPTR, $4

// E4M3WIDEN decodes the eight codes at 0(SI) into Y1. Y15 holds 256.0.
// Clobbers X2, X3.
#define E4M3WIDEN \
	VPMOVZXBW (SI), X1; \
	VPAND e4m3W80<>(SB), X1, X2; \
	VPSLLW $8, X2, X2; \
	VPAND e4m3W7F<>(SB), X1, X1; \
	VPCMPEQW e4m3W7F<>(SB), X1, X3; \
	VPSLLW $7, X1, X1; \
	VPOR X2, X1, X1; \
	VCVTPH2PS X1, Y1; \
	VMULPS Y15, Y1, Y1; \
	VPMOVSXWD X3, Y3; \
	VORPS Y3, Y1, Y1

// func dotE4M3Lanes(k *byte, x *float32, nblk int, lanes *[8]float32)
// lane += float32(E4M3(k) * x): a rounded product, then a rounded add.
TEXT ·dotE4M3Lanes(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ lanes+24(FP), DX
	VXORPS Y0, Y0, Y0
	VBROADCASTSS e4m3F256<>(SB), Y15
	TESTQ CX, CX
	JZ e4dotdone

e4dotloop:
	E4M3WIDEN
	VMULPS (DI), Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ $8, SI
	ADDQ $32, DI
	DECQ CX
	JNZ e4dotloop

e4dotdone:
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func axpyE4M3Blocks(y *float32, v *byte, nblk int, a float32)
// y += float32(a * E4M3(v)), eight values at a time.
TEXT ·axpyE4M3Blocks(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ nblk+16(FP), CX
	VBROADCASTSS a+24(FP), Y4
	VBROADCASTSS e4m3F256<>(SB), Y15
	TESTQ CX, CX
	JZ e4axpydone

e4axpyloop:
	E4M3WIDEN
	VMULPS Y4, Y1, Y1
	VADDPS (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	DECQ CX
	JNZ e4axpyloop

e4axpydone:
	VZEROUPPER
	RET
