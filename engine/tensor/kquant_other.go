//go:build !amd64

package tensor

// No K-quant assembly on this architecture yet: the plain-Go cores.

func q4kLanes(q []byte, x *[qkK]int8, sc *[8]int32, s *[8]int32) { q4kLanesGo(q, x, sc, s) }

func q6kLanes(ql, qh []byte, x *[qkK]int8, scv *[64]int32, s *[8]int32) {
	q6kLanesGo(ql, qh, x, scv, s)
}

func q4kDots(q []byte, act []q8KAct, stride, n int, sc *[8]int16, out []int32) {
	q4kDotsGo(q, act, stride, n, sc, out)
}
