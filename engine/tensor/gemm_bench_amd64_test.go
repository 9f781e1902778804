package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// gemmBenchMatrices holds rows x cols matrices per type for BenchmarkGemm.
var gemmBenchMatrices = sync.OnceValue(func() map[string]Matrix {
	out := map[string]Matrix{}
	r := rand.New(rand.NewPCG(7, 7))
	for _, shape := range [][2]int{{1024, 1024}, {4096, 1024}} {
		rows, cols := shape[0], shape[1]
		src := randomRow(r, rows*cols, 0.02)
		for _, typ := range []DType{F16, BF16, Q8_0, NVFP4} {
			out[fmt.Sprintf("%s/%dx%d", typ, rows, cols)] = quantizeMatrix(&testing.T{}, typ, rows, cols, src)
		}
	}
	return out
})

// BenchmarkGemm measures MatMul with n vectors on one thread, with the
// tile kernels (tiles=on) and with the one-vector kernels they replace
// (tiles=off), and reports GFLOP/s (two per multiply-add) and vectors per
// second. NVFP4 runs W4A8 and W4A4 (NVFP4-A4). These are the AVX2
// kernels; BenchmarkMatMulAVX512 measures the AVX-512 ones beside them.
// go test -run NONE -bench Gemm -benchtime 200ms ./engine/tensor/
func BenchmarkGemm(b *testing.B) {
	if !useSIMD {
		b.Skip("no SIMD kernels")
	}
	defer setWide(false)()
	defer func() { useTiles = useSIMD }()
	for _, name := range []string{"Q8_0", "F16", "BF16", "NVFP4", "NVFP4-A4"} {
		for _, shape := range []string{"1024x1024", "4096x1024"} {
			for _, n := range []int{1, 2, 4, 16, 64, 512} {
				for _, tiles := range []bool{false, true} {
					if n == 1 && tiles {
						continue
					}
					b.Run(fmt.Sprintf("%s/%s/n=%d/tiles=%v", name, shape, n, tiles), func(b *testing.B) {
						typ := name
						act := NVFP4ActQ8
						if name == "NVFP4-A4" {
							typ, act = "NVFP4", NVFP4ActFP4
						}
						m := gemmBenchMatrices()[typ+"/"+shape]
						p := NewPool(1)
						defer p.Close()
						p.SetNVFP4Activations(act)
						useTiles = tiles
						x := randomRow(rand.New(rand.NewPCG(1, 1)), n*m.Cols, 1)
						y := make([]float32, n*m.Rows)
						p.MatMul(y, m, x, n)
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						b.ReportAllocs()
						b.ResetTimer()
						cpu0 := threadCPUNanos()
						for b.Loop() {
							p.MatMul(y, m, x, n)
						}
						// This machine is shared: the thread's own CPU
						// time is the steadier figure.
						sec := float64(threadCPUNanos()-cpu0) / 1e9
						b.ReportMetric(sec*1e9/float64(b.N), "cpu-ns/op")
						b.ReportMetric(float64(b.N)*2*float64(n*m.Rows*m.Cols)/sec/1e9, "GFLOP/s")
						b.ReportMetric(float64(b.N)*float64(n)/sec, "vec/s")
					})
				}
			}
		}
	}
}

