//go:build !amd64

package tensor

// The tiles of kquant_tile2_amd64.s have no kernel on this architecture
// (useTile512 is false, so MatMul does not call them): their Go twins.

func q5_0Tile(w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	q5_0TileGo(w, rb, act, astride, nb, n, acc)
}

func q3kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	q3kTileGo(w, rb, act, astride, nb, n, acc)
}

func iq4xsTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	iq4xsTileGo(w, rb, act, astride, nb, n, acc)
}

func q8_1Tile(t DType, w []byte, rb int, act []q8Act, s []float32, astride, nb, n int, acc []float32) {
	q8_1TileGo(t, w, rb, act, s, astride, nb, n, acc)
}
