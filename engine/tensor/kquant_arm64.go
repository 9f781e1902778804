package tensor

import "unsafe"

// The K-quant kernels of kquant_arm64.s: Q8_K quantization in plain NEON
// (every arm64 CPU has it), the integer cores in SDOT where the CPU has
// the dot-product extension (useNEONDot), else the twins. Each gives its
// twin's bits (kquant_arm64_test.go): quantizeQ8KGo, q4kLanesGo,
// q6kLanesGo, q4kStepGo, dotQ4KRepacked, q6kStepGo, dotQ6K, dotQ5K,
// dotLegacyRepacked, dotLegacyQ8, dotLegacyQ8_1, dotIQ4XS, dotQ2K, dotQ3K,
// q5kTileGo, q2kTileGo.

//go:noescape
func quantizeQ8KNEON(x *float32, nb int, dst *q8KAct)

//go:noescape
func q4kLanesNEON(q *byte, x *int8, sc *int32, s *int32)

//go:noescape
func q6kLanesNEON(ql, qh *byte, x *int8, scv *int32, s *int32)

// quantizeQ8K is quantizeQ8KGo in quantizeQ8KNEON.
func quantizeQ8K(dst []q8KAct, src []float32) {
	if len(dst) == 0 {
		return
	}
	_ = src[len(dst)*qkK-1]
	quantizeQ8KNEON(&src[0], len(dst), &dst[0])
}

func q4kLanes(q []byte, x *[qkK]int8, sc *[8]int32, s *[8]int32) {
	if useNEONDot {
		_ = q[127]
		q4kLanesNEON(&q[0], &x[0], &sc[0], &s[0])
		return
	}
	q4kLanesGo(q, x, sc, s)
}

func q6kLanes(ql, qh []byte, x *[qkK]int8, scv *[64]int32, s *[8]int32) {
	if useNEONDot {
		_, _ = ql[127], qh[63]
		q6kLanesNEON(&ql[0], &qh[0], &x[0], &scv[0], &s[0])
		return
	}
	q6kLanesGo(ql, qh, x, scv, s)
}

//go:noescape
func q4kStepNEON(q *byte, a *q8KAct, astride, n int, sm *uint32, dW, dminW float32, acc *float32)

//go:noescape
func q4kRowNEON(row *byte, act *q8KAct, nb int) float32

// q4kStep: see q4kStepGo.
func q4kStep(q []byte, act []q8KAct, stride, n int, sm *[4]uint32, dW, dminW float32, acc []float32) {
	if useNEONDot && n > 0 {
		_, _, _ = q[127], act[(n-1)*stride], acc[2*n-1]
		q4kStepNEON(&q[0], &act[0], stride*int(unsafe.Sizeof(q8KAct{})), n, &sm[0], dW, dminW, &acc[0])
		return
	}
	q4kStepGo(q, act, stride, n, sm, dW, dminW, acc)
}

//go:noescape
func q6kStepNEON(ql, qh, sc *byte, a *q8KAct, astride, n int, dW float32, acc *float32)

//go:noescape
func q6kRowNEON(row *byte, act *q8KAct, nb int, acc *float32)

// q6kStep: see q6kStepGo.
func q6kStep(ql, qh, sc []byte, act []q8KAct, stride, n int, scratch *[144]int16, dW float32, acc []float32) {
	if useNEONDot && n > 0 {
		_, _, _, _, _ = ql[127], qh[63], sc[15], act[(n-1)*stride], acc[8*n-1]
		q6kStepNEON(&ql[0], &qh[0], &sc[0], &act[0], stride*int(unsafe.Sizeof(q8KAct{})), n, dW, &acc[0])
		return
	}
	q6kStepGo(ql, qh, sc, act, stride, n, scratch, dW, acc)
}

// dotQ4KRepackedRow is dotQ4KRepacked, in q4kRowNEON where the CPU has
// SDOT.
func dotQ4KRepackedRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q4KBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		return q4kRowNEON(&row[0], &act[0], nb)
	}
	return dotQ4KRepacked(row, act)
}

// dotQ6KRow is dotQ6K, in q6kRowNEON where the CPU has SDOT.
func dotQ6KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q6KBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		q6kRowNEON(&row[0], &act[0], nb, &acc[0])
		return acc.sum()
	}
	return dotQ6K(row, act)
}

//go:noescape
func q5kRowNEON(row *byte, act *q8KAct, nb int, out *float32)

// dotQ5KRow is dotQ5K, in q5kRowNEON where the CPU has SDOT.
func dotQ5KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q5KBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		var out [9]float32
		q5kRowNEON(&row[0], &act[0], nb, &out[0])
		return (*laneAcc)(out[:8]).sum() + out[8]
	}
	return dotQ5K(row, act)
}

// The kernels read q8KAct as 256 quants, 16 int16 sums, the F32 scale.
var (
	_ [unsafe.Sizeof(q8KAct{}) - 292]byte
	_ [292 - unsafe.Sizeof(q8KAct{})]byte
	_ [unsafe.Offsetof(q8KAct{}.bsums) - 256]byte
	_ [unsafe.Offsetof(q8KAct{}.d) - 288]byte
	_ [288 - unsafe.Offsetof(q8KAct{}.d)]byte
)

