package tensor

import "unsafe"

// The AVX2 cores of kquant_amd64.s, chosen by useSIMD like the other
// kernels; their twins are q4kLanesGo and q6kLanesGo.

//go:noescape
func q4kLanesAVX2(q *byte, x *int8, sc *int32, s *int32)

//go:noescape
func q6kLanesAVX2(ql, qh *byte, x *int8, scv *int32, s *int32)

func q4kLanes(q []byte, x *[qkK]int8, sc *[8]int32, s *[8]int32) {
	if useSIMD {
		_ = q[127]
		q4kLanesAVX2(&q[0], &x[0], &sc[0], &s[0])
		return
	}
	q4kLanesGo(q, x, sc, s)
}

func q6kLanes(ql, qh []byte, x *[qkK]int8, scv *[64]int32, s *[8]int32) {
	if useSIMD {
		_, _ = ql[127], qh[63]
		q6kLanesAVX2(&ql[0], &qh[0], &x[0], &scv[0], &s[0])
		return
	}
	q6kLanesGo(ql, qh, x, scv, s)
}

//go:noescape
func q4kStepAVX2(q *byte, a *q8KAct, astride, n int, sm *uint32, scratch *int16, dW, dminW float32, acc *float32)

// q4kStep: see q4kStepGo.
func q4kStep(q []byte, act []q8KAct, stride, n int, sm *[4]uint32, dW, dminW float32, acc []float32) {
	if useSIMD && n > 0 {
		_, _, _ = q[127], act[(n-1)*stride], acc[2*n-1]
		var scratch [8]int16
		q4kStepAVX2(&q[0], &act[0], stride*int(unsafe.Sizeof(q8KAct{})), n, &sm[0], &scratch[0], dW, dminW, &acc[0])
		return
	}
	q4kStepGo(q, act, stride, n, sm, dW, dminW, acc)
}

//go:noescape
func q6kStepAVX2(ql, qh, sc *byte, a *q8KAct, astride, n int, scratch *int16, shuf *byte, dW float32, acc *float32)

// q6kStep: see q6kStepGo. scratch receives the chunks' scale vectors.
func q6kStep(ql, qh, sc []byte, act []q8KAct, stride, n int, scratch *[144]int16, dW float32, acc []float32) {
	if useSIMD && n > 0 {
		_, _, _, _, _ = ql[127], qh[63], sc[15], act[(n-1)*stride], acc[8*n-1]
		q6kStepAVX2(&ql[0], &qh[0], &sc[0], &act[0], stride*int(unsafe.Sizeof(q8KAct{})), n, &scratch[0], &q6kShuffle[0][0], dW, &acc[0])
		return
	}
	q6kStepGo(ql, qh, sc, act, stride, n, scratch, dW, acc)
}

// q6kShuffle are ggml's get_scale_shuffle masks: chunk c's two scales,
// eight bytes each.
var q6kShuffle = func() (m [8][16]byte) {
	for c := range m {
		for k := 0; k < 8; k++ {
			m[c][k], m[c][8+k] = byte(2*c), byte(2*c+1)
		}
	}
	return m
}()

//go:noescape
func legacyRowRepackedAVX2(row *byte, act *q8Act, nb int, lut *int8) float32

// q4_0Levels are Q4_0's sixteen values, n-8, as a nibble lookup table.
var q4_0Levels = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

// dotLegacyRepackedRow is dotLegacyRepacked, through the AVX2 kernel
// when there is one.
func dotLegacyRepackedRow(t DType, row []byte, act []q8Act) float32 {
	nb := len(row) / q4_0Bytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		lut := &q4_0Levels
		if t == IQ4_NL {
			lut = &kvaluesIQ4NL
		}
		return legacyRowRepackedAVX2(&row[0], &act[0], nb, &lut[0])
	}
	return dotLegacyRepacked(t, row, act)
}

// legacyRepackedRows computes rows [lo,hi) of a repacked Q4_0 or IQ4_NL
// product for all vectors: eight rows at a time in a register tile
// (legacyTile), each block unpacked once for all vectors, with
// dotLegacyRepacked's bits. The eight rows of a tile are an eighth of the
// range apart, so that the weights are read as eight sequential streams
// far apart (streamQuarter's reason: adjacent rows read together stream
// from memory at half the speed here). Rows past the last eight go row
// by row. Without AVX2 it leaves the rows to the caller.
func (j *mmJob) legacyRepackedRows(worker, lo, hi int) bool {
	m, n := j.m, j.n
	if !useSIMD {
		return false
	}
	nb, rb := m.Cols/q8Block, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 8*n)
	q := (hi - lo) / 8
	for g := 0; g < q; g++ {
		r := lo + g
		clear(acc)
		legacyTile(m.Type, m.Data[r*rb:(r+7*q+1)*rb], q*rb, j.actQ, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			for k := 0; k < 8; k++ {
				j.dst[v*m.Rows+r+k*q] = acc[8*v+k]
			}
		}
	}
	for r := lo + 8*q; r < hi; r++ {
		row := m.Data[r*rb : (r+1)*rb]
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dotLegacyRepackedRow(m.Type, row, j.actQ[v*nb:(v+1)*nb])
		}
	}
	return true
}

//go:noescape
func q4kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16) float32

// dotQ4KRepackedRow is dotQ4KRepacked, through the AVX2 row kernel when
// there is one.
func dotQ4KRepackedRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q4KBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var scratch [8]int16
		return q4kRowAVX2(&row[0], &act[0], nb, &scratch[0])
	}
	return dotQ4KRepacked(row, act)
}

//go:noescape
func q6kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, shuf *byte, acc *float32)

// dotQ6KRow is dotQ6K, through the AVX2 row kernel when there is one.
func dotQ6KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q6KBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var scratch [144]int16
		var acc laneAcc
		q6kRowAVX2(&row[0], &act[0], nb, &scratch[0], &q6kShuffle[0][0], &acc[0])
		return acc.sum()
	}
	return dotQ6K(row, act)
}

//go:noescape
func q5kRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, out *float32)

// dotQ5KRow is dotQ5K, through the AVX2 row kernel when there is one.
func dotQ5KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q5KBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var scratch [8]int16
		var out [9]float32
		q5kRowAVX2(&row[0], &act[0], nb, &scratch[0], &out[0])
		return (*laneAcc)(out[:8]).sum() + out[8]
	}
	return dotQ5K(row, act)
}

//go:noescape
func iq4xsRowAVX2(row *byte, act *q8KAct, nb int, scratch *int16, lut *int8, acc *float32)

// dotIQ4XSRow is dotIQ4XS, through the AVX2 row kernel when there is one.
func dotIQ4XSRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / iq4XSBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var scratch [8]int16
		var acc laneAcc
		iq4xsRowAVX2(&row[0], &act[0], nb, &scratch[0], &kvaluesIQ4NL[0], &acc[0])
		return acc.sum()
	}
	return dotIQ4XS(row, act)
}
