package tensor

import "unsafe"

// The NVFP4 kernels of nvfp4_amd64.s read q8Act blocks as 36 bytes (checked
// in dot_amd64.go) and fp4Act blocks as 64 quants then eight F32 factors.
var (
	_ [unsafe.Sizeof(fp4Act{}) - 96]byte
	_ [96 - unsafe.Sizeof(fp4Act{})]byte
	_ [unsafe.Offsetof(fp4Act{}.d) - 64]byte
	_ [64 - unsafe.Offsetof(fp4Act{}.d)]byte
)

//go:noescape
func dotNVFP4Q8Lanes(row *byte, act *q8Act, nblk int, lanes *[8]float32)

//go:noescape
func dotNVFP4FP4Lanes(row *byte, act *fp4Act, nblk int, lanes *[8]float32)

//go:noescape
func dotNVFP4Q8Lanes4(row *byte, stride int, act *q8Act, nblk int, lanes *[32]float32)

//go:noescape
func dotNVFP4FP4Lanes4(row *byte, stride int, act *fp4Act, nblk int, lanes *[32]float32)

// dotNVFP4Q8SIMD is dotNVFP4Q8 in dotNVFP4Q8Lanes, whose register lanes
// hold the twin's lanes 0 1 4 5 2 3 6 7.
func dotNVFP4Q8SIMD(row []byte, act []q8Act) float32 {
	nb := len(row) / nvBlockBytes
	act = act[:2*nb]
	var l [8]float32
	if nb > 0 {
		dotNVFP4Q8Lanes(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0], l[1], l[4], l[5], l[2], l[3], l[6], l[7])
}

// dotNVFP4FP4SIMD is dotNVFP4FP4 in dotNVFP4FP4Lanes, which returns the
// twin's lanes k+8 already added to lanes k.
func dotNVFP4FP4SIMD(row []byte, act []fp4Act) float32 {
	nb := len(row) / nvBlockBytes
	act = act[:nb]
	var l [8]float32
	if nb > 0 {
		dotNVFP4FP4Lanes(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
}

// dotNVFP4Q8RowsSIMD sets dst[r] = dotNVFP4Q8(row r of data, act), rows of
// rowBytes bytes, four rows at a time (a quarter of the range apart,
// streamQuarter) through dotNVFP4Q8Lanes4.
func dotNVFP4Q8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	nb := rowBytes / nvBlockBytes
	act = act[:2*nb]
	q := streamQuarter(len(dst))
	if nb == 0 {
		q = 0
	}
	var l [32]float32
	for r := 0; r < q; r++ {
		rows4 := data[r*rowBytes : (3*q+r+1)*rowBytes]
		dotNVFP4Q8Lanes4(&rows4[0], q*rowBytes, &act[0], nb, &l)
		for i := 0; i < 4; i++ {
			k := l[8*i : 8*i+8]
			dst[r+i*q] = hsum8(k[0], k[1], k[4], k[5], k[2], k[3], k[6], k[7])
		}
	}
	for r := 4 * q; r < len(dst); r++ {
		dst[r] = dotNVFP4Q8SIMD(data[r*rowBytes:(r+1)*rowBytes], act)
	}
}

// dotNVFP4FP4RowsSIMD sets dst[r] = dotNVFP4FP4(row r of data, act) * invG,
// four rows at a time (a quarter of the range apart, streamQuarter)
// through dotNVFP4FP4Lanes4.
func dotNVFP4FP4RowsSIMD(dst []float32, data []byte, rowBytes int, act []fp4Act, invG float32) {
	nb := rowBytes / nvBlockBytes
	act = act[:nb]
	q := streamQuarter(len(dst))
	if nb == 0 {
		q = 0
	}
	var l [32]float32
	for r := 0; r < q; r++ {
		rows4 := data[r*rowBytes : (3*q+r+1)*rowBytes]
		dotNVFP4FP4Lanes4(&rows4[0], q*rowBytes, &act[0], nb, &l)
		for i := 0; i < 4; i++ {
			k := l[8*i : 8*i+8]
			dst[r+i*q] = hsum8(k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7]) * invG
		}
	}
	for r := 4 * q; r < len(dst); r++ {
		dst[r] = dotNVFP4FP4SIMD(data[r*rowBytes:(r+1)*rowBytes], act) * invG
	}
}
