package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKTileRows: MatMul's Q3_K and IQ4_XS rows (two-row tiles where the
// CPU has AVX-512, an odd last row by the row kernel) give dotQ3K's and
// dotIQ4XS's bits for every (row, vector), 1 to 5 vectors, 1 and 2
// threads.
func TestKTileRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, rows := range []int{16, 37} {
		checkQ8KRows(t, rng, Q3_K, rows, []int{109}, dotQ3K, "dotQ3K")
		checkQ8KRows(t, rng, IQ4_XS, rows, []int{1}, dotIQ4XS, "dotIQ4XS")
	}
}

// TestQ5_0Rows: MatMul's Q5_0 rows (four-row tiles where the CPU has
// AVX-512, the rows past the last four by the row kernel) give
// dotLegacyQ8's bits for every (row, vector), for 1 to 5 and 9 vectors,
// 1 and 2 threads, row counts that leave 0 to 3 rows over.
func TestQ5_0Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const cols = 160 // five blocks: rows not a multiple of 256, as llama-quantize's Q5_0 fallback
	for _, rows := range []int{16, 37, 38, 39} {
		data := make([]byte, rows*cols/32*q5_0Bytes)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for b := 0; b < len(data)/q5_0Bytes; b++ {
			data[b*q5_0Bytes+1] = 0x20 | byte(rng.Uint32()&0xF)
		}
		m, err := NewMatrix(Q5_0, rows, cols, data)
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
				for v := 0; v < n; v++ {
					quantizeQ8Vector(act, x[v*cols:(v+1)*cols])
					for r := 0; r < rows; r++ {
						want := dotLegacyQ8(Q5_0, data[r*cols/32*q5_0Bytes:(r+1)*cols/32*q5_0Bytes], act)
						if got := dst[v*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("Q5_0 %dx%d, threads %d, %d vectors: (row %d, vector %d) = %g, dotLegacyQ8 %g", rows, cols, threads, n, r, v, got, want)
						}
					}
				}
			}
			p.Close()
		}
	}
}
