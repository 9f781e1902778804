//go:build !amd64 && !arm64

package tensor

// The K-quant hooks that amd64 (kquant_amd64.go and its neighbours) and
// arm64 (kquant_arm64.go) give kernels: the plain-Go cores elsewhere.
// kquant_other.go has the rest.

func q4kLanes(q []byte, x *[qkK]int8, sc *[8]int32, s *[8]int32) { q4kLanesGo(q, x, sc, s) }

func q6kLanes(ql, qh []byte, x *[qkK]int8, scv *[64]int32, s *[8]int32) {
	q6kLanesGo(ql, qh, x, scv, s)
}

func q4kStep(q []byte, act []q8KAct, stride, n int, sm *[4]uint32, dW, dminW float32, acc []float32) {
	q4kStepGo(q, act, stride, n, sm, dW, dminW, acc)
}

func q6kStep(ql, qh, sc []byte, act []q8KAct, stride, n int, scratch *[144]int16, dW float32, acc []float32) {
	q6kStepGo(ql, qh, sc, act, stride, n, scratch, dW, acc)
}

func dotQ4KRepackedRow(row []byte, act []q8KAct) float32 { return dotQ4KRepacked(row, act) }

func dotQ6KRow(row []byte, act []q8KAct) float32 { return dotQ6K(row, act) }

func dotQ5KRow(row []byte, act []q8KAct) float32 { return dotQ5K(row, act) }

func quantizeQ8K(dst []q8KAct, src []float32) { quantizeQ8KGo(dst, src) }

func dotLegacyRepackedRow(t DType, row []byte, act []q8Act) float32 {
	return dotLegacyRepacked(t, row, act)
}

func dotLegacyQ8Row(t DType, row []byte, act []q8Act) float32 { return dotLegacyQ8(t, row, act) }

func dotIQ4XSRow(row []byte, act []q8KAct) float32 { return dotIQ4XS(row, act) }

func dotQ2KRow(row []byte, act []q8KAct) float32 { return dotQ2K(row, act) }

func dotQ3KRow(row []byte, act []q8KAct) float32 { return dotQ3K(row, act) }

func dotLegacyQ8_1Row(t DType, row []byte, act []q8Act, s []float32) float32 {
	return dotLegacyQ8_1(t, row, act, s)
}

func q5kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	q5kTileGo(w, rb, act, astride, nb, n, acc)
}

func q2kTile(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	q2kTileGo(w, rb, act, astride, nb, n, acc)
}
