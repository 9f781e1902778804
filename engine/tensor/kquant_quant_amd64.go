package tensor

//go:noescape
func quantizeQ8KAVX2(x *float32, nb int, dst *q8KAct)

// quantizeQ8K is quantizeQ8KGo, through the AVX2 kernel when there is one.
func quantizeQ8K(dst []q8KAct, src []float32) {
	if useSIMD && len(dst) > 0 {
		_ = src[len(dst)*qkK-1]
		quantizeQ8KAVX2(&src[0], len(dst), &dst[0])
		return
	}
	quantizeQ8KGo(dst, src)
}
