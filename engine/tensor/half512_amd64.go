package tensor

import "golang.org/x/sys/cpu"

// useHalf512 selects the AVX-512 tile kernels of half512_amd64.s for F16
// and BF16 weights with eight or more vectors (F, and BW for the BF16
// kernels' VPERMW). Tests and benchmarks turn it off to compare with the
// AVX2 tiles, which give the same bits.
var useHalf512 = useSIMD && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

//go:noescape
func gemmF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)

//go:noescape
func gemmBF16Z4x8(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int)

// gemmBF16ZRows is gemmBF16Z4x8 on every tile of nrows rows against the
// same eight vectors; it keeps the vector pairs that the first tile loads
// in its frame for the others (see half512_amd64.s), for at most
// bf16ZKeepBlocks blocks (1024 columns: 32 KiB, which stay in the L1
// cache with a tile's rows). That pays from bf16ZKeepRows rows (four
// tiles) up.
//
//go:noescape
func gemmBF16ZRows(w *uint16, stride int, x *float32, xstride int, nblk int, dst *float32, dstride int, nrows int)

const (
	bf16ZKeepBlocks = 128
	bf16ZKeepRows   = 16
)

// gemmHalfRowsZ is gemmHalfRows with tiles of four rows and eight vectors
// whose sums the kernel stores itself: rows [lo,hi) of an F16 (bf false)
// or BF16 matrix, whose rows lo..hi-1 are w, times the n vectors of x
// (cols values each, rounded to the weight type); dst[v*rows+r] is dotF16
// or dotBF16 of row r and vector v. When n or hi-lo is not a multiple of
// the tile the last tile is moved back to overlap the one before it (the
// same bits twice). BF16 runs of bf16ZKeepRows rows or more, up to 1024
// columns, go to gemmBF16ZRows, one call per eight vectors. Shapes
// without a whole tile, or with a column tail, go to gemmHalfRows.
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
	keep := bf && nb <= bf16ZKeepBlocks && hi-lo >= bf16ZKeepRows
	for v := 0; v < n; v += 8 {
		v = min(v, n-8)
		if keep {
			gemmBF16ZRows(&w[0], 2*cols, &x[v*cols], 4*cols, nb, &dst[v*rows+lo], 4*rows, hi-lo)
			continue
		}
		for r := lo; r < hi; r += 4 {
			r = min(r, hi-4)
			kernel(&w[(r-lo)*cols], 2*cols, &x[v*cols], 4*cols, nb, &dst[v*rows+r], 4*rows)
		}
	}
}
