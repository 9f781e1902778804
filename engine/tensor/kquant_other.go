//go:build !amd64

package tensor

// The K-quant hooks that have no kernel on this architecture: the
// plain-Go cores (kquant_generic.go has those that arm64 has kernels for).

func (j *mmJob) legacyRepackedRows(worker, lo, hi int) bool { return false }

func q4kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, rbuf []int32, acc []float32) {
	q4kTileGo(w, rb, act, astride, nb, n, acc)
}

// useTile512: no AVX-512 tiles on this architecture.
const useTile512 = false

func q6kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	q6kTileGo(w, rb, act, astride, nb, n, acc)
}
