#include "textflag.h"

// NEON kernels for the K-quants (Q8_K activations): quantizeQ8KNEON in
// plain NEON, the integer cores in SDOT (the dot-product extension,
// useNEONDot). Go's assembler has no mnemonics for SDOT, SCVTF, MLA,
// SMIN, UMAXV, vector FMUL/FADD and several others: they are WORD-encoded
// (encodings from llvm-mc), with the instruction in the comment, as in
// q8neon_arm64.s. The integer sums are exact (wrapping int32, as the
// twins'), so only their lanes' assignment follows the twins; the float
// steps are the twins' own operations in their order: one rounding per
// FMUL/FADD, one per fused multiply-add (FMLA, FMADD), which is the
// fma32 that the twins emulate.

// func quantizeQ8KNEON(x *float32, nb int, dst *q8KAct)
// quantizeQ8KGo for nb blocks of 256 values, bit for bit. The largest
// magnitude is found on the values' bits (|x| as unsigned integers orders
// as the floats do; NaNs, whose bits lie above infinity's, count as 0, as
// the twin's comparison never picks one), then the first value with those
// bits gives max with its sign. iscale = -127/max and d = 1/iscale by
// FDIV; a quant is nearestInt(iscale*x): FMUL, FADD of 1.5*2^23 (two
// roundings, as the twin), the mantissa bits less 2^22, min(127), and the
// low byte kept (UZP1 twice), as Go's int8() does; the sums of 16 by
// SADDLV on those bytes.
TEXT ·quantizeQ8KNEON(SB), NOSPLIT, $0-24
	MOVD x+0(FP), R0
	MOVD nb+8(FP), R1
	MOVD dst+16(FP), R2
	MOVW $0x7fffffff, R3
	VDUP R3, V31.S4
	MOVW $0x7f800000, R3
	VDUP R3, V30.S4
	MOVW $0x4b400000, R3           // 12582912.0
	VDUP R3, V27.S4
	MOVW $0x007fffff, R3
	VDUP R3, V26.S4
	MOVW $0x00400000, R3
	VDUP R3, V25.S4
	MOVW $127, R3
	VDUP R3, V24.S4
	CBZ R1, q8kdone

q8kblock:
	MOVD R0, R4
	VEOR V0.B16, V0.B16, V0.B16
	MOVD $16, R5

q8kmax:
	VLD1.P 64(R4), [V1.S4, V2.S4, V3.S4, V4.S4]
	VAND V31.B16, V1.B16, V1.B16
	VAND V31.B16, V2.B16, V2.B16
	VAND V31.B16, V3.B16, V3.B16
	VAND V31.B16, V4.B16, V4.B16
	WORD $0x6ebe3425 // CMHI V5.4S, V1.4S, V30.4S
	WORD $0x6ebe3446 // CMHI V6.4S, V2.4S, V30.4S
	WORD $0x6ebe3467 // CMHI V7.4S, V3.4S, V30.4S
	WORD $0x6ebe3488 // CMHI V8.4S, V4.4S, V30.4S
	WORD $0x4e651c21 // BIC V1.16B, V1.16B, V5.16B
	WORD $0x4e661c42 // BIC V2.16B, V2.16B, V6.16B
	WORD $0x4e671c63 // BIC V3.16B, V3.16B, V7.16B
	WORD $0x4e681c84 // BIC V4.16B, V4.16B, V8.16B
	WORD $0x6ea16400 // UMAX V0.4S, V0.4S, V1.4S
	WORD $0x6ea26400 // UMAX V0.4S, V0.4S, V2.4S
	WORD $0x6ea36400 // UMAX V0.4S, V0.4S, V3.4S
	WORD $0x6ea46400 // UMAX V0.4S, V0.4S, V4.4S
	SUB $1, R5, R5
	CBNZ R5, q8kmax
	WORD $0x6eb0a800 // UMAXV S0, V0.4S
	VMOV V0.S[0], R6
	CBZW R6, q8kzero

	// the first value with those bits, 16 at a time, then one by one
	VDUP R6, V29.S4
	MOVD R0, R4

