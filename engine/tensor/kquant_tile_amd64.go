package tensor

import "unsafe"

//go:noescape
func legacyTileAVX512(w *byte, rb int, act *q8Act, astride, nb, n int, lut *byte, bias int, acc *float32)

// The Q4_0 and IQ4_NL levels plus a bias that makes them unsigned bytes,
// for VPDPBUSD (legacyTileAVX512).
var q4_0Biased, iq4NLBiased = func() (q, iq [16]byte) {
	for i := range q {
		q[i], iq[i] = byte(q4_0Levels[i]+8), byte(int(kvaluesIQ4NL[i])+128)
	}
	return q, iq
}()

//go:noescape
func legacyTileAVX2(w *byte, rb int, act *q8Act, astride, nb, n int, lut *int8, scratch *byte, acc *float32)

// legacyTile: see legacyTileGo.
func legacyTile(t DType, w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		legacyTileGo(t, w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[7*rb+nb*q4_0Bytes-1], act[(n-1)*astride+nb-1], acc[8*n-1]
	lut := &q4_0Levels
	if t == IQ4_NL {
		lut = &kvaluesIQ4NL
	}
	if useTile512 {
		biased, bias := &q4_0Biased, 8
		if t == IQ4_NL {
			biased, bias = &iq4NLBiased, 128
		}
		legacyTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8Act{})), nb, n, &biased[0], bias, &acc[0])
		return
	}
	var scratch [288]byte
	legacyTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8Act{})), nb, n, &lut[0], &scratch[0], &acc[0])
}

//go:noescape
func q4kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, rbuf *byte, acc *float32)

// useTile512 runs the AVX-512 (BW, VNNI) forms of the tiles where the CPU
// has them; tests turn it off to run the AVX2 forms too. Both give the
// same bits.
var useTile512 = hasAVX512VNNI

//go:noescape
func q4kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, rbuf *byte, acc *float32)

// q4kTile: see q4kTileGo. rbuf is the kernel's scratch, 64*n int32.
func q4kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, rbuf []int32, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q4kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _, _ = w[7*rb+nb*q4KBytes-1], act[(n-1)*astride+nb-1], acc[16*n-1], rbuf[64*n-1]
	var scratch [672]byte
	if useTile512 {
		q4kTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], (*byte)(unsafe.Pointer(&rbuf[0])), &acc[0])
		return
	}
	q4kTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], (*byte)(unsafe.Pointer(&rbuf[0])), &acc[0])
}

//go:noescape
func q6kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

// q6kTile: see q6kTileGo. It runs only where useTile512 is set (the
// callers check): AVX2's sixteen registers do not hold a row pair.
func q6kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useTile512 || nb == 0 || n == 0 {
		q6kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[rb+nb*q6KBytes-1], act[(n-1)*astride+nb-1], acc[16*n-1]
	var scratch [576]byte
	q6kTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
}

//go:noescape
func q5kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

//go:noescape
func q5kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

// q5kTile: see q5kTileGo. Without AVX-512 its AVX2 form runs
// (kquant_tile2_amd64.s).
func q5kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q5kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[rb+nb*q5KBytes-1], act[(n-1)*astride+nb-1], acc[32*n-1]
	var scratch [1184]byte
	if useTile512 {
		q5kTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
		return
	}
	q5kTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
}

//go:noescape
func q2kRowAVX2(row *byte, act *q8KAct, nb int, acc *float32)

// dotQ2KRow is dotQ2K, through the AVX2 row kernel when there is one.
func dotQ2KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q2KBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		q2kRowAVX2(&row[0], &act[0], nb, &acc[0])
		return acc.sum()
	}
	return dotQ2K(row, act)
}

//go:noescape
func q3kRowAVX2(row *byte, act *q8KAct, nb int, acc *float32)

// dotQ3KRow is dotQ3K, through the AVX2 row kernel when there is one.
func dotQ3KRow(row []byte, act []q8KAct) float32 {
	nb := len(row) / q3KBytes
	if useSIMD && nb > 0 {
		_ = act[nb-1]
		var acc laneAcc
		q3kRowAVX2(&row[0], &act[0], nb, &acc[0])
		return acc.sum()
	}
	return dotQ3K(row, act)
}

//go:noescape
func legacyRowQ4_0AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)

//go:noescape
func legacyRowQ5_0AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)

//go:noescape
func legacyRowQ4_1AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)

//go:noescape
func legacyRowQ5_1AVX2(row *byte, act *q8Act, s *float32, nb int, out *float32)

// dotLegacyQ8Row is dotLegacyQ8 (Q4_0, Q5_0), through the AVX2 row
// kernels when there are some.
func dotLegacyQ8Row(t DType, row []byte, act []q8Act) float32 {
	nb := len(row) / t.BlockBytes()
	if !useSIMD || nb == 0 {
		return dotLegacyQ8(t, row, act)
	}
	_ = act[nb-1]
	var out [9]float32
	if t == Q4_0 {
		legacyRowQ4_0AVX2(&row[0], &act[0], nil, nb, &out[0])
	} else {
		legacyRowQ5_0AVX2(&row[0], &act[0], nil, nb, &out[0])
	}
	return (*laneAcc)(out[:8]).sum()
}

// dotLegacyQ8_1Row is dotLegacyQ8_1 (Q4_1, Q5_1), through the AVX2 row
// kernels when there are some.
func dotLegacyQ8_1Row(t DType, row []byte, act []q8Act, s []float32) float32 {
	nb := len(row) / t.BlockBytes()
	if !useSIMD || nb == 0 {
		return dotLegacyQ8_1(t, row, act, s)
	}
	_, _ = act[nb-1], s[nb-1]
	var out [9]float32
	if t == Q4_1 {
		legacyRowQ4_1AVX2(&row[0], &act[0], &s[0], nb, &out[0])
	} else {
		legacyRowQ5_1AVX2(&row[0], &act[0], &s[0], nb, &out[0])
	}
	return (*laneAcc)(out[:8]).sum() + out[8]
}

//go:noescape
func q2kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

//go:noescape
func q2kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

// q2kTile: see q2kTileGo. Without AVX-512 its AVX2 form runs
// (kquant_tile2_amd64.s).
func q2kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q2kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[rb+nb*q2KBytes-1], act[(n-1)*astride+nb-1], acc[16*n-1]
	var scratch [1248]byte
	if useTile512 {
		q2kTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
		return
	}
	q2kTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
}
