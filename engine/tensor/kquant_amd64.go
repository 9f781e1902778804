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
func q4kDotsAVX2(q *byte, x *int8, xstride, n int, sc *int16, out *int32)

// q4kDots: see q4kDotsGo.
func q4kDots(q []byte, act []q8KAct, stride, n int, sc *[8]int16, out []int32) {
	if useSIMD && n > 0 {
		_, _, _ = q[127], act[(n-1)*stride], out[n-1]
		q4kDotsAVX2(&q[0], &act[0].q[0], stride*int(unsafe.Sizeof(q8KAct{})), n, &sc[0], &out[0])
		return
	}
	q4kDotsGo(q, act, stride, n, sc, out)
}