q8kfind:
	VLD1.P 64(R4), [V1.S4, V2.S4, V3.S4, V4.S4]
	VAND V31.B16, V1.B16, V1.B16
	VAND V31.B16, V2.B16, V2.B16
	VAND V31.B16, V3.B16, V3.B16
	VAND V31.B16, V4.B16, V4.B16
	VCMEQ V29.S4, V1.S4, V1.S4
	VCMEQ V29.S4, V2.S4, V2.S4
	VCMEQ V29.S4, V3.S4, V3.S4
	VCMEQ V29.S4, V4.S4, V4.S4
	VORR V2.B16, V1.B16, V1.B16
	VORR V4.B16, V3.B16, V3.B16
	VORR V3.B16, V1.B16, V1.B16
	WORD $0x6eb0a821 // UMAXV S1, V1.4S
	VMOV V1.S[0], R7
	CBZW R7, q8kfind
	SUB $64, R4, R4

q8kscan:
	MOVWU.P 4(R4), R7
	ANDW $0x7fffffff, R7, R8
	CMPW R6, R8
	BNE q8kscan
	FMOVS -4(R4), F1               // max
	MOVW $0xc2fe0000, R3           // -127.0
	VDUP R3, V2.S4
	FDIVS F1, F2, F3               // iscale = -127/max
	FMOVS $1.0, F4
	FDIVS F3, F4, F5               // d = 1/iscale
	FMOVS F5, 288(R2)
	VDUP V3.S[0], V28.S4

	MOVD R0, R4
	MOVD R2, R9
	ADD $256, R2, R10
	MOVD $16, R5

q8kquant:
	VLD1.P 64(R4), [V1.S4, V2.S4, V3.S4, V4.S4]
	WORD $0x6e3cdc21 // FMUL V1.4S, V1.4S, V28.4S
	WORD $0x6e3cdc42 // FMUL V2.4S, V2.4S, V28.4S
	WORD $0x6e3cdc63 // FMUL V3.4S, V3.4S, V28.4S
	WORD $0x6e3cdc84 // FMUL V4.4S, V4.4S, V28.4S
	WORD $0x4e3bd421 // FADD V1.4S, V1.4S, V27.4S
	WORD $0x4e3bd442 // FADD V2.4S, V2.4S, V27.4S
	WORD $0x4e3bd463 // FADD V3.4S, V3.4S, V27.4S
	WORD $0x4e3bd484 // FADD V4.4S, V4.4S, V27.4S
	VAND V26.B16, V1.B16, V1.B16
	VAND V26.B16, V2.B16, V2.B16
	VAND V26.B16, V3.B16, V3.B16
	VAND V26.B16, V4.B16, V4.B16
	VSUB V25.S4, V1.S4, V1.S4
	VSUB V25.S4, V2.S4, V2.S4
	VSUB V25.S4, V3.S4, V3.S4
	VSUB V25.S4, V4.S4, V4.S4
	WORD $0x4eb86c21 // SMIN V1.4S, V1.4S, V24.4S
	WORD $0x4eb86c42 // SMIN V2.4S, V2.4S, V24.4S
	WORD $0x4eb86c63 // SMIN V3.4S, V3.4S, V24.4S
	WORD $0x4eb86c84 // SMIN V4.4S, V4.4S, V24.4S
	WORD $0x4e421825 // UZP1 V5.8H, V1.8H, V2.8H
	WORD $0x4e441866 // UZP1 V6.8H, V3.8H, V4.8H
	WORD $0x4e0618a7 // UZP1 V7.16B, V5.16B, V6.16B
	VST1.P [V7.B16], 16(R9)
	WORD $0x4e3038e8 // SADDLV H8, V7.16B
	VMOV V8.H[0], R7
	MOVH.P R7, 2(R10)
	SUB $1, R5, R5
	CBNZ R5, q8kquant
	B q8knext

q8kzero:
	// an all-zero block (or zeros and NaNs): zero quants, sums and scale
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	MOVD R2, R9
	MOVD $9, R5

q8kzloop:
	VST1.P [V1.B16, V2.B16], 32(R9)
	SUB $1, R5, R5
	CBNZ R5, q8kzloop
	MOVW ZR, (R9)

q8knext:
	ADD $1024, R0, R0
	ADD $292, R2, R2
	SUB $1, R1, R1
	CBNZ R1, q8kblock

q8kdone:
	RET

