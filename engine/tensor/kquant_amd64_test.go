package tensor

import (
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
}

// TestKQuantDotsAVX2: the repacked Q4_K integer sums of the AVX2 kernel
// equal the Go twin's, for 1 to 9 vectors.
func TestKQuantDotsAVX2(t *testing.T) {
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
		}
		var sc [8]int16
		for i := range sc {
			sc[i] = int16(rapid.IntRange(0, 63).Draw(t, "sc"))
		}
		got, want := make([]int32, n), make([]int32, n)
		q4kDots(q, act, stride, n, &sc, got)
		q4kDotsGo(q, act, stride, n, &sc, want)
		for v := range got {
			if got[v] != want[v] {
				t.Fatalf("vector %d: AVX2 %d, Go %d", v, got[v], want[v])
			}
		}
	})
}
