package tensor

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// tileForms runs check on each form of the tiles this CPU has: the AVX2
// one, and the AVX-512 one too where the CPU has it (useTile512).
func tileForms(t *testing.T, check func(*testing.T)) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	if !useTile512 {
		check(t)
		return
	}
	defer func() { useTile512 = true }()
	useTile512 = false
	t.Run("avx2", check)
	useTile512 = true
	t.Run("avx512", check)
}

// f16Gen draws an F16 scale of ordinary size, sometimes subnormal, large
// or negative.
func f16Gen() *rapid.Generator[uint16] {
	return rapid.OneOf(rapid.Uint16Range(0x0001, 0x03FF), rapid.Uint16Range(0x1000, 0x5BFF), rapid.Uint16Range(0x9000, 0xABFF))
}

// setScales draws an F16 scale (f16Gen) at each offset in offs of every
// block of the rows rows of w, rb bytes apart.
func setScales(t *rapid.T, w []byte, rows, rb, nb, blockBytes int, offs ...int) {
	for r := 0; r < rows; r++ {
		for b := 0; b < nb; b++ {
			for _, o := range offs {
				h := f16Gen().Draw(t, "d")
				p := r*rb + b*blockBytes + o
				w[p], w[p+1] = byte(h), byte(h>>8)
			}
		}
	}
}

// accGen draws n starting accumulators, twice (the kernel's and its
// twin's).
func accGen(t *rapid.T, n int) (got, want []float32) {
	got, want = make([]float32, n), make([]float32, n)
	for i := range got {
		got[i] = float32(rapid.Float64Range(-100, 100).Draw(t, "acc"))
		want[i] = got[i]
	}
	return got, want
}

// TestLegacyTileAVX2: the eight-row tile of repacked Q4_0 and IQ4_NL gives
// its Go twin's bits (and, from zero, dotLegacyRepacked's for every row
// and vector) on random blocks, scales, activations, row and vector
// strides, for 1 to 9 vectors.
func TestLegacyTileAVX2(t *testing.T) {
	tileForms(t, testLegacyTile)
}

func testLegacyTile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.SampledFrom([]DType{Q4_0, IQ4_NL}).Draw(t, "type")
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		rb := nb*q4_0Bytes + rapid.IntRange(0, 2).Draw(t, "pad")*q4_0Bytes
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(8*rb).Draw(t, "w")
		for r := 0; r < 8; r++ {
			for b := 0; b < nb; b++ {
				h := f16Gen().Draw(t, "d")
				w[r*rb+b*q4_0Bytes], w[r*rb+b*q4_0Bytes+1] = byte(h), byte(h>>8)
			}
		}
		act := make([]q8Act, n*astride)
		for i := range act {
			copy(act[i].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8Range(-127, 127), rapid.SampledFrom([]int8{-127, 127, 0})), 32, 32).Draw(t, "x"))
			act[i].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
		}
		got, want := accGen(t, 8*n)
		legacyTile(typ, w, rb, act, astride, nb, n, got)
		legacyTileGo(typ, w, rb, act, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s acc[%d] (row %d, vector %d): AVX2 %g, Go %g", typ, i, i%8, i/8, got[i], want[i])
			}
		}
		clear(got)
		legacyTile(typ, w, rb, act, astride, nb, n, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 8; r++ {
				d := dotLegacyRepacked(typ, w[r*rb:r*rb+nb*q4_0Bytes], act[v*astride:v*astride+nb])
				if math.Float32bits(got[8*v+r]) != math.Float32bits(d) {
					t.Fatalf("%s (row %d, vector %d): tile %g, dotLegacyRepacked %g", typ, r, v, got[8*v+r], d)
				}
			}
		}
	})
}

// q8KActGen draws n Q8_K activation blocks with their sums.
func q8KActGen(t *rapid.T, n int) []q8KAct {
	act := make([]q8KAct, n)
	for i := range act {
		copy(act[i].q[:], actGen().Draw(t, "x"))
		for k := range act[i].bsums {
			s := 0
			for _, x := range act[i].q[16*k : 16*k+16] {
				s += int(x)
			}
			act[i].bsums[k] = int16(s)
		}
		act[i].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
	}
	return act
}

// TestQ4KTileAVX2: the eight-row tile of repacked Q4_K gives its Go
// twin's bits (and, from zero, dotQ4KRepacked's for every row and vector)
// on random blocks, scales (extremes included), activations and strides,
// for 1 to 9 vectors.
func TestQ4KTileAVX2(t *testing.T) {
	tileForms(t, testQ4KTile)
}

