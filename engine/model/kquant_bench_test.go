package model

import (
	"os"
	"runtime"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"golang.org/x/sys/unix"
)

// BenchmarkKQuantFile runs prefill (one pass of 128 tokens) and decode
// (one token a pass) at one thread on the GGUF file named by
// EDGELLMD_BENCH_GGUF (a llama-quantize output such as
// docs/performance/kquants.md's bench files), and reports tokens per
// second of wall time and of the thread's own CPU time ("tok/cpu-s", the
// figure to trust on a machine shared with other work). Without the
// variable it skips: the files are hundreds of MB, made as the page says.
func BenchmarkKQuantFile(b *testing.B) {
	path := os.Getenv("EDGELLMD_BENCH_GGUF")
	if path == "" {
		b.Skip("set EDGELLMD_BENCH_GGUF to a GGUF file")
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pool := tensor.NewPool(1)
	defer pool.Close()
	m, err := Load(f, Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	const prompt = 128
	toks := make([]int32, prompt)
	for i := range toks {
		toks[i] = int32(1 + (i*7919)%(m.Hyper().Vocab-1))
	}
	logits := make([]float32, m.Hyper().Vocab)
	run := func(b *testing.B, name string, perOp int, op func(st State)) {
		b.Run(name, func(b *testing.B) {
			st := m.NewState(prompt + 64)
			runtime.LockOSThread() // a one-thread pool runs on this goroutine's thread
			defer runtime.UnlockOSThread()
			var ru0, ru1 unix.Rusage
			b.ResetTimer()
			unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
			for range b.N {
				op(st)
			}
			unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
			cpu := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e9
			b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(b.N*perOp)/cpu, "tok/cpu-s")
		})
	}
	run(b, "prefill128", prompt, func(st State) {
		st.Reset()
		if err := m.Forward(st, ChainBatch(toks, 0, false), logits); err != nil {
			b.Fatal(err)
		}
	})
	run(b, "decode", 1, func(st State) {
		if st.Len() >= prompt+64 { // contexts of 1 to 192 tokens
			st.Reset()
		}
		if err := m.Forward(st, ChainBatch([]int32{argmax(logits)}, st.Len(), false), logits); err != nil {
			b.Fatal(err)
		}
	})
}
