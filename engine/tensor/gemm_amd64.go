package tensor

import "unsafe"

// The tile kernels of gemm_amd64.s.

//go:noescape
func gemmQ8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)

//go:noescape
func gemmQ8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)

//go:noescape
func gemmQ8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)

// The multi-row Q8_0 tiles: the lanes of gemmQ8Lanes1xS for rows rows of
// rb bytes, added in the kernel (hsum8's order) and stored to
// dst[v*dstride/4+r] for vector v of the group and row r.

//go:noescape
func gemmQ8Tile1x8(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)

//go:noescape
func gemmQ8Tile1x4(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)

//go:noescape
func gemmQ8Tile1x2(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)

// gemmQ8Rows sets dst[v*rows+r] = dotQ8(row r, vector v) for the rows
// [lo,hi) of data (rows of rb bytes) and the vectors of the tile group of
// size s at v0 (the first used of them), packed in act (packQ8Tile's
// layout, the group's part).
func gemmQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, used int) {
	nb := rb / q8BlockBytes
	act = act[:s*nb*q8ActBytes]
	if used == s && hi > lo {
		// The whole group is real: the kernel stores the sums itself.
		_ = dst[(v0+s-1)*rows+hi-1]
		_ = data[hi*rb-1]
		out := &dst[v0*rows+lo]
		switch s {
		case 8:
			gemmQ8Tile1x8(&data[lo*rb], rb, hi-lo, &act[0], nb, out, 4*rows)
		case 4:
			gemmQ8Tile1x4(&data[lo*rb], rb, hi-lo, &act[0], nb, out, 4*rows)
		default:
			gemmQ8Tile1x2(&data[lo*rb], rb, hi-lo, &act[0], nb, out, 4*rows)
		}
		return
	}
	var l [64]float32
	for r := lo; r < hi; r++ {
		row := data[r*rb : (r+1)*rb]
		switch s {
		case 8:
			gemmQ8Lanes1x8(&row[0], &act[0], nb, &l)
		case 4:
			gemmQ8Lanes1x4(&row[0], &act[0], nb, (*[32]float32)(l[:32]))
		default:
			gemmQ8Lanes1x2(&row[0], &act[0], nb, (*[16]float32)(l[:16]))
		}
		for k := 0; k < used; k++ {
			t := (*[8]float32)(l[8*k : 8*k+8])
			dst[(v0+k)*rows+r] = hsum8(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7])
		}
	}
}

//go:noescape
func gemmF16Lanes3x4(w *uint16, stride int, x *float32, xstride int, nblk int, lanes *[96]float32)

//go:noescape
func gemmBF16Lanes3x4(w *uint16, stride int, x *float32, xstride int, nblk int, lanes *[96]float32)

// gemmHalfRows is dotHalfMatSIMD with tiles of three rows and four
// vectors: rows [lo,hi) of an F16 (bf false) or BF16 matrix, whose rows
// lo..hi-1 are w, times the n vectors of x (cols values each, rounded to
// the weight type); dst[v*rows+r] is dotF16 or dotBF16 of row r and
// vector v. When n or hi-lo is not a multiple of the tile, the last tile
// is moved back to overlap the one before it: some products are computed
// twice, to the same bits. Fewer than four vectors go through
// dotHalfMatSIMD, fewer than three rows through the one-vector kernels.
func gemmHalfRows(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	nb := cols / 8
	if n < 4 || nb == 0 {
		dotHalfMatSIMD(dst, w, x, lo, hi, cols, rows, n, bf)
		return
	}
	var l [96]float32
	for v := 0; v < n; v += 4 {
		v = min(v, n-4)
		xv := x[v*cols : (v+4)*cols]
		if hi-lo < 3 {
			for r := lo; r < hi; r++ {
				wr := w[(r-lo)*cols : (r-lo+1)*cols]
				for k := 0; k < 4; k++ {
					xk := xv[k*cols : (k+1)*cols]
					if bf {
						dst[(v+k)*rows+r] = dotBF16SIMD(wr, xk)
					} else {
						dst[(v+k)*rows+r] = dotF16SIMD(wr, xk)
					}
				}
			}
			continue
		}
		for r := lo; r < hi; r += 3 {
			r = min(r, hi-3)
			w3 := w[(r-lo)*cols : (r-lo+3)*cols]
			if bf {
				gemmBF16Lanes3x4(&w3[0], 2*cols, &xv[0], 4*cols, nb, &l)
			} else {
				gemmF16Lanes3x4(&w3[0], 2*cols, &xv[0], 4*cols, nb, &l)
			}
			for i := 0; i < 3; i++ {
				for k := 0; k < 4; k++ {
					a := (*[8]float32)(l[8*(4*i+k) : 8*(4*i+k)+8])
					out := &dst[(v+k)*rows+r+i]
					if 8*nb == cols {
						// No tail: exactTail would add +0 to each lane,
						// which changes nothing (a lane starts at +0 and
						// so is never -0).
						*out = hsum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
						continue
					}
					var t [8]float32
					tail := w3[i*cols+8*nb : (i+1)*cols]
					if bf {
						bf16TailTerms(&t, tail, xv[k*cols+8*nb:(k+1)*cols])
					} else {
						f16TailTerms(&t, tail, xv[k*cols+8*nb:(k+1)*cols])
					}
					*out = exactTail(a, &t)
				}
			}
		}
	}
}

