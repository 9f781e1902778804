#include "textflag.h"

// Q8_0 activation quantizer for MatMul's conversion step: ggml's x86
// quantize_row_q8_0 (AVX path), as quantizeActQ8_0 computes it with
// q8FlavorX86, eight blocks' worth of scalar Go replaced by vector code.
// Per block of 32: amax = max |v|; d = amax/127, stored after a trip
// through F16 (VCVTPS2PH, ties to even, as F32ToF16 for every non-NaN);
// id = 127/amax (0 when amax is 0); q = the low byte of the int32 that
// v*id rounds to, ties to even (VCVTPS2DQ under Go's default rounding):
// exactly roundToInt8, whose int32 conversion of an out-of-range or
// infinite value gives 0x80000000 on amd64, and whose NaN gives 0, as the
// low byte of VCVTPS2DQ's 0x80000000 does. Only amax differs when a block
// holds a NaN (the Go loop's comparison chain is order-dependent), so the
// kernel reports NaNs and the caller quantizes that vector in Go.

DATA q8actAbs<>+0(SB)/4, $0x7fffffff
GLOBL q8actAbs<>(SB), RODATA|NOPTR, $4

DATA q8act127<>+0(SB)/4, $0x42fe0000
GLOBL q8act127<>(SB), RODATA|NOPTR, $4

DATA q8actFF<>+0(SB)/4, $0x000000ff
GLOBL q8actFF<>(SB), RODATA|NOPTR, $4

// VPERMD indices: dwords 0 4 1 5 2 6 3 7.
DATA q8actPerm<>+0(SB)/8, $0x0000000400000000
DATA q8actPerm<>+8(SB)/8, $0x0000000500000001
DATA q8actPerm<>+16(SB)/8, $0x0000000600000002
DATA q8actPerm<>+24(SB)/8, $0x0000000700000003
GLOBL q8actPerm<>(SB), RODATA|NOPTR, $32

// func gemmQuantQ8(src *float32, nblk int, dst *q8Act) (ok bool)
// Quantizes nblk blocks of 32 values; ok is false when a value is NaN
// (the blocks are then to be redone by quantizeActQ8_0). nblk > 0.
TEXT ·gemmQuantQ8(SB), NOSPLIT, $0-25
	MOVQ src+0(FP), SI
	MOVQ nblk+8(FP), CX
	MOVQ dst+16(FP), DI
	VBROADCASTSS q8actAbs<>(SB), Y15
	VBROADCASTSS q8actFF<>(SB), Y13
	VMOVDQU q8actPerm<>(SB), Y12
	VXORPS Y14, Y14, Y14

q8actloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	// NaNs, sticky in Y14.
	VCMPPS $3, Y0, Y0, Y4
	VCMPPS $3, Y1, Y1, Y5
	VORPS Y5, Y4, Y4
	VCMPPS $3, Y2, Y2, Y5
	VORPS Y5, Y4, Y4
	VCMPPS $3, Y3, Y3, Y5
	VORPS Y5, Y4, Y4
	VORPS Y4, Y14, Y14
	// amax
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VANDPS Y15, Y2, Y6
	VANDPS Y15, Y3, Y7
	VMAXPS Y5, Y4, Y4
	VMAXPS Y7, Y6, Y6
	VMAXPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4
	// d = F16(amax/127)
	VDIVSS q8act127<>(SB), X4, X5
	VCVTPS2PH $0, X5, X5
	VCVTPH2PS X5, X5
	VMOVSS X5, 32(DI)
	// id = amax != 0 ? 127/amax : 0
	VXORPS X6, X6, X6
	VCMPSS $4, X6, X4, X6
	VMOVSS q8act127<>(SB), X7
	VDIVSS X4, X7, X7
	VANDPS X6, X7, X7
	VBROADCASTSS X7, Y7
	// q: low bytes of the rounded int32s, in order.
	VMULPS Y7, Y0, Y0
	VMULPS Y7, Y1, Y1
	VMULPS Y7, Y2, Y2
	VMULPS Y7, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPAND Y13, Y0, Y0
	VPAND Y13, Y1, Y1
	VPAND Y13, Y2, Y2
	VPAND Y13, Y3, Y3
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD Y0, Y12, Y0
	VMOVDQU Y0, (DI)
	ADDQ $128, SI
	ADDQ $36, DI
	DECQ CX
	JNZ q8actloop

	VMOVMSKPS Y14, AX
	TESTL AX, AX
	SETEQ ok+24(FP)
	VZEROUPPER
	RET
