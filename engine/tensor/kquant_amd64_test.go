package tensor

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// bytesGen draws n bytes, often at the extremes (0x00, 0xFF) that the
// nibble and bit unpacking and the saturating pair sums are most likely
// to get wrong.
func bytesGen(n int) *rapid.Generator[[]byte] {
	return rapid.SliceOfN(rapid.OneOf(rapid.Byte(), rapid.SampledFrom([]byte{0, 0xFF, 0x0F, 0xF0, 0x55, 0xAA})), n, n)
}

// actGen draws a Q8_K super-block's quants, often at +-127.
func actGen() *rapid.Generator[[]int8] {
	return rapid.SliceOfN(rapid.OneOf(rapid.Int8Range(-127, 127), rapid.SampledFrom([]int8{-127, 127, 0})), qkK, qkK)
}

// TestKQuantLanesAVX2: the AVX2 integer cores give their Go twins' lanes
// on random blocks, activations and scales (the extremes included).
func TestKQuantLanesAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		q := bytesGen(128).Draw(t, "q")
		qh := bytesGen(64).Draw(t, "qh")
		var x [qkK]int8
		copy(x[:], actGen().Draw(t, "x"))
		var scv [64]int32
		for i, v := range rapid.SliceOfN(rapid.OneOf(rapid.Int32Range(-128, 127), rapid.SampledFrom([]int32{-128, 127, 63, 0})), 64, 64).Draw(t, "scv") {
			scv[i] = v
		}
		var got, want [8]int32
		sc := (*[8]int32)(scv[:8])
		q4kLanesAVX2(&q[0], &x[0], &sc[0], &got[0])
		q4kLanesGo(q, &x, sc, &want)
		if got != want {
			t.Fatalf("Q4_K lanes: AVX2 %v, Go %v", got, want)
		}
		q6kLanesAVX2(&q[0], &qh[0], &x[0], &scv[0], &got[0])
		q6kLanesGo(q, qh, &x, &scv, &want)
		if got != want {
			t.Fatalf("Q6_K lanes: AVX2 %v, Go %v", got, want)
		}
	})
}

// TestKQuantGoldenTwins runs the llama.cpp goldens on the plain-Go path.
func TestKQuantGoldenTwins(t *testing.T) {
	if !useSIMD {
		t.Skip("the plain-Go path is the only one here; TestKQuantGolden ran it")
	}
	useSIMD = false
	defer func() { useSIMD = true }()
	TestKQuantGolden(t)
	TestQ4KRepackedRows(t)
	TestLegacyRepackedRows(t)
}

// TestKQuantStepAVX2: the repacked Q4_K step of the AVX2 kernel (integer
// sums, minimums and the two fused multiply-adds per vector) equals the Go
// twin's, bit for bit, for 1 to 9 vectors.
func TestKQuantStepAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		q := bytesGen(128).Draw(t, "q")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		stride := rapid.IntRange(1, 3).Draw(t, "stride")
		act := make([]q8KAct, n*stride)
		for v := range act {
			copy(act[v].q[:], actGen().Draw(t, "x"))
			for k := range act[v].bsums {
				s := 0
				for _, x := range act[v].q[16*k : 16*k+16] {
					s += int(x)
				}
				act[v].bsums[k] = int16(s)
			}
			act[v].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "d"))
		}
		var sm [4]uint32
		q4KScaleBytes(bytesGen(12).Draw(t, "scales"), &sm)
		dW := float32(rapid.Float64Range(-1, 1).Draw(t, "dW"))
		dminW := float32(rapid.Float64Range(-1, 1).Draw(t, "dminW"))
		got, want := make([]float32, 2*n), make([]float32, 2*n)
		for i := range got {
			got[i] = float32(rapid.Float64Range(-100, 100).Draw(t, "acc"))
			want[i] = got[i]
		}
		q4kStep(q, act, stride, n, &sm, dW, dminW, got)
		q4kStepGo(q, act, stride, n, &sm, dW, dminW, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d]: AVX2 %g, Go %g", i, got[i], want[i])
			}
		}
	})
}

