package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The NEON kernel of dot_arm64.s against its plain-Go twin: equal bits.
// Cross-compile and run with
//
//	GOARCH=arm64 go test -c -o tensor.arm64 ./engine/tensor/
//	qemu-aarch64-static ./tensor.arm64 -test.run NEON
func TestDotF32NEON(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 255, 256, 257, 4096, 4103} {
		for _, kind := range []string{"normal", "wide", "grid", "cancel"} {
			w, x := make([]float32, n), make([]float32, n)
			for i := range w {
				switch kind {
				case "normal":
					w[i], x[i] = float32(r.NormFloat64()*0.02), float32(r.NormFloat64())
				case "wide": // products from 1e-34 to 1e30
					w[i] = float32(math.Copysign(math.Pow(10, r.Float64()*32-17), r.NormFloat64()))
					x[i] = float32(math.Copysign(math.Pow(10, r.Float64()*32-17), r.NormFloat64()))
				case "grid": // integers and halves: F32 midpoints are frequent
					w[i] = float32(r.IntN(8193) - 4096)
					x[i] = float32(r.IntN(8193)-4096) / 2
				case "cancel":
					w[i], x[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
					if i%16 >= 8 {
						w[i], x[i] = w[i-8], -x[i-8]
					}
				}
			}
			if kind == "grid" && n >= 16 {
				w[0], x[0], w[8], x[8] = 4096, 4096, 1, 1 // 2^24 + 1: a tie
			}
			if kind == "grid" && n >= 64 {
				w[32], x[32] = 1, 1 // the tie again, in lane 0 of 32
			}
			got, want := ggmlDotF32On(w, x, true), ggmlDotF32On(w, x, false)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%s, %d values: NEON %g (%#08x), Go %g (%#08x)", kind, n, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	// And through MatVec.
	const rows, cols = 13, 200
	w := make([]float32, rows*cols)
	x := make([]float32, cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	data := make([]byte, 4*len(w))
	if err := QuantizeRow(F32, data, w); err != nil {
		t.Fatal(err)
	}
	m, err := NewMatrix(F32, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(1)
	defer p.Close()
	got := make([]float32, rows)
	p.MatVec(got, m, x)
	for i := range got {
		if want := ggmlDotF32(w[i*cols:(i+1)*cols], x); got[i] != want {
			t.Fatal(fmt.Sprintf("MatVec row %d: %g, ggml_vec_dot_f32 twin %g", i, got[i], want))
		}
	}
}

// TestDotNVFP4FP4NEON: the NEON W4A4 kernel against its twin on edge and
// random inputs (the CPU, or qemu's "max" CPU, must have SDOT).
func TestDotNVFP4FP4NEON(t *testing.T) {
	if !useNEONDot {
		t.Skip("CPU lacks the dot-product extension: the NEON W4A4 kernel is off")
	}
	r := rand.New(rand.NewPCG(33, 34))
	for _, nb := range []int{0, 1, 2, 3, 7, 64, 65} {
		for rep := 0; rep < 25; rep++ {
			row := nvfp4EdgeRow(r, nb, rep)
			x := make([]float32, nb*nvBlock)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(r.Float64()*6-3))
			}
			act := make([]fp4Act, nb)
			inputScale := float32(0)
			if rep%2 == 1 {
				inputScale = float32(math.Exp(r.Float64()*8 - 10))
			}
			quantizeActFP4(act, x, inputScale)
			got, want := dotNVFP4FP4NEON(row, act), dotNVFP4FP4(row, act)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("W4A4 %d blocks, rep %d: NEON %g (%#08x), Go %g (%#08x)", nb, rep, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

func BenchmarkDotF32NEON(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	w, x := make([]float32, 4096), make([]float32, 4096)
	for i := range w {
		w[i], x[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	var sink float32
	for _, c := range []struct {
		name string
		f    func([]float32, []float32) float32
	}{
		{"NEON", func(w, x []float32) float32 { return ggmlDotF32On(w, x, true) }},
		{"Go", func(w, x []float32) float32 { return ggmlDotF32On(w, x, false) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				sink += c.f(w, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/MAC")
		})
	}
	_ = sink
}
