package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The NEON F16 and BF16 kernels of half_arm64.s against their plain-Go
// twins (dotF16, dotBF16): equal bits, on every finite and infinite weight
// code, activations rounded to the weight type or not, cancelling sums,
// tails of every length.
func TestDotHalfNEON(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	code := func(kind string, bf bool) uint16 {
		for {
			h := uint16(r.IntN(1 << 16))
			switch kind {
			case "normal": // realistic weights around 0.02
				f := float32(r.NormFloat64() * 0.02)
				if bf {
					return F32ToBF16(f)
				}
				return F32ToF16(f)
			case "edge": // zeros, subnormals, largest, infinities, or any
				h = []uint16{0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7F7F, 0xFF80, h}[r.IntN(12)]
			}
			if bf && h&0x7F80 == 0x7F80 && h&0x7F != 0 || !bf && h&0x7C00 == 0x7C00 && h&0x3FF != 0 {
				continue // NaN codes (see TestDotHalfNEONNaN)
			}
			return h
		}
	}
	for _, bf := range []bool{false, true} {
		for _, n := range []int{0, 1, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 256, 4101} {
			for _, kind := range []string{"normal", "any", "edge", "cancel", "raw"} {
				w, x := make([]uint16, n), make([]float32, n)
				for i := range w {
					w[i] = code(kind, bf)
					x[i] = float32(r.NormFloat64() * math.Exp(r.Float64()*10-5))
					if kind == "cancel" && i%16 >= 8 {
						w[i], x[i] = w[i-8], -x[i-8]
					}
					if kind != "raw" { // the engine rounds activations to the weight type
						if bf {
							x[i] = BF16ToF32(F32ToBF16(x[i]))
						} else {
							x[i] = RoundF16(x[i])
						}
					}
				}
				var got, want float32
				if bf {
					got, want = dotBF16NEON(w, x), dotBF16(w, x)
				} else {
					got, want = dotF16NEON(w, x), dotF16(w, x)
				}
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("bf16 %v, %s, %d values: NEON %g (%#08x), Go %g (%#08x)", bf, kind, n, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
	// Rows through dotHalfRowsSIMD, the arm64 dispatch entry.
	const rows, cols = 7, 203
	w, x := make([]uint16, rows*cols), make([]float32, cols)
	for i := range w {
		w[i] = code("any", false)
	}
	for i := range x {
		x[i] = RoundF16(float32(r.NormFloat64()))
	}
	for _, bf := range []bool{false, true} {
		got := make([]float32, rows)
		dotHalfRowsSIMD(got, w, cols, x, bf)
		for i := range got {
			want := dotF16(w[i*cols:(i+1)*cols], x)
			if bf {
				want = dotBF16(w[i*cols:(i+1)*cols], x)
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("dotHalfRowsSIMD bf16 %v row %d: %g, Go twin %g", bf, i, got[i], want)
			}
		}
	}
}

// TestDotHalfNEONNaN: a NaN weight gives NaN in both (FCVTL quiets a
// signalling F16 NaN, the table may not, so only NaN-ness is compared).
func TestDotHalfNEONNaN(t *testing.T) {
	for _, bf := range []bool{false, true} {
		for _, h := range []uint16{0x7C01, 0x7E00, 0xFE00, 0x7F81, 0x7FC0} {
			w := []uint16{0x3C00, 0x3C00, 0x3C00, 0x3C00, h, 0x3C00, 0x3C00, 0x3C00, 0x3C00}
			x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
			got, want := dotF16NEON(w, x), dotF16(w, x)
			if bf {
				got, want = dotBF16NEON(w, x), dotBF16(w, x)
			}
			if math.IsNaN(float64(got)) != math.IsNaN(float64(want)) {
				t.Fatalf("bf16 %v, code %#04x: NEON %g, Go %g", bf, h, got, want)
			}
		}
	}
}

func BenchmarkDotHalfNEON(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	w, x := make([]uint16, 4096), make([]float32, 4096)
	for i := range w {
		w[i], x[i] = F32ToF16(float32(r.NormFloat64())), RoundF16(float32(r.NormFloat64()))
	}
	var sink float32
	for _, c := range []struct {
		name string
		f    func([]uint16, []float32) float32
	}{{"F16/NEON", dotF16NEON}, {"F16/Go", dotF16}, {"BF16/NEON", dotBF16NEON}, {"BF16/Go", dotBF16}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				sink += c.f(w, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/MAC")
		})
	}
	_ = sink
}