func testQ4KTile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 4).Draw(t, "blocks")
		rb := (nb + rapid.IntRange(0, 2).Draw(t, "pad")) * q4KBytes
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(8*rb).Draw(t, "w")
		setScales(t, w, 8, rb, nb, q4KBytes, 0, 2)
		act := q8KActGen(t, n*astride)
		got, want := accGen(t, 16*n)
		rbuf := make([]int32, 64*n)
		q4kTile(w, rb, act, astride, nb, n, rbuf, got)
		q4kTileGo(w, rb, act, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d] (vector %d, row %d, minimums %v): AVX2 %g, Go %g", i, i/16, i%8, i%16 >= 8, got[i], want[i])
			}
		}
		clear(got)
		q4kTile(w, rb, act, astride, nb, n, rbuf, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 8; r++ {
				d := dotQ4KRepacked(w[r*rb:r*rb+nb*q4KBytes], act[v*astride:v*astride+nb])
				if g := got[16*v+r] - got[16*v+8+r]; math.Float32bits(g) != math.Float32bits(d) {
					t.Fatalf("(row %d, vector %d): tile %g, dotQ4KRepacked %g", r, v, g, d)
				}
			}
		}
	})
}

// TestQ6KTileAVX512: the two-row Q6_K tile gives its Go twin's bits (and,
// from zero, dotQ6K's for each row and vector) on random blocks, scales
// (extremes included), activations and strides, for 1 to 9 vectors.
func TestQ6KTileAVX512(t *testing.T) {
	if !useTile512 {
		t.Skip("no AVX-512 BW/VL/VNNI on this CPU: the kernel cannot run here")
	}
	checkPairTileForm(t, q6KBytes, []int{208}, q6kTile, q6kTileGo, dotQ6K)
}

// TestQ5KTileAVX512: the two-row Q5_K tile, both forms (AVX-512 where the
// CPU has it, AVX2), gives its Go twin's bits (and, from zero, dotQ5K's
// for each row and vector) on random blocks, scales
// (extremes included), activations and strides, for 1 to 9 vectors.
func TestQ5KTileAVX512(t *testing.T) {
	tileForms(t, testQ5KTile)
}

func testQ5KTile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 4).Draw(t, "blocks")
		rb := (nb + rapid.IntRange(0, 2).Draw(t, "pad")) * q5KBytes
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "apad")
		w := bytesGen(2*rb).Draw(t, "w")
		setScales(t, w, 2, rb, nb, q5KBytes, 0, 2)
		act := q8KActGen(t, n*astride)
		got, want := make([]float32, 32*n), make([]float32, 32*n)
		for i := range got {
			got[i] = float32(rapid.Float64Range(-100, 100).Draw(t, "acc"))
			if i%32 >= 16 { // the summs' copies are equal
				got[i] = got[i-i%4]
			}
			want[i] = got[i]
		}
		q5kTile(w, rb, act, astride, nb, n, got)
		q5kTileGo(w, rb, act, astride, nb, n, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d] (vector %d, slot %d): kernel %g, Go %g", i, i/32, i%32, got[i], want[i])
			}
		}
		clear(got)
		q5kTile(w, rb, act, astride, nb, n, got)
		for v := 0; v < n; v++ {
			for r := 0; r < 2; r++ {
				d := dotQ5K(w[r*rb:r*rb+nb*q5KBytes], act[v*astride:v*astride+nb])
				if g := (*laneAcc)(got[32*v+8*r:32*v+8*r+8]).sum() + got[32*v+16+4*r]; math.Float32bits(g) != math.Float32bits(d) {
					t.Fatalf("(row %d, vector %d): tile %g, dotQ5K %g", r, v, g, d)
				}
			}
		}
	})
}

