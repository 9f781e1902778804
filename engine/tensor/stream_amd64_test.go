package tensor

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkRowStreams reads an F16 matrix far larger than the caches
// (256 MiB) against one vector with the AVX2 four-row kernel, four
// adjacent rows at a time ("adjacent", how dotHalfRowsSIMD took them
// before) and four rows a quarter of a chunk apart ("quarters",
// streamQuarter's order, what it does now), and one row at a time
// ("single"), and reports weight GB/s: the memory access pattern, not the
// arithmetic, sets decode speed here. Compare with BenchmarkStream.
func BenchmarkRowStreams(b *testing.B) {
	requireSIMDBench(b)
	const cols = 1024
	const rows = 128 << 10
	w := make([]uint16, rows*cols)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range w {
		w[i] = F32ToF16(float32(r.NormFloat64()) * 0.02)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = roundF16(float32(r.NormFloat64()))
	}
	dst := make([]float32, rows)
	var l [32]float32
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"adjacent", func() {
			for r := 0; r < rows; r += 4 {
				dotF16Lanes4(&w[r*cols], 2*cols, &x[0], cols/8, &l)
			}
		}},
		{"quarters", func() {
			// In chunks of 448 rows, as MatVec cuts a 3584-row matrix
			// for one thread.
			for lo := 0; lo < rows; lo += 448 {
				hi := min(lo+448, rows)
				dotHalfRowsSIMD(dst[lo:hi], w[lo*cols:hi*cols], cols, x, false)
			}
		}},
		{"single", func() {
			for r := range dst {
				dst[r] = dotF16SIMD(w[r*cols:(r+1)*cols], x)
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(2 * len(w)))
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(b.N)*float64(2*len(w))/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func requireSIMDBench(b *testing.B) {
	if !useSIMD {
		b.Skip("CPU lacks AVX2, FMA or F16C: the SIMD kernels are off")
	}
}
