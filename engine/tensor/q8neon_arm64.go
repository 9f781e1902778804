package tensor

import "unsafe"

// Q8_0 and NVFP4 W4A8 products on arm64 (q8neon_arm64.s), for CPUs with
// SDOT (useNEONDot). Each kernel runs whole blocks into the twin's eight
// lanes (dotQ8, dotNVFP4Q8), which are added here by hsum8 as the twins
// do; the lane steps are the exact fused multiply-adds the twins emulate,
// so the results are the twins' bit for bit (q8neon_arm64_test.go).

//go:noescape
func dotQ8LanesNEON(row *byte, act *q8Act, nblk int, lanes *[8]float32)

//go:noescape
func dotNVFP4Q8LanesNEON(row *byte, act *q8Act, nblk int, lanes *[8]float32)

// dotQ8NEON is dotQ8 in dotQ8LanesNEON.
func dotQ8NEON(row []byte, act []q8Act) float32 {
	nb := len(row) / q8BlockBytes
	act = act[:nb]
	var l [8]float32
	if nb > 0 {
		_ = row[nb*q8BlockBytes-1]
		dotQ8LanesNEON(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
}

// dotNVFP4Q8NEON is dotNVFP4Q8 in dotNVFP4Q8LanesNEON.
func dotNVFP4Q8NEON(row []byte, act []q8Act) float32 {
	nb := len(row) / nvBlockBytes
	act = act[:2*nb]
	var l [8]float32
	if nb > 0 {
		_ = row[nb*nvBlockBytes-1]
		dotNVFP4Q8LanesNEON(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
}

// The kernels read q8Act blocks as 32 quants then the F32 scale.
var (
	_ [unsafe.Sizeof(q8Act{}) - 36]byte
	_ [36 - unsafe.Sizeof(q8Act{})]byte
	_ [unsafe.Offsetof(q8Act{}.d) - 32]byte
	_ [32 - unsafe.Offsetof(q8Act{}.d)]byte
)
