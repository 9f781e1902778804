package tensor

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
)

// benchKQuant is one matrix product with weights of type t (random blocks
// with ordinary scales), rows x cols, n vectors, on one thread; it reports
// the weight bytes read per second of one pass.
func benchKQuant(b *testing.B, t DType, rows, cols, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	rb, _ := t.RowBytes(int64(cols))
	data := make([]byte, int(rb)*rows)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	// Ordinary F16 scales (0x2000..0x2FFF: about 2^-7) in every block.
	bb := t.BlockBytes()
	offs := map[DType][]int{Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208}, Q4_0: {0}, Q8_0: {0}, Q3_K: {108}, Q2_K: {80, 82}, IQ4_XS: {0}, Q5_0: {0}, Q5_1: {0, 2}, Q4_1: {0, 2}}[t]
	for blk := 0; blk < len(data)/bb; blk++ {
		for _, o := range offs {
			data[blk*bb+o+1] = 0x20 | byte(rng.Uint32()&0x0F)
		}
	}
	m, err := NewMatrix(t, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, n*rows)
	p := NewPool(1)
	defer p.Close()
	b.SetBytes(int64(len(data)))
	runtime.LockOSThread() // a one-thread pool runs on the caller's thread
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	b.ResetTimer()
	for range b.N {
		p.MatMul(dst, m, x, n)
	}
	b.StopTimer()
	blocks := float64(b.N * rows * cols / qkK * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/blocks, "ns/superblock")
	// The thread's CPU time: on a machine shared with other work the wall
	// time counts the others' turns too.
	if cpu0 >= 0 {
		b.ReportMetric(float64(threadCPU()-cpu0)/blocks, "cpu-ns/superblock")
	}
}

// threadCPU is the calling thread's CPU time in ns (RUSAGE_THREAD), or
// -1 where there is none.
func threadCPU() int64 {
	var ru syscall.Rusage
	if runtime.GOOS != "linux" || syscall.Getrusage(1, &ru) != nil { // 1: RUSAGE_THREAD
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkKQuantQ4KVec(b *testing.B)    { benchKQuant(b, Q4_K, 3584, 1024, 1) }
func BenchmarkKQuantQ4KVec4(b *testing.B)   { benchKQuant(b, Q4_K, 3584, 1024, 4) }
func BenchmarkKQuantQ4KOddVec(b *testing.B) { benchKQuant(b, Q4_K, 3580, 1024, 1) }
func BenchmarkKQuantQ6KVec(b *testing.B)    { benchKQuant(b, Q6_K, 3584, 1024, 1) }
func BenchmarkKQuantQ5KVec(b *testing.B)    { benchKQuant(b, Q5_K, 3584, 1024, 1) }
func BenchmarkKQuantQ4_0Vec(b *testing.B)   { benchKQuant(b, Q4_0, 3584, 1024, 1) }
func BenchmarkKQuantQ8_0Vec(b *testing.B)   { benchKQuant(b, Q8_0, 3584, 1024, 1) }

// Prefill shapes: 64 vectors, the tiles' case.
func BenchmarkKQuantQ4KMat64(b *testing.B)  { benchKQuant(b, Q4_K, 1024, 1024, 64) }
func BenchmarkKQuantQ6KMat64(b *testing.B)  { benchKQuant(b, Q6_K, 1024, 1024, 64) }
func BenchmarkKQuantQ5KMat64(b *testing.B)  { benchKQuant(b, Q5_K, 1024, 1024, 64) }
func BenchmarkKQuantQ4_0Mat64(b *testing.B) { benchKQuant(b, Q4_0, 1024, 1024, 64) }

func BenchmarkKQuantQ2KVec(b *testing.B) { benchKQuant(b, Q2_K, 3584, 1024, 1) }
func BenchmarkKQuantQ3KVec(b *testing.B) { benchKQuant(b, Q3_K, 3584, 1024, 1) }

func BenchmarkKQuantQ5_0Vec(b *testing.B)  { benchKQuant(b, Q5_0, 3584, 1024, 1) }
func BenchmarkKQuantQ5_1Vec(b *testing.B)  { benchKQuant(b, Q5_1, 3584, 1024, 1) }
func BenchmarkKQuantQ2KMat64(b *testing.B) { benchKQuant(b, Q2_K, 1024, 1024, 64) }

// The tiles of issue 35's second round: Q5_0 (llama-quantize's fallback
// for rows not a multiple of 256), Q3_K and IQ4_XS at 64 vectors.
func BenchmarkKQuantQ5_0Mat64(b *testing.B)  { benchKQuant(b, Q5_0, 1024, 1024, 64) }
func BenchmarkKQuantQ3KMat64(b *testing.B)   { benchKQuant(b, Q3_K, 1024, 1024, 64) }
func BenchmarkKQuantIQ4XSMat64(b *testing.B) { benchKQuant(b, IQ4_XS, 1024, 1024, 64) }
func BenchmarkKQuantIQ4XSVec(b *testing.B)   { benchKQuant(b, IQ4_XS, 3584, 1024, 1) }
func BenchmarkKQuantQ4_1Mat64(b *testing.B)  { benchKQuant(b, Q4_1, 1024, 1024, 64) }
func BenchmarkKQuantQ5_1Mat64(b *testing.B)  { benchKQuant(b, Q5_1, 1024, 1024, 64) }