// func q4kLanesNEON(q *byte, x *int8, sc *int32, s *int32)
// q4kLanesGo: chunk j's low nibbles (q[32j..32j+32]) against
// x[64j..64j+32], its high nibbles against x[64j+32..64j+64]; SDOT gives
// lane l the four products of bytes 4l..4l+3 (lanes 0-3 from the first 16
// bytes, 4-7 from the next 16), MLA adds them times sc[2j] or sc[2j+1].
TEXT ·q4kLanesNEON(SB), NOSPLIT, $0-32
	MOVD q+0(FP), R0
	MOVD x+8(FP), R1
	MOVD sc+16(FP), R2
	MOVD s+24(FP), R3
	MOVW $0x0f0f0f0f, R4
	VDUP R4, V29.S4
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	MOVD $4, R5

q4klchunk:
	VLD1.P 32(R0), [V2.B16, V3.B16]
	VLD1.P 64(R1), [V4.B16, V5.B16, V6.B16, V7.B16]
	VLD1R.P 4(R2), [V20.S4]
	VLD1R.P 4(R2), [V21.S4]
	VAND V29.B16, V2.B16, V16.B16
	VAND V29.B16, V3.B16, V17.B16
	VUSHR $4, V2.B16, V18.B16
	VUSHR $4, V3.B16, V19.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	WORD $0x4e849608 // SDOT V8.4S, V16.16B, V4.16B
	WORD $0x4e859629 // SDOT V9.4S, V17.16B, V5.16B
	WORD $0x4e86964a // SDOT V10.4S, V18.16B, V6.16B
	WORD $0x4e87966b // SDOT V11.4S, V19.16B, V7.16B
	WORD $0x4eb49500 // MLA V0.4S, V8.4S, V20.4S
	WORD $0x4eb49521 // MLA V1.4S, V9.4S, V20.4S
	WORD $0x4eb59540 // MLA V0.4S, V10.4S, V21.4S
	WORD $0x4eb59561 // MLA V1.4S, V11.4S, V21.4S
	SUB $1, R5, R5
	CBNZ R5, q4klchunk
	VST1 [V0.S4, V1.S4], (R3)
	RET

// func q6kLanesNEON(ql, qh *byte, x *int8, scv *int32, s *int32)
// q6kLanesGo: for each half n, the four chunks' unsigned 6-bit values are
// built from ql's nibbles and qh's bit pairs (0..63, so SDOT's signed
// bytes hold them), dotted with their 32 activations and added times the
// chunk's scale vector scv[8c..8c+8] (MLA, lanes 0-3 and 4-7).
TEXT ·q6kLanesNEON(SB), NOSPLIT, $0-40
	MOVD ql+0(FP), R0
	MOVD qh+8(FP), R1
	MOVD x+16(FP), R2
	MOVD scv+24(FP), R3
	MOVD s+32(FP), R4
	MOVW $0x0f0f0f0f, R5
	VDUP R5, V29.S4
	MOVW $0x30303030, R5
	VDUP R5, V28.S4
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	MOVD $2, R5

