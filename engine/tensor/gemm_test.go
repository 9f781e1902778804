package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The tile groups of n vectors cover vectors 0..tileVectors(n)-1 once
// each, in order, within tileSlots(n) slots, and leave at most one vector.
func TestTileGroups(t *testing.T) {
	for n := 1; n <= 40; n++ {
		v := 0
		for v < tileVectors(n) {
			v0, s, used := tileGroup(v, n)
			if v0 != v || (s != 8 && s != 4 && s != 2) || used < 1 || used > s {
				t.Fatalf("n=%d: group of vector %d is (%d, %d, %d)", n, v, v0, s, used)
			}
			for k := v; k < v+used; k++ {
				if g0, gs, gu := tileGroup(k, n); g0 != v0 || gs != s || gu != used {
					t.Fatalf("n=%d: vector %d in group (%d, %d, %d), vector %d in (%d, %d, %d)", n, v, v0, s, used, k, g0, gs, gu)
				}
			}
			if used < s && v+used != n {
				t.Fatalf("n=%d: padded group at %d is not the last", n, v)
			}
			if v0+s > tileSlots(n) {
				t.Fatalf("n=%d: group at %d ends past %d slots", n, v, tileSlots(n))
			}
			v += used
		}
		if v != tileVectors(n) || n-v > 1 {
			t.Fatalf("n=%d: groups cover %d vectors, tileVectors %d", n, v, tileVectors(n))
		}
		if _, s, _ := tileGroup(n-1, n); v < n && s != 0 {
			t.Fatalf("n=%d: vector %d left over but in a group", n, n-1)
		}
	}
}

// The Q8_0 and W4A8 tile kernels read activation quants as VPSIGNB
// operands, which need them in -127..127: quantizeActQ8_0 never gives
// -128 for a block without NaN, whatever it holds (extremes, subnormals,
// infinities). A NaN can make the block's amax smaller than another value
// (ggml's MAX), and then anything comes out; MatMul checks for that
// (TestMatMulTilesNaN).
func TestQ8ActNeverMinus128(t *testing.T) {
	specials := []float32{0, 1, -1, 127, -127, 0.5, -0.5, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-38, -1e-38, 3e-37, -3e-37,
		float32(math.Inf(1)), float32(math.Inf(-1)), -126.5, 126.5, -127.49}
	r := rand.New(rand.NewPCG(29, 30))
	src := make([]float32, q8Block)
	for i := 0; i < 20000; i++ {
		scale := float32(math.Pow(2, float64(r.IntN(280)-150)))
		for k := range src {
			if r.IntN(4) == 0 {
				src[k] = specials[r.IntN(len(specials))]
			} else {
				src[k] = float32(r.NormFloat64()) * scale
			}
		}
		for _, flavor := range []q8Flavor{q8FlavorRef, q8FlavorX86, q8FlavorNEON} {
			var a q8Act
			quantizeActQ8_0(&a, src, flavor)
			for k, q := range a.q {
				if q == -128 {
					t.Fatalf("flavour %d, block %v: quant %d is -128", flavor, src, k)
				}
			}
		}
	}
}