// BenchmarkGemmKernels runs the tile kernels on one row of 4096 columns
// with their vectors, all in cache (the compute cost without memory
// traffic), next to the one-vector four-row kernels they replace, and
// reports the thread's CPU ns per multiply-add.
func BenchmarkGemmKernels(b *testing.B) {
	if !useSIMD {
		b.Skip("no SIMD kernels")
	}
	const cols, n = 4096, 8
	r := rand.New(rand.NewPCG(3, 3))
	q8m := quantizeMatrix(&testing.T{}, Q8_0, 4, cols, randomRow(r, 4*cols, 0.02))
	nvm := randNVFP4(r, 4, cols)
	hm := quantizeMatrix(&testing.T{}, F16, 4, cols, randomRow(r, 4*cols, 0.02))
	bm := quantizeMatrix(&testing.T{}, BF16, 4, cols, randomRow(r, 4*cols, 0.02))
	x := randomRow(r, n*cols, 1)
	nb := cols / q8Block
	q8 := make([]q8Act, n*nb)
	for i := range q8 {
		quantizeActQ8_0(&q8[i], x[i*q8Block:], actQ8Flavor)
	}
	pq, pn := make([]byte, n*nb*q8ActBytes), make([]byte, n*nb*q8ActBytes)
	for v := 0; v < n; v++ {
		packQ8Tile(pq, q8[v*nb:(v+1)*nb], v, n, nb)
		packNVQ8Tile(pn, q8[v*nb:(v+1)*nb], v, n, nb/2)
	}
	pq4, pn4 := make([]byte, 4*nb*q8ActBytes), make([]byte, 4*nb*q8ActBytes)
	for v := 0; v < 4; v++ {
		packQ8Tile(pq4, q8[v*nb:(v+1)*nb], v, 4, nb)
		packNVQ8Tile(pn4, q8[v*nb:(v+1)*nb], v, 4, nb/2)
	}
	f4 := make([]fp4Act, n*cols/nvBlock)
	for v := 0; v < n; v++ {
		quantizeActFP4(f4[v*cols/nvBlock:(v+1)*cols/nvBlock], x[v*cols:(v+1)*cols], 0)
	}
	hx := make([]float32, 4*cols)
	for i := range hx {
		hx[i] = roundF16(x[i])
	}
	var l64 [64]float32
	var l32 [32]float32
	var l96 [96]float32
	h := u16View(hm.Data)
	bh := u16View(bm.Data)
	dst := make([]float32, 4)
	for _, c := range []struct {
		name string
		macs int
		f    func()
	}{
		{"Q8_0-1x8", n * cols, func() { gemmQ8Lanes1x8(&q8m.Data[0], &pq[0], nb, &l64) }},
		{"Q8_0-1x4", 4 * cols, func() { gemmQ8Lanes1x4(&q8m.Data[0], &pq4[0], nb, &l32) }},
		{"Q8_0-old-4rows", 4 * cols, func() { dotQ8RowsSIMD(dst, q8m.Data, len(q8m.Data)/4, q8[:nb]) }},
		{"W4A8-1x8", n * cols, func() { gemmNVFP4Q8Lanes1x8(&nvm.Data[0], &pn[0], cols/nvBlock, &l64) }},
		{"W4A8-1x4", 4 * cols, func() { gemmNVFP4Q8Lanes1x4(&nvm.Data[0], &pn4[0], cols/nvBlock, &l32) }},
		{"W4A8-old-4rows", 4 * cols, func() { dotNVFP4Q8RowsSIMD(dst, nvm.Data, len(nvm.Data)/4, q8[:nb]) }},
		{"W4A4-1x4", 4 * cols, func() {
			gemmNVFP4FP4Lanes1x4(&nvm.Data[0], &f4[0], cols/nvBlock*int(unsafe.Sizeof(fp4Act{})), cols/nvBlock, &l32)
		}},
		{"W4A4-old-4rows", 4 * cols, func() { dotNVFP4FP4RowsSIMD(dst, nvm.Data, len(nvm.Data)/4, f4[:cols/nvBlock], 1) }},
		{"F16-3x4", 12 * cols, func() { gemmF16Lanes3x4(&h[0], 2*cols, &hx[0], 4*cols, cols/8, &l96) }},
		{"BF16-3x4", 12 * cols, func() { gemmBF16Lanes3x4(&bh[0], 2*cols, &hx[0], 4*cols, cols/8, &l96) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPUNanos()
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(threadCPUNanos()-cpu0)/float64(b.N)/float64(c.macs), "cpu-ns/MAC")
		})
	}
}