q6klhalf:
	VLD1.P 64(R0), [V2.B16, V3.B16, V4.B16, V5.B16]
	VLD1.P 32(R1), [V6.B16, V7.B16]
	VLD1.P 64(R2), [V16.B16, V17.B16, V18.B16, V19.B16]
	VLD1.P 64(R2), [V20.B16, V21.B16, V22.B16, V23.B16]

	// chunk 0: ql[i]&0xF | (qh[i]&3)<<4
	VAND V29.B16, V2.B16, V8.B16
	VAND V29.B16, V3.B16, V9.B16
	VSHL $4, V6.B16, V10.B16
	VSHL $4, V7.B16, V11.B16
	VAND V28.B16, V10.B16, V10.B16
	VAND V28.B16, V11.B16, V11.B16
	VORR V10.B16, V8.B16, V8.B16
	VORR V11.B16, V9.B16, V9.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	WORD $0x4e90951a // SDOT V26.4S, V8.16B, V16.16B
	WORD $0x4e91953b // SDOT V27.4S, V9.16B, V17.16B
	VLD1.P 32(R3), [V24.S4, V25.S4]
	WORD $0x4eb89740 // MLA V0.4S, V26.4S, V24.4S
	WORD $0x4eb99761 // MLA V1.4S, V27.4S, V25.4S

	// chunk 1: ql[i+32]&0xF | (qh[i]>>2&3)<<4
	VAND V29.B16, V4.B16, V8.B16
	VAND V29.B16, V5.B16, V9.B16
	VSHL $2, V6.B16, V10.B16
	VSHL $2, V7.B16, V11.B16
	VAND V28.B16, V10.B16, V10.B16
	VAND V28.B16, V11.B16, V11.B16
	VORR V10.B16, V8.B16, V8.B16
	VORR V11.B16, V9.B16, V9.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	WORD $0x4e92951a // SDOT V26.4S, V8.16B, V18.16B
	WORD $0x4e93953b // SDOT V27.4S, V9.16B, V19.16B
	VLD1.P 32(R3), [V24.S4, V25.S4]
	WORD $0x4eb89740 // MLA V0.4S, V26.4S, V24.4S
	WORD $0x4eb99761 // MLA V1.4S, V27.4S, V25.4S

	// chunk 2: ql[i]>>4 | (qh[i]>>4&3)<<4
	VUSHR $4, V2.B16, V8.B16
	VUSHR $4, V3.B16, V9.B16
	VAND V28.B16, V6.B16, V10.B16
	VAND V28.B16, V7.B16, V11.B16
	VORR V10.B16, V8.B16, V8.B16
	VORR V11.B16, V9.B16, V9.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	WORD $0x4e94951a // SDOT V26.4S, V8.16B, V20.16B
	WORD $0x4e95953b // SDOT V27.4S, V9.16B, V21.16B
	VLD1.P 32(R3), [V24.S4, V25.S4]
	WORD $0x4eb89740 // MLA V0.4S, V26.4S, V24.4S
	WORD $0x4eb99761 // MLA V1.4S, V27.4S, V25.4S

	// chunk 3: ql[i+32]>>4 | (qh[i]>>6&3)<<4
	VUSHR $4, V4.B16, V8.B16
	VUSHR $4, V5.B16, V9.B16
	VUSHR $2, V6.B16, V10.B16
	VUSHR $2, V7.B16, V11.B16
	VAND V28.B16, V10.B16, V10.B16
	VAND V28.B16, V11.B16, V11.B16
	VORR V10.B16, V8.B16, V8.B16
	VORR V11.B16, V9.B16, V9.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	WORD $0x4e96951a // SDOT V26.4S, V8.16B, V22.16B
	WORD $0x4e97953b // SDOT V27.4S, V9.16B, V23.16B
	VLD1.P 32(R3), [V24.S4, V25.S4]
	WORD $0x4eb89740 // MLA V0.4S, V26.4S, V24.4S
	WORD $0x4eb99761 // MLA V1.4S, V27.4S, V25.4S

	SUB $1, R5, R5
	CBNZ R5, q6klhalf
	VST1 [V0.S4, V1.S4], (R4)
	RET

// func q4kStepNEON(q *byte, a *q8KAct, astride, n int, sm *uint32, dW, dminW float32, acc *float32)
// q4kStepGo: the block's 256 values unpacked once into V8-V23 in the
// activations' order (chunk j: low nibbles of q[32j..32j+32], then the
// high ones), then for each of the n activation blocks (astride bytes
// apart) sub-block c's 32 products by SDOT into T, summed times sc[c]
// (MUL/MLA by element) and across lanes (ADDV); the minimums' sum from
// the bsums' pairs (SADDLP) times mins; then acc[2v] = fma(float(sums),
// dW*a.d, acc[2v]) and acc[2v+1] = fma(float(s), dminW*a.d, acc[2v+1]),
// FMULS and FMADDS as the twin's fmaF.
TEXT ·q4kStepNEON(SB), NOSPLIT, $0-56
	MOVD q+0(FP), R0
	MOVD a+8(FP), R2
	MOVD astride+16(FP), R3
	MOVD n+24(FP), R4
	MOVD sm+32(FP), R5
	MOVD acc+48(FP), R6
	MOVW $0x0f0f0f0f, R7
	VDUP R7, V31.S4
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1 (R0), [V4.B16, V5.B16, V6.B16, V7.B16]
	VAND V31.B16, V0.B16, V8.B16
	VAND V31.B16, V1.B16, V9.B16
	VUSHR $4, V0.B16, V10.B16
	VUSHR $4, V1.B16, V11.B16
	VAND V31.B16, V2.B16, V12.B16
	VAND V31.B16, V3.B16, V13.B16
	VUSHR $4, V2.B16, V14.B16
	VUSHR $4, V3.B16, V15.B16
	VAND V31.B16, V4.B16, V16.B16
	VAND V31.B16, V5.B16, V17.B16
	VUSHR $4, V4.B16, V18.B16
	VUSHR $4, V5.B16, V19.B16
	VAND V31.B16, V6.B16, V20.B16
	VAND V31.B16, V7.B16, V21.B16
	VUSHR $4, V6.B16, V22.B16
	VUSHR $4, V7.B16, V23.B16
	// sc (bytes 0-7 of sm) and mins (8-15) as int32
	VLD1 (R5), [V24.B16]
	VUXTL V24.B8, V25.H8
	VUXTL V25.H4, V26.S4
	VUXTL2 V25.H8, V27.S4
	VUXTL2 V24.B16, V25.H8
	VUXTL V25.H4, V28.S4
	VUXTL2 V25.H8, V29.S4
	CBZ R4, q4ksdone

