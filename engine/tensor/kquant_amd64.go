package tensor

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
