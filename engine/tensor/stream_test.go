package tensor

import (
	"fmt"
	"testing"
)

// BenchmarkStream is a STREAM-like measure of this machine's memory
// bandwidth (McCalpin's copy and triad kernels over arrays far larger than
// the caches), the roofline decode speed is set against: a decode step
// reads every weight once, so weight bytes per token × tokens/s can at
// best reach these GB/s. Threads split the arrays as Pool.Run splits rows.
func BenchmarkStream(b *testing.B) {
	const n = 32 << 20 // 32 Mi float32 per array: 128 MiB each
	a, bb, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], bb[i], c[i] = 1, 2, 0
	}
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		b.Run(fmt.Sprintf("copy/threads=%d", threads), func(b *testing.B) {
			b.SetBytes(int64(8 * n)) // read a, write c
			for range b.N {
				p.Run(n, func(lo, hi int) { copy(c[lo:hi], a[lo:hi]) })
			}
			b.ReportMetric(float64(8*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		b.Run(fmt.Sprintf("triad/threads=%d", threads), func(b *testing.B) {
			b.SetBytes(int64(12 * n)) // read a and bb, write c
			for range b.N {
				p.Run(n, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						c[i] = a[i] + 3*bb[i]
					}
				})
			}
			b.ReportMetric(float64(12*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		p.Close()
	}
}
