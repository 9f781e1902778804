package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// The AVX-512F F16 and BF16 tiles (through gemmHalfRowsZ: vector counts
// and row ranges that are not multiples of the tile, column tails, which
// go to the AVX2 tiles) against dotF16 and dotBF16 one product at a time.
// They run wherever the CPU has AVX-512F, whatever useHalf512 says.
func TestGemmHalfTilesZ(t *testing.T) {
	requireSIMD(t)
	if !cpu.X86.HasAVX512F {
		t.Skip("CPU lacks AVX512F: the AVX-512 F16/BF16 tiles (gemmF16Z4x8, gemmBF16Z4x8) were NOT run")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, bf := range []bool{false, true} {
		twin := dotF16
		if bf {
			twin = dotBF16
		}
		for _, cols := range []int{8, 16, 24, 64, 72, 256, 1024, 17, 4103} {
			for _, shape := range [][3]int{{0, 4, 8}, {0, 5, 9}, {1, 10, 8}, {2, 7, 16}, {0, 9, 13}, {3, 7, 8}, {0, 13, 21}, {0, 3, 8}, {0, 8, 5}} {
				lo, hi, n := shape[0], shape[1], shape[2]
				rows := hi + 1
				w, _ := halfInputs(r, bf, rows, cols)
				x := make([]float32, n*cols)
				for v := 0; v < n; v++ {
					_, xv := halfInputs(r, bf, 0, cols)
					copy(x[v*cols:], xv)
				}
				got := make([]float32, n*rows)
				gemmHalfRowsZ(got, w[lo*cols:hi*cols], x, lo, hi, cols, rows, n, bf)
				for v := 0; v < n; v++ {
					for row := lo; row < hi; row++ {
						want := twin(w[row*cols:(row+1)*cols], x[v*cols:(v+1)*cols])
						sameBitsOrFail(t, fmt.Sprintf("bf=%v cols=%d rows [%d,%d) n=%d: row %d vector %d", bf, cols, lo, hi, n, row, v), got[v*rows+row], want)
					}
				}
			}
		}
	}
}
