package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPUNanos is the CPU time of the calling OS thread.
func threadCPUNanos() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// The NVFP4 kernels of nvfp4_amd64.s against their plain-Go twins
// (dotNVFP4Q8 in nvfp4.go, dotNVFP4FP4 in nvfp4a4.go): equal bits on random
// and edge-case inputs.

func TestDotNVFP4Q8SIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, nb := range []int{0, 1, 2, 3, 7, 64, 65} {
		for rep := 0; rep < 25; rep++ {
			rows := []int{1, 3, 4, 5, 8, 11, 13, 18}[rep%8]
			data := nvfp4EdgeRow(r, rows*nb, rep)
			act := q8EdgeAct(r, nb, rep)
			rb := nb * nvBlockBytes
			got := make([]float32, rows)
			dotNVFP4Q8RowsSIMD(got, data, rb, act)
			for i := range got {
				row := data[i*rb : (i+1)*rb]
				want := dotNVFP4Q8(row, act)
				what := fmt.Sprintf("W4A8 %d blocks, row %d of %d, rep %d", nb, i, rows, rep)
				sameBitsOrFail(t, what, got[i], want)
				sameBitsOrFail(t, what+" (one row)", dotNVFP4Q8SIMD(row, act), want)
			}
		}
	}
	// Through MatVec on a quantized matrix, both ways.
	m := randNVFP4(r, 33, 512)
	x := randomRow(r, 512, 1)
	p := NewPool(1)
	defer p.Close()
	got := make([]float32, 33)
	p.MatVec(got, m, x)
	act := make([]q8Act, 512/32)
	for b := range act {
		quantizeActQ8_0(&act[b], x[32*b:], actQ8Flavor)
	}
	for i := range got {
		sameBitsOrFail(t, fmt.Sprintf("W4A8 MatVec row %d", i), got[i], dotNVFP4Q8(m.Data[i*288:(i+1)*288], act))
	}
}

func TestDotNVFP4FP4SIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, nb := range []int{0, 1, 2, 3, 7, 64, 65} {
		for rep := 0; rep < 25; rep++ {
			rows := []int{1, 3, 4, 5, 8, 11, 13, 18}[rep%8]
			data := nvfp4EdgeRow(r, rows*nb, rep)
			x := make([]float32, nb*nvBlock)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(r.Float64()*6-3))
				if rep%5 == 2 && i%3 == 0 {
					x[i] = 0
				}
			}
			act := make([]fp4Act, nb)
			inputScale := float32(0)
			if rep%2 == 1 {
				inputScale = float32(math.Exp(r.Float64()*8 - 10)) // static, often saturating
			}
			invG := quantizeActFP4(act, x, inputScale)
			rb := nb * nvBlockBytes
			got := make([]float32, rows)
			dotNVFP4FP4RowsSIMD(got, data, rb, act, invG)
			for i := range got {
				row := data[i*rb : (i+1)*rb]
				want := dotNVFP4FP4(row, act)
				what := fmt.Sprintf("W4A4 %d blocks, row %d of %d, rep %d", nb, i, rows, rep)
				sameBitsOrFail(t, what, got[i], want*invG)
				sameBitsOrFail(t, what+" (one row)", dotNVFP4FP4SIMD(row, act), want)
			}
		}
	}
}