q4ksvec:
	MOVD R2, R1
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VLD1.P 32(R1), [V24.B16, V25.B16]
	VLD1.P 32(R1), [V30.B16, V31.B16]
	WORD $0x4e989500 // SDOT V0.4S, V8.16B, V24.16B
	WORD $0x4e999520 // SDOT V0.4S, V9.16B, V25.16B
	WORD $0x4e9e9541 // SDOT V1.4S, V10.16B, V30.16B
	WORD $0x4e9f9561 // SDOT V1.4S, V11.16B, V31.16B
	VLD1.P 32(R1), [V24.B16, V25.B16]
	VLD1.P 32(R1), [V30.B16, V31.B16]
	WORD $0x4e989582 // SDOT V2.4S, V12.16B, V24.16B
	WORD $0x4e9995a2 // SDOT V2.4S, V13.16B, V25.16B
	WORD $0x4e9e95c3 // SDOT V3.4S, V14.16B, V30.16B
	WORD $0x4e9f95e3 // SDOT V3.4S, V15.16B, V31.16B
	WORD $0x4f9a8004 // MUL V4.4S, V0.4S, V26.S[0]
	WORD $0x6fba0024 // MLA V4.4S, V1.4S, V26.S[1]
	WORD $0x6f9a0844 // MLA V4.4S, V2.4S, V26.S[2]
	WORD $0x6fba0864 // MLA V4.4S, V3.4S, V26.S[3]
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VLD1.P 32(R1), [V24.B16, V25.B16]
	VLD1.P 32(R1), [V30.B16, V31.B16]
	WORD $0x4e989600 // SDOT V0.4S, V16.16B, V24.16B
	WORD $0x4e999620 // SDOT V0.4S, V17.16B, V25.16B
	WORD $0x4e9e9641 // SDOT V1.4S, V18.16B, V30.16B
	WORD $0x4e9f9661 // SDOT V1.4S, V19.16B, V31.16B
	VLD1.P 32(R1), [V24.B16, V25.B16]
	VLD1.P 32(R1), [V30.B16, V31.B16]
	WORD $0x4e989682 // SDOT V2.4S, V20.16B, V24.16B
	WORD $0x4e9996a2 // SDOT V2.4S, V21.16B, V25.16B
	WORD $0x4e9e96c3 // SDOT V3.4S, V22.16B, V30.16B
	WORD $0x4e9f96e3 // SDOT V3.4S, V23.16B, V31.16B
	WORD $0x6f9b0004 // MLA V4.4S, V0.4S, V27.S[0]
	WORD $0x6fbb0024 // MLA V4.4S, V1.4S, V27.S[1]
	WORD $0x6f9b0844 // MLA V4.4S, V2.4S, V27.S[2]
	WORD $0x6fbb0864 // MLA V4.4S, V3.4S, V27.S[3]
	WORD $0x4eb1b884 // ADDV S4, V4.4S
	// the minimums: pairs of bsums (int32) times mins
	VLD1 (R1), [V5.H8, V6.H8]
	WORD $0x4e6028a5 // SADDLP V5.4S, V5.8H
	WORD $0x4e6028c6 // SADDLP V6.4S, V6.8H
	WORD $0x4ebc9ca5 // MUL V5.4S, V5.4S, V28.4S
	WORD $0x4ebd94c5 // MLA V5.4S, V6.4S, V29.4S
	WORD $0x4eb1b8a5 // ADDV S5, V5.4S
	FMOVS 32(R1), F24              // a.d
	FMOVS dW+40(FP), F7
	FMOVS dminW+44(FP), F6
	FMULS F24, F7, F7              // dW*a.d
	FMULS F24, F6, F6              // dminW*a.d
	WORD $0x5e21d884 // SCVTF S4, S4
	WORD $0x5e21d8a5 // SCVTF S5, S5
	FMOVS (R6), F0
	FMOVS 4(R6), F1
	FMADDS F7, F0, F4, F0          // acc[2v] = fma(float(sums), dW*a.d, acc[2v])
	FMADDS F6, F1, F5, F1          // acc[2v+1] = fma(float(s), dminW*a.d, acc[2v+1])
	FMOVS F0, (R6)
	FMOVS F1, 4(R6)
	ADD $8, R6, R6
	ADD R3, R2, R2
	SUB $1, R4, R4
	CBNZ R4, q4ksvec

