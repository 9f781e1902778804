package model

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"golang.org/x/sys/unix"
)

// benchSynthQ8 returns engine/quantize's `synth --size bench --type Q8_0
// --seed 1` qwen35 model (245 MB: bandwidth-bound on a CPU), written once
// under os.TempDir() and reused by later runs (WriteSynth writes it
// atomically, so a cached file is whole).
func benchSynthQ8(b *testing.B) *gguf.File {
	return cachedBenchFile(b, "edgellmd-synth-bench-q8_0-seed1.gguf", func(path string) error {
		return synth.Write(path, synth.Options{Size: "bench", Type: "Q8_0", Seed: 1})
	})
}

// benchSynthNVFP4 returns that bench model (F16, seed 1) quantized to
// NVFP4 (quantize.QuantizeFile; 131 MB), written once under os.TempDir()
// and reused like benchSynthQ8's (the rename makes a cached file whole).
func benchSynthNVFP4(b *testing.B) *gguf.File {
	return cachedBenchFile(b, "edgellmd-synth-bench-nvfp4-seed1.gguf", func(path string) error {
		in := filepath.Join(b.TempDir(), "bench-f16.gguf")
		if err := synth.Write(in, synth.Options{Size: "bench", Seed: 1}); err != nil {
			return err
		}
		tmp := path + ".tmp"
		if _, err := quantize.QuantizeFile(in, tmp, quantize.Options{Type: tensor.NVFP4}); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	})
}

// cachedBenchFile opens os.TempDir()/name, written by write (which must
// leave a whole file or none) when it is not there yet; it is closed at
// the benchmark's end.
func cachedBenchFile(b *testing.B, name string, write func(path string) error) *gguf.File {
	b.Helper()
	path := filepath.Join(os.TempDir(), name)
	if _, err := os.Stat(path); err != nil {
		if err := write(path); err != nil {
			b.Fatal(err)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// BenchmarkForwardMultiDecode decodes one token per pass for each of 1, 2,
// 4 and 8 sequences (ForwardMulti) on the synthetic qwen35 bench model in
// Q8_0 with an F16 KV cache, with 1 and 2 threads. "tok/s" is the
// aggregate: sequences × passes per second; "tok/cpu-s" divides by the
// process's CPU time instead, the figure to trust on a shared machine
// (with 2 threads it counts both).
func BenchmarkForwardMultiDecode(b *testing.B) {
	benchMultiDecode(b, benchSynthQ8(b))
}

// BenchmarkForwardNVFP4MultiDecode is BenchmarkForwardMultiDecode on the
// bench model in NVFP4, W4A8 (the pool's default: Q8_0 activations, as
// llama.cpp's CPU backend).
func BenchmarkForwardNVFP4MultiDecode(b *testing.B) {
	benchMultiDecode(b, benchSynthNVFP4(b))
}

func benchMultiDecode(b *testing.B, f *gguf.File) {
	for _, threads := range []int{1, 2} {
		for _, k := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("threads=%d/seqs=%d", threads, k), func(b *testing.B) {
				pool := tensor.NewPool(threads)
				defer pool.Close()
				m, err := Load(f, Options{KVType: tensor.F16, Pool: pool})
				if err != nil {
					b.Fatal(err)
				}
				const ctx = 512
				V := m.Hyper().Vocab
				seqs := make([]SeqBatch, k)
				for i := range seqs {
					// a different short prompt per sequence
					prompt := []int32{1, int32(2 + i), int32(3 + 2*i), 4}
					seqs[i] = SeqBatch{State: m.NewState(ctx), Logits: make([]float32, V)}
					if err := m.Forward(seqs[i].State, ChainBatch(prompt, 0, false), seqs[i].Logits); err != nil {
						b.Fatal(err)
					}
					seqs[i].Batch = ChainBatch([]int32{0}, 0, false)
				}
				b.ReportAllocs()
				var ru0, ru1 unix.Rusage
				b.ResetTimer()
				unix.Getrusage(unix.RUSAGE_SELF, &ru0)
				for it := 0; it < b.N; it++ {
					for i := range seqs {
						sb := &seqs[i]
						if sb.State.Len() == ctx {
							sb.State.Reset()
						}
						sb.Batch.Tokens[0], sb.Batch.Pos[0] = argmax(sb.Logits), int32(sb.State.Len())
					}
					if err := ForwardMulti(m, seqs); err != nil {
						b.Fatal(err)
					}
				}
				unix.Getrusage(unix.RUSAGE_SELF, &ru1)
				cpu := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e9
				b.ReportMetric(float64(k*b.N)/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric(float64(k*b.N)/cpu, "tok/cpu-s")
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/pass")
			})
		}
	}
}
