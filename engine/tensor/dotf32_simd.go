//go:build amd64 || arm64

package tensor

// dotF32SIMD is dotF32 with the whole blocks in dotF32Lanes (AVX2 on
// amd64, NEON on arm64). The hardware fma is exact everywhere; dotF32's
// emulation is exact except for a tie on the F32 subnormal grid (both the
// lane and the product below 2^-125, see midpoint), where this one is the
// one that matches ggml.
func dotF32SIMD(w, x []float32) float32 {
	x = x[:len(w)]
	var l [8]float32
	nb := len(w) / 8
	if nb > 0 {
		dotF32Lanes(&w[0], &x[0], nb, &l)
	}
	for i, k := 8*nb, 0; i < len(w); i, k = i+1, k+1 {
		l[k] = fma32(w[i], x[i], l[k])
	}
	return hsum8(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
}