//go:noescape
func gemmNVFP4Q8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)

//go:noescape
func gemmNVFP4Q8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)

// gemmNVFP4Q8Tile1x2 is gemmNVQ8Rows's loop for a whole group of two
// vectors: rows rows of rb bytes from row, the sums stored to
// dst[v*dstride/4+r].
//
//go:noescape
func gemmNVFP4Q8Tile1x2(row *byte, rb, rows int, act *byte, nblk int, dst *float32, dstride int)

//go:noescape
func gemmNVFP4Q8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)

//go:noescape
func gemmNVFP4FP4Lanes1x4(row *byte, act *fp4Act, xstride int, nblk int, lanes *[32]float32)

// gemmNVQ8Rows sets dst[v*rows+r] = dotNVFP4Q8(row r, vector v) (W4A8) for
// the rows [lo,hi) of data (rows of rb bytes) and the vectors of the tile
// group of size s at v0 (the first used of them), packed in act
// (packNVQ8Tile's layout, the group's part).
func gemmNVQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, used int) {
	nb := rb / nvBlockBytes
	act = act[:s*nb*2*q8ActBytes]
	if s == 2 && used == 2 && hi > lo {
		// the kernel stores the sums itself
		_ = dst[(v0+1)*rows+hi-1]
		_ = data[hi*rb-1]
		gemmNVFP4Q8Tile1x2(&data[lo*rb], rb, hi-lo, &act[0], nb, &dst[v0*rows+lo], 4*rows)
		return
	}
	var l [64]float32
	for r := lo; r < hi; r++ {
		row := data[r*rb : (r+1)*rb]
		switch s {
		case 8:
			gemmNVFP4Q8Lanes1x8(&row[0], &act[0], nb, &l)
		case 4:
			gemmNVFP4Q8Lanes1x4(&row[0], &act[0], nb, (*[32]float32)(l[:32]))
		default:
			gemmNVFP4Q8Lanes1x2(&row[0], &act[0], nb, (*[16]float32)(l[:16]))
		}
		for k := 0; k < used; k++ {
			t := (*[8]float32)(l[8*k : 8*k+8])
			dst[(v0+k)*rows+r] = hsum8(t[0], t[1], t[4], t[5], t[2], t[3], t[6], t[7])
		}
	}
}

// gemmNVFP4Rows sets dst[v*rows+r] = dotNVFP4FP4(row r, vector v) *
// invG[v] (W4A4) for the rows [lo,hi) of data and the n >= 4 vectors of
// act (nb blocks each), four vectors per tile; when n is not a multiple of
// four the last tile overlaps the one before it (the same bits twice).
func gemmNVFP4Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []fp4Act, invG []float32, n int) {
	nb := rb / nvBlockBytes
	act = act[:n*nb]
	var l [32]float32
	for v := 0; v < n; v += 4 {
		v = min(v, n-4)
		for r := lo; r < hi; r++ {
			row := data[r*rb : (r+1)*rb]
			gemmNVFP4FP4Lanes1x4(&row[0], &act[v*nb], nb*int(unsafe.Sizeof(fp4Act{})), nb, &l)
			for k := 0; k < 4; k++ {
				t := (*[8]float32)(l[8*k : 8*k+8])
				dst[(v+k)*rows+r] = hsum8(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]) * invG[v+k]
			}
		}
	}
}

// gemmQuantQ8 is quantizeActQ8_0 with q8FlavorX86 for nblk blocks of src
// into dst (gemm_q8act_amd64.s); ok is false when src holds a NaN, and
// the blocks must then be quantized by quantizeActQ8_0.
//
//go:noescape
func gemmQuantQ8(src *float32, nblk int, dst *q8Act) (ok bool)

// quantizeQ8Vector quantizes the len(dst) blocks of src for the Q8_0 and
// W4A8 products, as quantizeActQ8_0 with actQ8Flavor does.
func quantizeQ8Vector(dst []q8Act, src []float32) {
	src = src[:len(dst)*q8Block]
	if len(dst) > 0 && useSIMD && useTiles && actQ8Flavor == q8FlavorX86 && gemmQuantQ8(&src[0], len(dst), &dst[0]) {
		return
	}
	for b := range dst {
		quantizeActQ8_0(&dst[b], src[b*q8Block:(b+1)*q8Block], actQ8Flavor)
	}
}
