package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestEncodeE4M3Row(t *testing.T) {
	// With a power-of-two scale every finite code survives the trip.
	for _, s := range []float32{1, 0.25, 1.0 / 64, 8} {
		var src [256]float32
		var want [256]byte
		n := 0
		for c := 0; c < 256; c++ {
			if c&0x7F == 0x7F {
				continue // NaN
			}
			src[n] = E4M3ToF32(uint8(c)) * s
			want[n] = uint8(c)
			n++
		}
		got := make([]byte, n)
		EncodeE4M3Row(got, src[:n], s)
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("scale %g: code %#02x comes back as %#02x", s, want[i], got[i])
			}
		}
		back := make([]float32, n)
		DecodeE4M3Row(back, got, s)
		for i := range back {
			if back[i] != src[i] && !(back[i] == 0 && src[i] == 0) {
				t.Errorf("scale %g: %g decodes as %g", s, src[i], back[i])
			}
		}
	}
	// Any scale: the code of x/scale, saturating, never NaN.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		s := float32(math.Exp(rng.Float64()*8 - 6))
		x := float32(rng.NormFloat64() * math.Exp(rng.Float64()*14-7))
		var got [1]byte
		EncodeE4M3Row(got[:], []float32{x}, s)
		if want := F32ToE4M3(x / s); got[0] != want {
			t.Fatalf("%g / %g: code %#02x, want %#02x", x, s, got[0], want)
		}
		if got[0]&0x7F == 0x7F {
			t.Fatalf("%g / %g gives NaN", x, s)
		}
	}
	var sat [2]byte
	EncodeE4M3Row(sat[:], []float32{float32(math.Inf(1)), -1e9}, 0.5)
	if sat != [2]byte{0x7E, 0xFE} {
		t.Errorf("saturation: %#v, want 0x7E 0xFE", sat)
	}
}

// TestDotE4M3 checks the order (against a spelled-out eight-lane sum) and
// the error against float64 (each lane of m terms: at most (m+3) roundings
// of 2^-24 relative, applied to the sum of absolute products).
func TestDotE4M3(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 63, 64, 128, 257} {
		k := make([]byte, n)
		x := make([]float32, n)
		for i := range k {
			k[i] = byte(rng.IntN(256))
			if k[i]&0x7F == 0x7F {
				k[i] = 0x7E
			}
			x[i] = float32(rng.NormFloat64())
		}
		var lanes [8]float32
		var exact, abs float64
		for i := range k {
			v := e4m3Table[k[i]]
			lanes[i%8] += float32(v * x[i])
			exact += float64(v) * float64(x[i])
			abs += math.Abs(float64(v) * float64(x[i]))
		}
		want := hsum8(lanes[0], lanes[1], lanes[2], lanes[3], lanes[4], lanes[5], lanes[6], lanes[7])
		got := DotE4M3(k, x)
		if got != want && !(n == 0 && got == 0) {
			t.Errorf("n=%d: %g, the eight-lane order gives %g", n, got, want)
		}
		if bound := float64(n/8+4) * 0x1p-24 * abs; math.Abs(float64(got)-exact) > bound {
			t.Errorf("n=%d: %g is %g from the exact %g (bound %g)", n, got, float64(got)-exact, exact, bound)
		}
		y := make([]float32, n)
		for i := range y {
			y[i] = float32(i)
		}
		AxpyE4M3(y, k, 0.75)
		for i := range y {
			if w := float32(i) + float32(0.75*e4m3Table[k[i]]); y[i] != w {
				t.Fatalf("AxpyE4M3[%d] = %g, want %g", i, y[i], w)
			}
		}
	}
}

func TestE4M3NotAGGUFType(t *testing.T) {
	if E4M3.Known() {
		t.Error("E4M3 is Known: a GGUF file could claim it")
	}
	if E4M3.String() != "E4M3" || E4M3.BlockBytes() != 1 || E4M3.BlockElems() != 1 {
		t.Errorf("E4M3: %s, %d bytes per %d values", E4M3, E4M3.BlockBytes(), E4M3.BlockElems())
	}
	if !NVFP4.Known() {
		t.Error("NVFP4 is not Known")
	}
}

// BenchmarkE4M3: one head of 256 FP8 keys dotted with a query and one of
// values added to an accumulator, as attention does per cache slot, through
// the dispatching functions and their plain-Go twins.
func BenchmarkE4M3(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	k := make([]byte, 256)
	x, y := make([]float32, 256), make([]float32, 256)
	for i := range k {
		k[i] = byte(r.IntN(0x7F))
		x[i] = float32(r.NormFloat64())
	}
	var sink float32
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Dot", func() { sink += DotE4M3(k, x) }},
		{"Dot-Go", func() { sink += dotE4M3(k, x) }},
		{"Axpy", func() { AxpyE4M3(y, k, 0.001) }},
		{"Axpy-Go", func() { axpyE4M3(y, k, 0.001) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
		})
	}
	_ = sink
}