q4ksdone:
	RET

// func q4kRowNEON(row *byte, act *q8KAct, nb int) float32
// dotQ4KRepacked for a whole row: per block the scales and mins by ggml's
// utmp shuffle in general registers (q4KScaleBytes), the scaled integer
// sum as q4kStepNEON's, the minimums' sum, then acc = fma(float(s),
// d*a.d, acc) and accMin = fma(float(sm), dmin*a.d, accMin); the result
// acc - accMin.
TEXT ·q4kRowNEON(SB), NOSPLIT, $0-28
	MOVD row+0(FP), R0
	MOVD act+8(FP), R1
	MOVD nb+16(FP), R2
	MOVW $0x0f0f0f0f, R3
	VDUP R3, V31.S4
	VEOR V30.B16, V30.B16, V30.B16 // acc
	VEOR V29.B16, V29.B16, V29.B16 // accMin
	MOVW $0x3f3f3f3f, R10
	MOVW $0x0f0f0f0f, R11
	MOVW $0x03030303, R12
	CBZ R2, q4krdone

q4krblock:
	FMOVS (R0), F8                 // d, dmin
	MOVWU 4(R0), R4                // u0
	MOVWU 8(R0), R5                // u1
	MOVWU 12(R0), R6               // u2
	ADD $16, R0, R0
	// sm0 = u0&kmask1, sm1 = u2&kmask2 | (u0>>6&kmask3)<<4 (the scales)
	ANDW R10, R4, R7
	ANDW R11, R6, R8
	LSRW $6, R4, R9
	ANDW R12, R9, R9
	ORRW R9<<4, R8, R8
	ORR R8<<32, R7, R7
	VMOV R7, V26.D[0]
	// sm2 = u1&kmask1, sm3 = u2>>4&kmask2 | (u1>>6&kmask3)<<4 (the mins)
	ANDW R10, R5, R7
	LSRW $4, R6, R8
	ANDW R11, R8, R8
	LSRW $6, R5, R9
	ANDW R12, R9, R9
	ORRW R9<<4, R8, R8
	ORR R8<<32, R7, R7
	VMOV R7, V28.D[0]
	VUXTL V26.B8, V26.H8
	VUXTL2 V26.H8, V27.S4
	VUXTL V26.H4, V26.S4
	VUXTL V28.B8, V28.H8
	VUXTL2 V28.H8, V15.S4
	VUXTL V28.H4, V28.S4

	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 64(R0), [V4.B16, V5.B16, V6.B16, V7.B16]
	VLD1.P 64(R1), [V20.B16, V21.B16, V22.B16, V23.B16]
	VAND V31.B16, V0.B16, V16.B16
	VAND V31.B16, V1.B16, V17.B16
	VUSHR $4, V0.B16, V18.B16
	VUSHR $4, V1.B16, V19.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	WORD $0x4e949618 // SDOT V24.4S, V16.16B, V20.16B
	WORD $0x4e959638 // SDOT V24.4S, V17.16B, V21.16B
	WORD $0x4e969659 // SDOT V25.4S, V18.16B, V22.16B
	WORD $0x4e979679 // SDOT V25.4S, V19.16B, V23.16B
	WORD $0x4f9a830e // MUL V14.4S, V24.4S, V26.S[0]
	WORD $0x6fba032e // MLA V14.4S, V25.4S, V26.S[1]
	VLD1.P 64(R1), [V20.B16, V21.B16, V22.B16, V23.B16]
	VAND V31.B16, V2.B16, V16.B16
	VAND V31.B16, V3.B16, V17.B16
	VUSHR $4, V2.B16, V18.B16
	VUSHR $4, V3.B16, V19.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	WORD $0x4e949618 // SDOT V24.4S, V16.16B, V20.16B
	WORD $0x4e959638 // SDOT V24.4S, V17.16B, V21.16B
	WORD $0x4e969659 // SDOT V25.4S, V18.16B, V22.16B
	WORD $0x4e979679 // SDOT V25.4S, V19.16B, V23.16B
	WORD $0x6f9a0b0e // MLA V14.4S, V24.4S, V26.S[2]
	WORD $0x6fba0b2e // MLA V14.4S, V25.4S, V26.S[3]
	VLD1.P 64(R1), [V20.B16, V21.B16, V22.B16, V23.B16]
	VAND V31.B16, V4.B16, V16.B16
	VAND V31.B16, V5.B16, V17.B16
	VUSHR $4, V4.B16, V18.B16
	VUSHR $4, V5.B16, V19.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	WORD $0x4e949618 // SDOT V24.4S, V16.16B, V20.16B
	WORD $0x4e959638 // SDOT V24.4S, V17.16B, V21.16B
	WORD $0x4e969659 // SDOT V25.4S, V18.16B, V22.16B
	WORD $0x4e979679 // SDOT V25.4S, V19.16B, V23.16B
	WORD $0x6f9b030e // MLA V14.4S, V24.4S, V27.S[0]
	WORD $0x6fbb032e // MLA V14.4S, V25.4S, V27.S[1]
	VLD1.P 64(R1), [V20.B16, V21.B16, V22.B16, V23.B16]
	VAND V31.B16, V6.B16, V16.B16
	VAND V31.B16, V7.B16, V17.B16
	VUSHR $4, V6.B16, V18.B16
	VUSHR $4, V7.B16, V19.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	WORD $0x4e949618 // SDOT V24.4S, V16.16B, V20.16B
	WORD $0x4e959638 // SDOT V24.4S, V17.16B, V21.16B
	WORD $0x4e969659 // SDOT V25.4S, V18.16B, V22.16B
	WORD $0x4e979679 // SDOT V25.4S, V19.16B, V23.16B
	WORD $0x6f9b0b0e // MLA V14.4S, V24.4S, V27.S[2]
	WORD $0x6fbb0b2e // MLA V14.4S, V25.4S, V27.S[3]
	WORD $0x4eb1b9ce // ADDV S14, V14.4S
	VLD1.P 32(R1), [V16.H8, V17.H8]
	WORD $0x4e602a10 // SADDLP V16.4S, V16.8H
	WORD $0x4e602a31 // SADDLP V17.4S, V17.8H
	WORD $0x4ebc9e10 // MUL V16.4S, V16.4S, V28.4S
	WORD $0x4eaf9630 // MLA V16.4S, V17.4S, V15.4S
	WORD $0x4eb1ba0d // ADDV S13, V16.4S
	FMOVS.P 4(R1), F10             // a.d
	WORD $0x0e217909               // FCVTL V9.4S, V8.4H
	VDUP V9.S[1], V12.S4           // dmin
	FMULS F10, F9, F11             // d*a.d
	FMULS F10, F12, F12            // dmin*a.d
	WORD $0x5e21d9ce // SCVTF S14, S14
	WORD $0x5e21d9ad // SCVTF S13, S13
	FMADDS F11, F30, F14, F30      // acc = fma(float(s), d*a.d, acc)
	FMADDS F12, F29, F13, F29      // accMin = fma(float(sm), dmin*a.d, accMin)
	SUB $1, R2, R2
	CBNZ R2, q4krblock

q4krdone:
	FSUBS F29, F30, F30
	FMOVS F30, ret+24(FP)
	RET