// BenchmarkNVFP4Kernels: 4096-value rows in cache, each kernel and its
// twin ("ns/MAC" per multiply-add), one row or four at a time.
func BenchmarkNVFP4Kernels(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 1))
	m := randNVFP4(r, 1, n)
	x := randomRow(r, n, 1)
	q8 := make([]q8Act, n/32)
	for i := range q8 {
		quantizeActQ8_0(&q8[i], x[32*i:], actQ8Flavor)
	}
	f4 := make([]fp4Act, n/64)
	quantizeActFP4(f4, x, 0)
	m4 := randNVFP4(r, 4, n)
	rb, dst := n/nvBlock*nvBlockBytes, make([]float32, 4)
	var sink float32
	for _, c := range []struct {
		name string
		simd bool
		f    func()
	}{
		{"W4A8-Go", false, func() { sink += dotNVFP4Q8(m.Data, q8) }},
		{"W4A8-AVX2", true, func() { sink += dotNVFP4Q8SIMD(m.Data, q8) }},
		{"W4A8-AVX2-4rows", true, func() { dotNVFP4Q8RowsSIMD(dst, m4.Data, rb, q8) }},
		{"W4A4-Go", false, func() { sink += dotNVFP4FP4(m.Data, f4) }},
		{"W4A4-AVX2", true, func() { sink += dotNVFP4FP4SIMD(m.Data, f4) }},
		{"W4A4-AVX2-4rows", true, func() { dotNVFP4FP4RowsSIMD(dst, m4.Data, rb, f4, 1) }},
		{"W4A16-Go", false, func() { sink += dotNVFP4F32(m.Data, x) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.simd && !useSIMD {
				b.Skip("no SIMD kernels on this CPU")
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			cpu0 := threadCPUNanos()
			for i := 0; i < b.N; i++ {
				c.f()
			}
			cpu := threadCPUNanos() - cpu0
			macs := n
			if strings.HasSuffix(c.name, "4rows") {
				macs = 4 * n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(macs), "ns/MAC")
			// This machine is shared: the thread's own CPU time per MAC is
			// the steadier figure.
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(macs), "cpu-ns/MAC")
		})
	}
	_ = sink
}

// BenchmarkNVFP4MatVecTwins is BenchmarkNVFP4MatVec with the SIMD kernels
// switched off: the plain-Go twins' speed on the same matrix, for
// comparison ("cpu-ns/op": the thread's own CPU time, steadier than wall
// time on a shared machine).
func BenchmarkNVFP4MatVecTwins(b *testing.B) {
	m := randNVFP4(rand.New(rand.NewPCG(42, 42)), 4096, 4096)
	x := randomRow(rand.New(rand.NewPCG(1, 1)), m.Cols, 1)
	y := make([]float32, m.Rows)
	for _, simd := range []bool{false, true} {
		for _, mode := range []struct {
			name string
			act  NVFP4Activations
		}{{"W4A8", NVFP4ActQ8}, {"W4A4", NVFP4ActFP4}} {
			name := mode.name + "-Go"
			if simd {
				name = mode.name + "-AVX2"
			}
			b.Run(name, func(b *testing.B) {
				if simd && !useSIMD {
					b.Skip("no SIMD kernels on this CPU")
				}
				saved := useSIMD
				useSIMD = simd
				defer func() { useSIMD = saved }()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				p := NewPool(1)
				defer p.Close()
				p.SetNVFP4Activations(mode.act)
				p.MatVec(y, m, x)
				b.SetBytes(int64(len(m.Data)))
				b.ResetTimer()
				cpu0 := threadCPUNanos()
				for i := 0; i < b.N; i++ {
					p.MatVec(y, m, x)
				}
				b.ReportMetric(float64(threadCPUNanos()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestE4M3SIMD: the AVX2 loops over FP8 codes against their twins on
// every code (NaN codes give NaN on both sides, whatever the payload) and
// every tail length.
func TestE4M3SIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(41, 42))
	same := func(what string, got, want float32) {
		t.Helper()
		if got != got && want != want {
			return
		}
		sameBitsOrFail(t, what, got, want)
	}
	for _, n := range simdLengths {
		for rep := 0; rep < 6; rep++ {
			k := make([]byte, n)
			x := make([]float32, n)
			for i := range k {
				k[i] = byte(r.IntN(256))
				if rep < 4 && k[i]&0x7F == 0x7F {
					k[i] ^= 1 // no NaN codes in most runs: they would hide the rest
				}
				x[i] = float32(r.NormFloat64() * math.Exp(r.Float64()*20-10))
			}
			if rep == 5 {
				for i := range k {
					k[i] = byte(i) // every code in order
				}
			}
			what := fmt.Sprintf("%d codes, rep %d", n, rep)
			same("DotE4M3 "+what, dotE4M3SIMD(k, x), dotE4M3(k, x))
			y0, y1 := make([]float32, n), make([]float32, n)
			for i := range y0 {
				y0[i] = float32(r.NormFloat64())
				y1[i] = y0[i]
			}
			a := float32(r.NormFloat64())
			axpyE4M3SIMD(y0, k, a)
			axpyE4M3(y1, k, a)
			for i := range y0 {
				same(fmt.Sprintf("AxpyE4M3 %s [%d]", what, i), y0[i], y1[i])
			}
		}
	}
}
