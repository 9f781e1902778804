package tensor

import "unsafe"

// The tiles of kquant_tile2_amd64.s, each in an AVX-512 VNNI form (where
// useTile512 is set) and an AVX2 one (the AVX2 forms of the Q2_K and Q5_K
// tiles are there too; their wrappers are in kquant_tile_amd64.go).

//go:noescape
func q5_0TileAVX512(w *byte, rb int, act *q8Act, astride, nb, n int, acc *float32)

//go:noescape
func q5_0TileAVX2(w *byte, rb int, act *q8Act, astride, nb, n int, scratch *byte, acc *float32)

// q5_0Tile: see q5_0TileGo. Unlike the others of this file it has an
// AVX2 form, which runs where useTile512 is not set.
func q5_0Tile(w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q5_0TileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[3*rb+nb*q5_0Bytes-1], act[(n-1)*astride+nb-1], acc[32*n-1]
	if useTile512 {
		q5_0TileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8Act{})), nb, n, &acc[0])
		return
	}
	var scratch [128]byte
	q5_0TileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8Act{})), nb, n, &scratch[0], &acc[0])
}

//go:noescape
func q3kTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

//go:noescape
func q3kTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

// q3kTile: see q3kTileGo. The AVX2 form runs where useTile512 is not set.
func q3kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q3kTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[rb+nb*q3KBytes-1], act[(n-1)*astride+nb-1], acc[16*n-1]
	if useTile512 {
		q3kTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, nil, &acc[0])
		return
	}
	var scratch [1120]byte
	q3kTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
}

//go:noescape
func iq4xsTileAVX512(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

//go:noescape
func iq4xsTileAVX2(w *byte, rb int, act *q8KAct, astride, nb, n int, scratch *byte, acc *float32)

// iq4xsTile: see iq4xsTileGo. The AVX2 form runs where useTile512 is not
// set.
func iq4xsTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		iq4xsTileGo(w, rb, act, astride, nb, n, acc)
		return
	}
	_, _, _ = w[rb+nb*iq4XSBytes-1], act[(n-1)*astride+nb-1], acc[16*n-1]
	var scratch [1120]byte
	if useTile512 {
		iq4xsTileAVX512(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
		return
	}
	iq4xsTileAVX2(&w[0], rb, &act[0], astride*int(unsafe.Sizeof(q8KAct{})), nb, n, &scratch[0], &acc[0])
}

//go:noescape
func q4_1TileAVX512(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, acc *float32)

//go:noescape
func q5_1TileAVX512(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, acc *float32)

//go:noescape
func q4_1TileAVX2(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, scratch *byte, acc *float32)

//go:noescape
func q5_1TileAVX2(w *byte, rb int, act *q8Act, s *float32, astride, nb, n int, scratch *byte, acc *float32)

// q8_1Tile: see q8_1TileGo (t: Q4_1 or Q5_1). The AVX2 forms run where
// useTile512 is not set.
func q8_1Tile(t DType, w []byte, rb int, act []q8Act, s []float32, astride, nb, n int, acc []float32) {
	if !useSIMD || nb == 0 || n == 0 {
		q8_1TileGo(t, w, rb, act, s, astride, nb, n, acc)
		return
	}
	_, _, _, _ = w[3*rb+nb*t.BlockBytes()-1], act[(n-1)*astride+nb-1], s[(n-1)*astride+nb-1], acc[36*n-1]
	switch {
	case useTile512 && t == Q4_1:
		q4_1TileAVX512(&w[0], rb, &act[0], &s[0], astride, nb, n, &acc[0])
	case useTile512:
		q5_1TileAVX512(&w[0], rb, &act[0], &s[0], astride, nb, n, &acc[0])
	default:
		var scratch [128]byte
		if t == Q4_1 {
			q4_1TileAVX2(&w[0], rb, &act[0], &s[0], astride, nb, n, &scratch[0], &acc[0])
		} else {
			q5_1TileAVX2(&w[0], rb, &act[0], &s[0], astride, nb, n, &scratch[0], &acc[0])
		}
	}
}
