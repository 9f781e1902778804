package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKTileRows: MatMul's Q3_K, IQ4_XS, Q2_K and Q5_K rows (two-row
// tiles where the CPU has AVX2, an odd last row by the row kernel) give
// the row functions' bits for every (row, vector), 1 to 5 vectors, 1 and
// 2 threads.
func TestKTileRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, rows := range []int{16, 37} {
		checkQ8KRows(t, rng, Q3_K, rows, []int{109}, dotQ3K, "dotQ3K")
		checkQ8KRows(t, rng, IQ4_XS, rows, []int{1}, dotIQ4XS, "dotIQ4XS")
		checkQ8KRows(t, rng, Q2_K, rows, []int{81, 83}, dotQ2K, "dotQ2K")
		checkQ8KRows(t, rng, Q5_K, rows, []int{1, 3}, dotQ5K, "dotQ5K")
	}
}

// TestLegacyTileRows: MatMul's Q5_0, Q4_1 and Q5_1 rows (four-row tiles
// where the CPU has AVX-512, the rows past the last four by the row
// kernels) give dotLegacyQ8's and dotLegacyQ8_1's bits for every (row,
// vector), for 1 to 5 and 9 vectors, 1 and 2 threads, row counts that
// leave 0 to 3 rows over.
func TestLegacyTileRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const cols = 160 // five blocks: rows not a multiple of 256, as llama-quantize's Q5_0 fallback
	for _, typ := range []DType{Q5_0, Q4_1, Q5_1} {
		bb := typ.BlockBytes()
		for _, rows := range []int{16, 37, 38, 39} {
			data := make([]byte, rows*cols/32*bb)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			for b := 0; b < len(data)/bb; b++ {
				data[b*bb+1] = 0x20 | byte(rng.Uint32()&0xF)
				if typ != Q5_0 { // the minimum m_w
					data[b*bb+3] = 0x20 | byte(rng.Uint32()&0xF)
				}
			}
			m, err := NewMatrix(typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 2} {
				p := NewPool(threads)
				for _, n := range []int{1, 2, 3, 4, 5, 9} {
					x := make([]float32, n*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					dst := make([]float32, n*rows)
					p.MatMul(dst, m, x, n)
					act := make([]q8Act, cols/32)
					s := make([]float32, cols/32)
					for v := 0; v < n; v++ {
						if typ == Q5_0 {
							quantizeQ8Vector(act, x[v*cols:(v+1)*cols])
						} else {
							quantizeQ8_1(act, s, x[v*cols:(v+1)*cols])
						}
						for r := 0; r < rows; r++ {
							row := data[r*cols/32*bb : (r+1)*cols/32*bb]
							want := dotLegacyQ8(typ, row, act)
							if typ != Q5_0 {
								want = dotLegacyQ8_1(typ, row, act, s)
							}
							if got := dst[v*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%s %dx%d, threads %d, %d vectors: (row %d, vector %d) = %g, the row function %g", typ, rows, cols, threads, n, r, v, got, want)
							}
						}
					}
				}
				p.Close()
			}
		}
	}
}
