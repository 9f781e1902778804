package tensor

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestQ5_0Tile: the four-row Q5_0 tile, both forms (AVX-512 where the
// CPU has it, AVX2), gives its Go twin's bits (and, from zero,
// dotLegacyQ8's for each row and vector) on random blocks, scales
// (extremes included), activations and row and vector strides, for 1 to
// 9 vectors.
func TestQ5_0Tile(t *testing.T) {
	tileForms(t, testQ5_0Tile)
}

// TestLegacyTileRowsAVX2 and TestKTileRowsAVX2 are TestLegacyTileRows and
// TestKTileRows with the AVX-512 tiles off: Q5_0, Q4_1, Q5_1, Q3_K,
// IQ4_XS, Q2_K and Q5_K through their AVX2 tiles.
func TestLegacyTileRowsAVX2(t *testing.T) {
	if !useTile512 {
		t.Skip("TestLegacyTileRows runs this form on this CPU")
	}
	useTile512 = false
	defer func() { useTile512 = true }()
	TestLegacyTileRows(t)
}

func TestKTileRowsAVX2(t *testing.T) {
	if !useTile512 {
		t.Skip("TestKTileRows runs this form on this CPU")
	}
	useTile512 = false
	defer func() { useTile512 = true }()
	TestKTileRows(t)
}

func testQ5_0Tile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		rb := (nb + rapid.IntRange(0, 2).Draw(t, "pad")) * q5_0Bytes
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(4*rb).Draw(t, "w")
		setScales(t, w, 4, rb, nb, q5_0Bytes, 0)
		act := make([]q8Act, n*astride)
		for i := range act {
			copy(act[i].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8Range(-127, 127), rapid.SampledFrom([]int8{-127, 127, 0})), 32, 32).Draw(t, "x"))
			act[i].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
		}
		got, want := accGen(t, 32*n)
		q5_0Tile(w, rb, act, astride, nb, n, got)
		q5_0TileGo(w, rb, act, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d] (vector %d, row %d, lane %d): kernel %g, Go %g", i, i/32, i%32/8, i%8, got[i], want[i])
			}
		}
		clear(got)
		q5_0Tile(w, rb, act, astride, nb, n, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 4; r++ {
				d := dotLegacyQ8(Q5_0, w[r*rb:r*rb+nb*q5_0Bytes], act[v*astride:v*astride+nb])
				if g := (*laneAcc)(got[32*v+8*r : 32*v+8*r+8]).sum(); math.Float32bits(g) != math.Float32bits(d) {
					t.Fatalf("(row %d, vector %d): tile %g, dotLegacyQ8 %g", r, v, g, d)
				}
			}
		}
	})
}

// TestQ8_1TileAVX512: the four-row Q4_1 and Q5_1 tiles, both forms
// (AVX-512 where the CPU has it, AVX2), give their Go twin's bits (and, from zero, dotLegacyQ8_1's for each row and vector)
// on random blocks, scales and minimums (extremes included), activations,
// their sums and strides, for 1 to 9 vectors.
func TestQ8_1TileAVX512(t *testing.T) {
	tileForms(t, testQ8_1Tile)
}

func testQ8_1Tile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.SampledFrom([]DType{Q4_1, Q5_1}).Draw(t, "type")
		bb := typ.BlockBytes()
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		rb := (nb + rapid.IntRange(0, 2).Draw(t, "pad")) * bb
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(4*rb).Draw(t, "w")
		setScales(t, w, 4, rb, nb, bb, 0, 2)
		act := make([]q8Act, n*astride)
		s := make([]float32, n*astride)
		for i := range act {
			copy(act[i].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8Range(-127, 127), rapid.SampledFrom([]int8{-127, 127, 0})), 32, 32).Draw(t, "x"))
			act[i].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
			s[i] = float32(rapid.Float64Range(-1000, 1000).Draw(t, "s"))
		}
		got, want := accGen(t, 36*n)
		q8_1Tile(typ, w, rb, act, s, astride, nb, n, got)
		q8_1TileGo(typ, w, rb, act, s, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s acc[%d] (vector %d, float %d): kernel %g, Go %g", typ, i, i/36, i%36, got[i], want[i])
			}
		}
		clear(got)
		q8_1Tile(typ, w, rb, act, s, astride, nb, n, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 4; r++ {
				d := dotLegacyQ8_1(typ, w[r*rb:r*rb+nb*bb], act[v*astride:v*astride+nb], s[v*astride:v*astride+nb])
				if g := (*laneAcc)(got[36*v+8*r:36*v+8*r+8]).sum() + got[36*v+32+r]; math.Float32bits(g) != math.Float32bits(d) {
					t.Fatalf("%s (row %d, vector %d): tile %g, dotLegacyQ8_1 %g", typ, r, v, g, d)
				}
			}
		}
	})
}

