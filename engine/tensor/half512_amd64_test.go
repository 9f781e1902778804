package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

func requireHalf512(t *testing.T) {
	t.Helper()
	requireSIMD(t)
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW {
		t.Skip("CPU lacks AVX512F or AVX512BW: the AVX-512 F16/BF16 tiles (gemmF16Z4x8, gemmBF16Z4x8, gemmBF16ZRows) were NOT run")
	}
}

// The AVX-512 F16 and BF16 tiles (through gemmHalfRowsZ: vector counts
// and row ranges that are not multiples of the tile, column tails, which
// go to the AVX2 tiles, row ranges long enough for gemmBF16ZRows, with 1,
// 2, 3 or more blocks for its and gemmBF16Z4x8's two-block loops, and
// columns either side of its 1024) against dotF16 and dotBF16 one product
// at a time. They run wherever the CPU has AVX-512F and BW, whatever
// useHalf512 says.
func TestGemmHalfTilesZ(t *testing.T) {
	requireHalf512(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, bf := range []bool{false, true} {
		twin := dotF16
		if bf {
			twin = dotBF16
		}
		for _, cols := range []int{8, 16, 24, 32, 40, 64, 72, 256, 1016, 1024, 1032, 17, 4103} {
			for _, shape := range [][3]int{
				{0, 4, 8}, {0, 5, 9}, {1, 10, 8}, {2, 7, 16}, {0, 9, 13}, {3, 7, 8}, {0, 13, 21}, {0, 3, 8}, {0, 8, 5},
				{0, 16, 8}, {1, 18, 9}, {2, 34, 16}, {0, 37, 11},
			} {
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

// The BF16 tiles on the values where a rounded product and a fused one
// part, and on the others where widening could go wrong: zeros of both
// signs, subnormals, the largest finite values (whose products overflow),
// infinities and NaNs, in both kernels, against dotBF16. The only NaN is
// x86's default one (what Inf*0 and Inf-Inf give), in the weights or in
// the vectors: where two NaNs meet, the one that survives depends on the
// operand order of an add that Go's compiler may swap (the kernels before
// this one and dotBF16 already disagreed on such payloads), so the test
// keeps to one NaN.
func TestGemmBF16TilesZSpecial(t *testing.T) {
	requireHalf512(t)
	special := []uint16{
		0x0000, 0x8000, // ±0
		0x0001, 0x807f, 0x0040, // subnormals
		0x1cb5, 0x9d43, 0x1e01, // about 2^-70: products below 2^-126, rounded
		0x0080, 0x8080, // ±smallest normal
		0x3f80, 0xbfc0, 0x4000, // 1, -1.5, 2
		0x7f7f, 0xff7f, 0x7f00, // ±largest finite, 2^127
		0x7f80, 0xff80, // ±Inf
		0xffc0, // the default NaN
	}
	r := rand.New(rand.NewPCG(43, 44))
	pick := func(nan bool) uint16 {
		for {
			h := special[r.IntN(len(special))]
			if r.IntN(3) == 0 {
				h = finiteHalf(r, true)
			}
			if nan || h != 0xffc0 {
				return h
			}
		}
	}
	const cols, n = 64, 11
	for _, nanIn := range []string{"weights", "vectors"} {
		for _, hi := range []int{7, 20} { // gemmBF16Z4x8 tiles, gemmBF16ZRows
			rows := hi
			w := make([]uint16, rows*cols)
			for i := range w {
				w[i] = pick(nanIn == "weights")
			}
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = BF16ToF32(pick(nanIn == "vectors"))
			}
			got := make([]float32, n*rows)
			gemmHalfRowsZ(got, w, x, 0, hi, cols, rows, n, true)
			for v := 0; v < n; v++ {
				for row := 0; row < hi; row++ {
					want := dotBF16(w[row*cols:(row+1)*cols], x[v*cols:(v+1)*cols])
					sameBitsOrFail(t, fmt.Sprintf("NaNs in %s, rows [0,%d): row %d vector %d", nanIn, hi, row, v), got[v*rows+row], want)
				}
			}
		}
	}
}