// TestKQuantStep6AVX2: the Q6_K step of the AVX2 kernel (scale vectors,
// lanes, the offset's correction, the fused multiply-adds) equals the Go
// twin's.
func TestKQuantStep6AVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		ql, qh, sc := bytesGen(128).Draw(t, "ql"), bytesGen(64).Draw(t, "qh"), bytesGen(16).Draw(t, "sc")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		stride := rapid.IntRange(1, 3).Draw(t, "stride")
		act := make([]q8KAct, n*stride)
		for v := range act {
			copy(act[v].q[:], actGen().Draw(t, "x"))
			for k := range act[v].bsums {
				s := 0
				for _, x := range act[v].q[16*k : 16*k+16] {
					s += int(x)
				}
				act[v].bsums[k] = int16(s)
			}
			act[v].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "d"))
		}
		dW := float32(rapid.Float64Range(-1, 1).Draw(t, "dW"))
		got, want := make([]float32, 8*n), make([]float32, 8*n)
		for i := range got {
			got[i] = float32(rapid.Float64Range(-100, 100).Draw(t, "acc"))
			want[i] = got[i]
		}
		var scratch [144]int16
		q6kStep(ql, qh, sc, act, stride, n, &scratch, dW, got)
		q6kStepGo(ql, qh, sc, act, stride, n, &scratch, dW, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("acc[%d]: AVX2 %g, Go %g", i, got[i], want[i])
			}
		}
	})
}

// TestLegacyRepackedAVX2: the AVX2 row kernel of repacked Q4_0 and IQ4_NL
// gives dotLegacyRepacked's bits on random blocks, activations and scales.
func TestLegacyRepackedAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.SampledFrom([]DType{Q4_0, IQ4_NL}).Draw(t, "type")
		nb := rapid.IntRange(1, 12).Draw(t, "blocks")
		row := bytesGen(nb*q4_0Bytes).Draw(t, "row")
		act := make([]q8Act, nb)
		for b := 0; b < nb; b++ {
			// an F16 scale of ordinary size, sometimes subnormal or large
			h := uint16(rapid.OneOf(rapid.Uint16Range(0x0001, 0x03FF), rapid.Uint16Range(0x1000, 0x5BFF)).Draw(t, "d"))
			row[b*q4_0Bytes], row[b*q4_0Bytes+1] = byte(h), byte(h>>8)
			copy(act[b].q[:], rapid.SliceOfN(rapid.Int8Range(-127, 127), 32, 32).Draw(t, "x"))
			act[b].d = float32(rapid.Float64Range(1e-6, 10).Draw(t, "dx"))
		}
		got, want := dotLegacyRepackedRow(typ, row, act), dotLegacyRepacked(typ, row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("%s: AVX2 %g, Go %g", typ, got, want)
		}
	})
}

// TestQ6KRowAVX2: the Q6_K row kernel of decode gives dotQ6K's bits on
// random blocks (extreme scales included) and activations.
func TestQ6KRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		row := bytesGen(nb*q6KBytes).Draw(t, "row")
		setScales(t, row, 1, 0, nb, q6KBytes, 208)
		act := q8KActGen(t, nb)
		got, want := dotQ6KRow(row, act), dotQ6K(row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("AVX2 %g, Go %g", got, want)
		}
	})
}

// TestQ5KRowAVX2: the Q5_K row kernel gives dotQ5K's bits on random blocks
// (extreme scales included) and activations.
func TestQ5KRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		row := bytesGen(nb*q5KBytes).Draw(t, "row")
		setScales(t, row, 1, 0, nb, q5KBytes, 0, 2)
		act := q8KActGen(t, nb)
		got, want := dotQ5KRow(row, act), dotQ5K(row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("AVX2 %g, Go %g", got, want)
		}
	})
}

// TestIQ4XSRowAVX2: the IQ4_XS row kernel gives dotIQ4XS's bits on random
// blocks (extreme scales included) and activations.
func TestIQ4XSRowAVX2(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2/FMA/F16C on this CPU: the kernels cannot run here")
	}
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 6).Draw(t, "blocks")
		row := bytesGen(nb*iq4XSBytes).Draw(t, "row")
		setScales(t, row, 1, 0, nb, iq4XSBytes, 0)
		act := q8KActGen(t, nb)
		got, want := dotIQ4XSRow(row, act), dotIQ4XS(row, act)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("AVX2 %g, Go %g", got, want)
		}
	})
}