// TestQ3KTileAVX512 and TestIQ4XSTileAVX512: the two-row Q3_K and IQ4_XS
// tiles, both forms (AVX-512 where the CPU has it, AVX2), give their Go
// twins' bits (and, from zero, dotQ3K's and
// dotIQ4XS's for each row and vector) on random blocks, scales (extremes
// included), activations and strides, for 1 to 9 vectors.
func TestQ3KTileAVX512(t *testing.T) {
	checkPairTile(t, q3KBytes, []int{108}, q3kTile, q3kTileGo, dotQ3K)
}

func TestIQ4XSTileAVX512(t *testing.T) {
	checkPairTile(t, iq4XSBytes, []int{0}, iq4xsTile, iq4xsTileGo, dotIQ4XS)
}

type pairTile func(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32)

// checkPairTile runs checkPairTileForm on both forms of the tile (AVX-512
// where the CPU has it, AVX2).
func checkPairTile(t *testing.T, bb int, dOffs []int, tile, twin pairTile, dot func([]byte, []q8KAct) float32) {
	tileForms(t, func(t *testing.T) { checkPairTileForm(t, bb, dOffs, tile, twin, dot) })
}

func checkPairTileForm(t *testing.T, bb int, dOffs []int, tile, twin pairTile, dot func([]byte, []q8KAct) float32) {
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 4).Draw(t, "blocks")
		rb := (nb + rapid.IntRange(0, 2).Draw(t, "pad")) * bb
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(2*rb).Draw(t, "w")
		setScales(t, w, 2, rb, nb, bb, dOffs...)
		act := q8KActGen(t, n*astride)
		got, want := accGen(t, 16*n)
		tile(w, rb, act, astride, nb, n, got)
		twin(w, rb, act, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d] (vector %d, row %d, lane %d): kernel %g, Go %g", i, i/16, i%16/8, i%8, got[i], want[i])
			}
		}
		clear(got)
		tile(w, rb, act, astride, nb, n, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 2; r++ {
				d := dot(w[r*rb:r*rb+nb*bb], act[v*astride:v*astride+nb])
				if g := (*laneAcc)(got[16*v+8*r : 16*v+8*r+8]).sum(); math.Float32bits(g) != math.Float32bits(d) {
					t.Fatalf("(row %d, vector %d): tile %g, row function %g", r, v, g, d)
				}
			}
		}
	})
}

// BenchmarkKQuantQ5_0Mat64AVX2 is BenchmarkKQuantQ5_0Mat64 in the AVX2
// form (useTile512 off), as on a CPU without AVX-512.
func BenchmarkKQuantQ5_0Mat64AVX2(b *testing.B) { benchKQuantAVX2(b, Q5_0) }

// BenchmarkKQuantQ3KMat64AVX2 and BenchmarkKQuantIQ4XSMat64AVX2: the AVX2
// forms, as on a CPU without AVX-512.
func BenchmarkKQuantQ3KMat64AVX2(b *testing.B) { benchKQuantAVX2(b, Q3_K) }

func BenchmarkKQuantIQ4XSMat64AVX2(b *testing.B) { benchKQuantAVX2(b, IQ4_XS) }

func BenchmarkKQuantQ2KMat64AVX2(b *testing.B) { benchKQuantAVX2(b, Q2_K) }

func BenchmarkKQuantQ5KMat64AVX2(b *testing.B) { benchKQuantAVX2(b, Q5_K) }

func BenchmarkKQuantQ4_1Mat64AVX2(b *testing.B) { benchKQuantAVX2(b, Q4_1) }

// benchKQuantAVX2 is benchKQuant's 1024x1024, 64-vector product with the
// AVX-512 tiles off, as on a CPU without them.
func benchKQuantAVX2(b *testing.B, typ DType) {
	defer func(on bool) { useTile512 = on }(useTile512)
	useTile512 = false
	benchKQuant(b, typ, 1024, 1024, 64)
}
