package tensor

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchMatrices holds one 4096x4096 matrix per weight type, made once: a
// realistic size for one projection of a 7B-class model.
var benchMatrices = sync.OnceValue(func() map[DType]Matrix {
	const n = 4096
	r := rand.New(rand.NewPCG(42, 42))
	src := randomRow(r, n*n, 0.02)
	out := map[DType]Matrix{}
	for _, typ := range weightTypes {
		out[typ] = quantizeMatrix(&testing.T{}, typ, n, n, src)
	}
	return out
})

// BenchmarkMatVec reports the weight bytes streamed per second and the
// matrix-vector products per second ("tok/s": one token of decode needs one
// product per weight matrix).
func BenchmarkMatVec(b *testing.B) {
	for _, typ := range weightTypes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", typ, threads), func(b *testing.B) {
				m := benchMatrices()[typ]
				p := NewPool(threads)
				defer p.Close()
				x := randomRow(rand.New(rand.NewPCG(1, 1)), m.Cols, 1)
				y := make([]float32, m.Rows)
				p.MatVec(y, m, x)
				b.SetBytes(int64(len(m.Data)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					p.MatVec(y, m, x)
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)*float64(len(m.Data))/sec/1e9, "GB/s")
				b.ReportMetric(float64(b.N)/sec, "tok/s")
			})
		}
	}
}

// BenchmarkMatMul runs 64 vectors at once (a prefill chunk) and reports
// vectors per second ("tok/s") and the equivalent weight GB/s a MatVec loop
// would need to match it.
func BenchmarkMatMul(b *testing.B) {
	const n = 64
	for _, typ := range weightTypes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/n=%d/threads=%d", typ, n, threads), func(b *testing.B) {
				m := benchMatrices()[typ]
				p := NewPool(threads)
				defer p.Close()
				x := randomRow(rand.New(rand.NewPCG(1, 1)), n*m.Cols, 1)
				y := make([]float32, n*m.Rows)
				p.MatMul(y, m, x, n)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					p.MatMul(y, m, x, n)
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)*n/sec, "tok/s")
				b.ReportMetric(float64(b.N)*n*float64(len(m.Data))/sec/1e9, "equivGB/s")
			})
		}
	}
}

// BenchmarkKernels measures the dot-product kernels on one row of 4096
// columns held in cache: the compute cost per multiply-add, without memory
// traffic.
func BenchmarkKernels(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 1))
	w, x0, x1 := randomRow(r, n, 0.02), randomRow(r, n, 1), randomRow(r, n, 1)
	h := make([]uint16, n)
	for i := range h {
		h[i] = F32ToF16(w[i])
	}
	row := make([]byte, n/32*34)
	if err := QuantizeRow(Q8_0, row, w); err != nil {
		b.Fatal(err)
	}
	a0, a1 := make([]q8Act, n/32), make([]q8Act, n/32)
	pairs := make([]q8Pair, n/32)
	for i := range a0 {
		quantizeActQ8_0(&a0[i], x0[32*i:], actQ8Flavor)
		quantizeActQ8_0(&a1[i], x1[32*i:], actQ8Flavor)
		packQ8Pair(&pairs[i], &a0[i], &a1[i])
	}
	var sink float32
	for _, c := range []struct {
		name string
		macs int
		f    func()
	}{
		{"F32", n, func() { sink += ggmlDotF32(w, x0) }},
		{"F16", n, func() { sink += dotF16(h, x0) }},
		{"BF16", n, func() { sink += dotBF16(h, x0) }},
		{"widened", n, func() { sink += dotExact(w, x0) }},
		{"widened-2vec", 2 * n, func() { s0, s1 := dot2Exact(w, x0, x1); sink += s0 + s1 }},
		{"Q8_0", n, func() { sink += dotQ8(row, a0) }},
		{"Q8_0-2vec", 2 * n, func() { s0, s1 := dot2Q8(row, pairs); sink += s0 + s1 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.macs), "ns/MAC")
		})
	}
	_ = sink
}
