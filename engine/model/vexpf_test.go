package model

import (
	"math"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// vExpf is tensor.VExpf (ggml_v_expf) with a faster fma: the two give the
// same bits over the range a softmax feeds them (scores less their
// maximum: 0 down to the flush below -103.97), past it both ways up to
// |x| = 110 (overflow above 88.7), every 293rd float32 of each sign (some
// 7.6 million values), and at the edges.
func TestVExpfIsTensors(t *testing.T) {
	differ := 0
	check := func(x float32) {
		if got, want := vExpf(x), tensor.VExpf(x); math.Float32bits(got) != math.Float32bits(want) {
			if differ++; differ <= 5 {
				t.Errorf("vExpf(%g) = %g, tensor.VExpf %g", x, got, want)
			}
		}
	}
	for b := uint32(0); b <= math.Float32bits(110); b += 293 { // magnitudes grow with the bits
		x := math.Float32frombits(b)
		check(x)
		check(-x)
	}
	for _, x := range []float32{0, -0.0, 1, 88.7, 89, -103.97, -104, float32(math.Inf(-1))} {
		check(x)
	}
	if differ > 0 {
		t.Fatalf("%d values differ", differ)
	}
}

var sinkExp float32

// BenchmarkVExpf: vExpf against tensor.VExpf (the exactly rounded fma),
// one value at a time as the attention softmax calls it.
func BenchmarkVExpf(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func(float32) float32
	}{{"model", vExpf}, {"tensor", tensor.VExpf}} {
		b.Run(c.name, func(b *testing.B) {
			var s float32
			for i := range b.N {
				s += c.f(float32(-(i & 1023)) * 0.01)
			}
			sinkExp = s
		})
	}
}