// TestQuantizeQ8KAVX2: the AVX2 Q8_K quantizer gives quantizeQ8KGo's
// blocks (quants, sums, scale) bit for bit, on ordinary, tiny, huge,
// subnormal, infinite and NaN values, ties of magnitude with either sign
// and all-zero blocks.
func TestQuantizeQ8KAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernel cannot run here")
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-45, -1e-45, 1e-38, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5, 127, -127}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 3).Draw(t, "blocks")
		scale := float32(math.Pow(2, float64(rapid.IntRange(-140, 120).Draw(t, "exp"))))
		src := make([]float32, nb*qkK)
		kind := rapid.IntRange(0, 3).Draw(t, "kind")
		for i := range src {
			switch {
			case kind == 0: // an all-zero block
			case kind == 1 || rapid.IntRange(0, 20).Draw(t, "sp") == 0:
				src[i] = rapid.SampledFrom(special).Draw(t, "special") * float32(rapid.SampledFrom([]float64{1, 0.25}).Draw(t, "m"))
			default:
				src[i] = float32(rapid.Float64Range(-1, 1).Draw(t, "v")) * scale
			}
		}
		got, want := make([]q8KAct, nb), make([]q8KAct, nb)
		for i := range got { // stale contents must not leak through
			got[i].d, got[i].q[0], got[i].bsums[3] = 7, 5, 9
		}
		quantizeQ8K(got, src)
		quantizeQ8KGo(want, src)
		for b := range got {
			if got[b].q != want[b].q || got[b].bsums != want[b].bsums || math.Float32bits(got[b].d) != math.Float32bits(want[b].d) {
				t.Fatalf("block %d: AVX2 d %g bsums %v q %v\nGo d %g bsums %v q %v", b, got[b].d, got[b].bsums, got[b].q, want[b].d, want[b].bsums, want[b].q)
			}
		}
	})
}

// TestQ2KRowAVX2: the Q2_K row kernel gives dotQ2K's bits on random
// blocks (extreme scales included) and activations.
func TestQ2KRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernel cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		row := bytesGen(nb*q2KBytes).Draw(t, "row")
		setScales(t, row, 1, 0, nb, q2KBytes, 80, 82)
		act := q8KActGen(t, nb)
		got, want := dotQ2KRow(row, act), dotQ2K(row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("AVX2 %g, Go %g", got, want)
		}
	})
}

// TestQ3KRowAVX2: the Q3_K row kernel gives dotQ3K's bits on random
// blocks (extreme scales included) and activations.
func TestQ3KRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernel cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		row := bytesGen(nb*q3KBytes).Draw(t, "row")
		setScales(t, row, 1, 0, nb, q3KBytes, 108)
		act := q8KActGen(t, nb)
		got, want := dotQ3KRow(row, act), dotQ3K(row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("AVX2 %g, Go %g", got, want)
		}
	})
}

// TestLegacyRowAVX2: the vec_dot row kernels of Q4_0, Q5_0, Q4_1 and Q5_1
// give dotLegacyQ8's and dotLegacyQ8_1's bits on random blocks (extreme
// scales and minimums included) and activations.
func TestLegacyRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.SampledFrom([]DType{Q4_0, Q5_0, Q4_1, Q5_1}).Draw(t, "type")
		bb := typ.BlockBytes()
		nb := rapid.IntRange(1, 9).Draw(t, "blocks")
		row := bytesGen(nb*bb).Draw(t, "row")
		act := make([]q8Act, nb)
		s := make([]float32, nb)
		for b := 0; b < nb; b++ {
			h := f16Gen().Draw(t, "d")
			row[b*bb], row[b*bb+1] = byte(h), byte(h>>8)
			if typ == Q4_1 || typ == Q5_1 {
				h := f16Gen().Draw(t, "m")
				row[b*bb+2], row[b*bb+3] = byte(h), byte(h>>8)
			}
			copy(act[b].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8Range(-127, 127), rapid.SampledFrom([]int8{-127, 127, 0})), 32, 32).Draw(t, "x"))
			act[b].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
			s[b] = float32(rapid.Float64Range(-1000, 1000).Draw(t, "s"))
		}
		var got, want float32
		if typ == Q4_1 || typ == Q5_1 {
			got, want = dotLegacyQ8_1Row(typ, row, act, s), dotLegacyQ8_1(typ, row, act, s)
		} else {
			got, want = dotLegacyQ8Row(typ, row, act), dotLegacyQ8(typ, row, act)
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("%s: AVX2 %g, Go %g", typ, got, want)
		}
	})
}

// TestQ2KTileAVX512: the two-row Q2_K tile, both forms (AVX-512 where the
// CPU has it, AVX2), gives its Go twin's bits (and, from zero, dotQ2K's
// for each row and vector) on random blocks, scales (extremes included),
// activations and strides, for 1 to 9 vectors.
func TestQ2KTileAVX512(t *testing.T) {
	checkPairTile(t, q2KBytes, []int{80, 82}, q2kTile, q2kTileGo, dotQ2K)
}