//go:noescape
func legacyRowRepackedNEON(row *byte, act *q8Act, nb int, lut *int8) float32

//go:noescape
func legacyRowQ8NEON(row *byte, act *q8Act, nb int, five bool, lanes *float32)

// q4_0LevelsNEON are Q4_0's sixteen values, n-8, as a TBL table.
var q4_0LevelsNEON = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

// dotLegacyRepackedRow is dotLegacyRepacked (Q4_0, IQ4_NL), in
// legacyRowRepackedNEON where the CPU has SDOT.
func dotLegacyRepackedRow(t DType, row []byte, act []q8Act) float32 {
	nb := len(row) / q4_0Bytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		lut := &q4_0LevelsNEON
		if t == IQ4_NL {
			lut = &kvaluesIQ4NL
		}
		return legacyRowRepackedNEON(&row[0], &act[0], nb, &lut[0])
	}
	return dotLegacyRepacked(t, row, act)
}

// dotLegacyQ8Row is dotLegacyQ8 (Q4_0, Q5_0), in legacyRowQ8NEON where
// the CPU has SDOT.
func dotLegacyQ8Row(t DType, row []byte, act []q8Act) float32 {
	bb := t.BlockBytes()
	nb := len(row) / bb
	if useNEONDot && nb > 0 && (t == Q4_0 || t == Q5_0) {
		_ = act[nb-1]
		var acc laneAcc
		legacyRowQ8NEON(&row[0], &act[0], nb, t == Q5_0, &acc[0])
		return acc.sum()
	}
	return dotLegacyQ8(t, row, act)
}

//go:noescape
func iq4xsRowNEON(row *byte, act *q8KAct, nb int, lut *int8, lanes *float32)

// dotIQ4XSRow is dotIQ4XS, in iq4xsRowNEON where the CPU has SDOT.
func dotIQ4XSRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / iq4XSBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		iq4xsRowNEON(&row[0], &act[0], nb, &kvaluesIQ4NL[0], &acc[0])
		return acc.sum()
	}
	return dotIQ4XS(row, act)
}

//go:noescape
func q2kRowNEON(row *byte, act *q8KAct, nb int, lanes *float32)

//go:noescape
func q3kRowNEON(row *byte, act *q8KAct, nb int, lanes *float32)

// dotQ2KRow is dotQ2K, in q2kRowNEON where the CPU has SDOT.
func dotQ2KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q2KBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		q2kRowNEON(&row[0], &act[0], nb, &acc[0])
		return acc.sum()
	}
	return dotQ2K(row, act)
}

// dotQ3KRow is dotQ3K, in q3kRowNEON where the CPU has SDOT.
func dotQ3KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q3KBytes
	if useNEONDot && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		q3kRowNEON(&row[0], &act[0], nb, &acc[0])
		return acc.sum()
	}
	return dotQ3K(row, act)
}

//go:noescape
func legacyRowQ8_1NEON(row *byte, act *q8Act, s *float32, nb int, five bool, out *float32)

// dotLegacyQ8_1Row is dotLegacyQ8_1 (Q4_1, Q5_1), in legacyRowQ8_1NEON
// where the CPU has SDOT.
func dotLegacyQ8_1Row(t DType, row []byte, act []q8Act, s []float32) float32 {
	nb := len(row) / t.BlockBytes()
	if useNEONDot && nb > 0 && (t == Q4_1 || t == Q5_1) {
		_, _ = act[nb-1], s[nb-1]
		var out [9]float32
		legacyRowQ8_1NEON(&row[0], &act[0], &s[0], nb, t == Q5_1, &out[0])
		return (*laneAcc)(out[:8]).sum() + out[8]
	}
	return dotLegacyQ8_1(t, row, act, s)
}

//go:noescape
func q5kStepNEON(blk *byte, a *q8KAct, astride, n int, lanes, summs *float32, accStride int)

// q5kTile is q5kTileGo (two Q5_K rows against n vectors), each block of
// each row decoded once for all vectors by q5kStepNEON where the CPU has
// SDOT; MatMul's q5KRows takes it for passes of several vectors.
func q5kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useNEONDot || nb == 0 || n == 0 {
		q5kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _ = act[(n-1)*astride+nb-1], acc[32*n-1]
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q5KBytes]
		for b := 0; b < nb; b++ {
			q5kStepNEON(&row[b*q5KBytes], &act[b], astride*int(unsafe.Sizeof(q8KAct{})), n, &acc[8*h], &acc[16+4*h], 32*4)
		}
	}
}

//go:noescape
func q2kStepNEON(blk *byte, a *q8KAct, astride, n int, lanes *float32, accStride int)

// q2kTile is q2kTileGo (two Q2_K rows against n vectors), each block of
// each row decoded once for all vectors by q2kStepNEON where the CPU has
// SDOT; MatMul's q2KRows takes it for passes of several vectors.
func q2kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useNEONDot || nb == 0 || n == 0 {
		q2kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _ = act[(n-1)*astride+nb-1], acc[16*n-1]
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q2KBytes]
		for b := 0; b < nb; b++ {
			q2kStepNEON(&row[b*q2KBytes], &act[b], astride*int(unsafe.Sizeof(q8KAct{})), n, &acc[8*h], 16*4)
		}
	}
}
