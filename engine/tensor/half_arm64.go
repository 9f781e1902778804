package tensor

// F16 and BF16 products on arm64 (half_arm64.s): the whole blocks of eight
// columns in NEON, the tail and the lane sums here, in the order of the
// twins dotF16 and dotBF16 (half_arm64_test.go checks the bits).

//go:noescape
func dotF16LanesNEON(w *uint16, x *float32, nblk int, lanes *[8]float32)

//go:noescape
func dotBF16LanesNEON(w *uint16, x *float32, nblk int, lanes *[8]float32)

// halfTailNEON finishes a dotF16 or dotBF16 product from its lanes after
// the whole blocks: the tail's products go to lanes 0.., then every lane
// gets its (possibly zero) tail term, as the twins do.
func halfTailNEON(l *[8]float32, w []uint16, x []float32, bf bool) float32 {
	var t [8]float32
	x = x[:len(w)]
	for k := range w {
		if bf {
			t[k] = float32(bf16(w[k]) * x[k])
		} else {
			t[k] = float32(f16Table[w[k]] * x[k])
		}
	}
	return hsum8(l[0]+t[0], l[1]+t[1], l[2]+t[2], l[3]+t[3], l[4]+t[4], l[5]+t[5], l[6]+t[6], l[7]+t[7])
}

// dotF16NEON is dotF16 with the whole blocks in dotF16LanesNEON.
func dotF16NEON(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var l [8]float32
	nb := len(w) / 8
	if nb > 0 {
		dotF16LanesNEON(&w[0], &x[0], nb, &l)
	}
	return halfTailNEON(&l, w[8*nb:], x[8*nb:], false)
}

// dotBF16NEON is dotBF16 with the whole blocks in dotBF16LanesNEON.
func dotBF16NEON(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var l [8]float32
	nb := len(w) / 8
	if nb > 0 {
		dotBF16LanesNEON(&w[0], &x[0], nb, &l)
	}
	return halfTailNEON(&l, w[8*nb:], x[8*nb:], true)
}
