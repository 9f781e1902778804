#include "textflag.h"

// quantizeQ8KAVX2's constants.
DATA q8kPerm<>+0(SB)/4, $0
DATA q8kPerm<>+4(SB)/4, $4
DATA q8kPerm<>+8(SB)/4, $1
DATA q8kPerm<>+12(SB)/4, $5
DATA q8kPerm<>+16(SB)/4, $2
DATA q8kPerm<>+20(SB)/4, $6
DATA q8kPerm<>+24(SB)/4, $3
DATA q8kPerm<>+28(SB)/4, $7
GLOBL q8kPerm<>(SB), RODATA|NOPTR, $32

#define BCAST(v, r) MOVL v, AX; VMOVD AX, r##X; VPBROADCASTD r##X, r

// Q8KQ(off, r): r = the int32 quants of x[off/4 .. +8] as quantizeQ8KGo
// makes them: nearestInt(iscale*v) through the same float addition of
// 1.5*2^23 and mantissa bits, min(127, .), the low byte kept.
#define Q8KQ(off, r) \
	VMULPS off(SI), Y3, r; \
	VADDPS Y14, r, r; \
	VPAND Y13, r, r; \
	VPSUBD Y12, r, r; \
	VPMINSD Y11, r, r; \
	VPAND Y10, r, r

// func quantizeQ8KAVX2(x *float32, nb int, dst *q8KAct)
// quantizeQ8KGo for nb blocks of 256 values, bit for bit.
TEXT ·quantizeQ8KAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVL $0x7FFFFFFF, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15        // |.|
	MOVL $0x4B400000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14        // 12582912.0
	MOVL $0x007FFFFF, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00400000, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $127, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0xFF, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0x01010101, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9          // ones, bytes
	MOVL $0x00010001, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8          // ones, words
	TESTQ CX, CX
	JEQ q8kdone

q8kblock:
	// the largest magnitude (a NaN never replaces it: VMAXPS keeps its
	// second source when unordered)
	VXORPS Y0, Y0, Y0
	XORQ DX, DX

q8kmax:
	VANDPS (SI)(DX*1), Y15, Y1
	VMAXPS Y0, Y1, Y0
	ADDQ $32, DX
	CMPQ DX, $1024
	JLT q8kmax
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X0, X1, X0
	VPSHUFD $0x4E, X0, X1
	VMAXPS X0, X1, X0
	VPSHUFD $0xB1, X0, X1
	VMAXPS X0, X1, X0            // amax in every lane
	VXORPS X1, X1, X1
	VUCOMISS X1, X0
	JNE q8knonzero
	// an all-zero block: zero quants, sums and scale
	VPXOR Y1, Y1, Y1
	XORQ DX, DX

q8kzero:
	VMOVDQU Y1, (DI)(DX*1)
	ADDQ $32, DX
	CMPQ DX, $288
	JLT q8kzero
	MOVL $0, 288(DI)
	JMP q8knext

q8knonzero:
	// the first value of that magnitude, its sign kept
	VBROADCASTSS X0, Y2
	XORQ DX, DX

q8kfind:
	VANDPS (SI)(DX*4), Y15, Y1
	VCMPPS $0, Y2, Y1, Y1
	VMOVMSKPS Y1, AX
	TESTL AX, AX
	JNE q8kfound
	ADDQ $8, DX
	JMP q8kfind

q8kfound:
	BSFL AX, AX
	ADDQ AX, DX
	VMOVSS (SI)(DX*4), X4        // max
	MOVL $0xC2FE0000, AX         // -127.0
	VMOVD AX, X3
	VDIVSS X4, X3, X3            // iscale = -127/max
	MOVL $0x3F800000, AX         // 1.0
	VMOVD AX, X5
	VDIVSS X3, X5, X5            // d = 1/iscale
	VMOVSS X5, 288(DI)
	VBROADCASTSS X3, Y3
	VMOVDQU q8kPerm<>(SB), Y2
	XORQ DX, DX
	XORQ R8, R8

q8kquant:
	Q8KQ(0, Y4)
	Q8KQ(32, Y5)
	Q8KQ(64, Y6)
	Q8KQ(96, Y7)
	VPACKUSDW Y5, Y4, Y4
	VPACKUSDW Y7, Y6, Y6
	VPACKUSWB Y6, Y4, Y4
	VPERMD Y4, Y2, Y4
	VMOVDQU Y4, (DI)(R8*1)
	ADDQ $128, SI
	ADDQ $32, R8
	CMPQ R8, $256
	JLT q8kquant

	// the sums of 16: pairs (VPMADDUBSW by ones), fours (VPMADDWD by
	// ones), then VPHADDD trees: groups 0,2,4,6 | 1,3,5,7 and 8.. | 9..
#define Q8KSUMS(off, h) \
	VPMADDUBSW (off)(DI), Y9, Y0; \
	VPMADDWD Y8, Y0, Y0; \
	VPMADDUBSW (off+32)(DI), Y9, Y1; \
	VPMADDWD Y8, Y1, Y1; \
	VPHADDD Y1, Y0, Y0; \
	VPMADDUBSW (off+64)(DI), Y9, Y1; \
	VPMADDWD Y8, Y1, Y1; \
	VPMADDUBSW (off+96)(DI), Y9, h; \
	VPMADDWD Y8, h, h; \
	VPHADDD h, Y1, Y1; \
	VPHADDD Y1, Y0, h

	Q8KSUMS(0, Y4)
	Q8KSUMS(128, Y5)
	VPACKSSDW Y5, Y4, Y4         // even groups | odd groups, int16
	VEXTRACTI128 $1, Y4, X5
	VPUNPCKLWD X5, X4, X6
	VPUNPCKHWD X5, X4, X7
	VMOVDQU X6, 256(DI)
	VMOVDQU X7, 272(DI)
	SUBQ $1024, SI

q8knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ q8kblock

q8kdone:
	VZEROUPPER
	RET
