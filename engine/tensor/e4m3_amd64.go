package tensor

//go:noescape
func dotE4M3Lanes(k *byte, x *float32, nblk int, lanes *[8]float32)

//go:noescape
func axpyE4M3Blocks(y *float32, v *byte, nblk int, a float32)

// dotE4M3SIMD is dotE4M3 with the whole blocks of eight in dotE4M3Lanes.
func dotE4M3SIMD(k []byte, x []float32) float32 {
	x = x[:len(k)]
	var l, t [8]float32
	nb := len(k) / 8
	if nb > 0 {
		dotE4M3Lanes(&k[0], &x[0], nb, &l)
	}
	for i, j := 8*nb, 0; i < len(k); i, j = i+1, j+1 {
		t[j] = float32(e4m3Table[k[i]] * x[i])
	}
	return hsum8(l[0]+t[0], l[1]+t[1], l[2]+t[2], l[3]+t[3], l[4]+t[4], l[5]+t[5], l[6]+t[6], l[7]+t[7])
}

// axpyE4M3SIMD is axpyE4M3 with the whole blocks of eight in
// axpyE4M3Blocks.
func axpyE4M3SIMD(y []float32, v []byte, a float32) {
	y = y[:len(v)]
	nb := len(v) / 8
	if nb > 0 {
		axpyE4M3Blocks(&y[0], &v[0], nb, a)
	}
	axpyE4M3(y[8*nb:], v[8*nb:], a)
}
