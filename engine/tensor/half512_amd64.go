package tensor

import "golang.org/x/sys/cpu"

// useHalf512 selects the AVX-512F tile kernels of half512_amd64.s for F16
// and BF16 weights with eight or more vectors. Tests and benchmarks turn
// it off to compare with the AVX2 tiles, which give the same bits.
var useHalf512 = useSIMD && cpu.X86.HasAVX512F

//go:noescape
func gemmF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)

//go:noescape
func gemmBF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)

// gemmHalfRowsZ is gemmHalfRows with tiles of four rows and eight vectors
// whose sums the kernel stores itself: rows [lo,hi) of an F16 (bf false)
// or BF16 matrix, whose rows lo..hi-1 are w, times the n vectors of x
// (cols values each, rounded to the weight type); dst[v*rows+r] is dotF16
// or dotBF16 of row r and vector v. When n or hi-lo is not a multiple of
// the tile the last tile is moved back to overlap the one before it (the
// same bits twice). Shapes without a whole tile, or with a column tail,
// go to gemmHalfRows.
func gemmHalfRowsZ(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	nb := cols / 8
	if n < 8 || hi-lo < 4 || nb == 0 || cols%8 != 0 {
		gemmHalfRows(dst, w, x, lo, hi, cols, rows, n, bf)
		return
	}
	_ = dst[(n-1)*rows+hi-1]
	_ = w[(hi-lo)*cols-1]
	_ = x[n*cols-1]
	kernel := gemmF16Z4x8
	if bf {
		kernel = gemmBF16Z4x8
	}
	for v := 0; v < n; v += 8 {
		v = min(v, n-8)
		for r := lo; r < hi; r += 4 {
			r = min(r, hi-4)
			kernel(&w[(r-lo)*cols], 2*cols, &x[v*cols], 4*cols, nb, &dst[v*rows+r], 4*rows)
		}
	}
}
