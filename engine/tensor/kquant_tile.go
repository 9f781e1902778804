package tensor

// Register tiles for the repacked block types: eight rows against each
// vector at once (llama.cpp's repacked gemv and gemm keep eight rows in
// the lanes of one register), each (row, vector) in the arithmetic of its
// one-row function, so that the bits do not depend on the tile. The
// kernels are in kquant_tile_amd64.s; the plain-Go functions below are
// their twins.

// legacyTileGo is eight rows of a repacked Q4_0 or IQ4_NL matrix (w: the
// first row's nb blocks, rows rb bytes apart) against n vectors' Q8_0
// blocks (act[v*astride:]), each acc[8v+r] stepping block by block as
// dotLegacyRepacked's acc does. The twin of legacyTileAVX2.
func legacyTileGo(t DType, w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	var lv [32]int8
	for r := 0; r < 8; r++ {
		row := w[r*rb : r*rb+nb*q4_0Bytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q4_0Bytes : (b+1)*q4_0Bytes]
			unpackLegacy(t, &lv, blk)
			dw := f16At(blk)
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				var s int32
				for j := range lv {
					s += int32(lv[j]) * int32(a.q[j])
				}
				acc[8*v+r] = fmaF(float32(s), dw*a.d, acc[8*v+r])
			}
		}
	}
}
