package model

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// quantizedStories writes stories260K quantized to NVFP4 by engine/quantize
// (ModelOpt's recipe, no input scales: W4A4 takes a scale per vector) into
// a temporary file and opens it.
func quantizedStories(t *testing.T) *gguf.File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stories260K-nvfp4.gguf")
	if _, err := quantize.QuantizeFile(storiesPath, out, quantize.Options{Type: tensor.NVFP4}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// logSoftmax64 returns log-probabilities of a logit row in float64.
func logSoftmax64(row []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(row))
	ls := math.Log(s) + mx
	for i, v := range row {
		out[i] = float64(v) - ls
	}
	return out
}

// greedyAgreement counts the positions where two sets of greedy runs
// pick the same token, in all and before each run's first divergence
// (after it the texts differ, and agreement is partly chance).
func greedyAgreement(a, b [][]int32) (same, prefix, total int) {
	for i := range a {
		diverged := false
		for k := range a[i] {
			if a[i][k] == b[i][k] {
				same++
				if !diverged {
					prefix++
				}
			} else {
				diverged = true
			}
		}
		total += len(a[i])
	}
	return same, prefix, total
}

// TestNVFP4Accuracy measures the NVFP4 model in each activation mode, with
// F16 and FP8 KV caches, on the ten golden prompts, against the
// unquantized stories260K (F32 weights, F16 KV, llama.cpp's default) and
// against the same NVFP4 file with F32 activations (W4A16, F16 KV): greedy
// agreement over 64 tokens, and, teacher-forced on llama.cpp's
// continuations, top-1 agreement and the mean KL(reference || quantized)
// per position. The floors are loose: they catch a broken kernel (which
// lands near chance, 1/512), not a small loss.
func TestNVFP4Accuracy(t *testing.T) {
	golden := readGolden(t, "../../testdata/golden/stories260K-greedy64.jsonl")
	run := func(m Model) (tf [][]float32, gr [][]int32) {
		for _, g := range golden {
			gr = append(gr, greedy(t, m, m.NewState(len(g.PromptTokens)+len(g.Tokens)+1), g.PromptTokens, len(g.Tokens)))
		}
		return teacherForced(t, m, golden), gr
	}
	compare := func(a, b [][]float32) (top1, kl float64) {
		for i := range a {
			if argmax(a[i]) == argmax(b[i]) {
				top1++
			}
			p, q := logSoftmax64(b[i]), logSoftmax64(a[i])
			for j := range p {
				kl += math.Exp(p[j]) * (p[j] - q[j])
			}
		}
		return top1 / float64(len(a)), kl / float64(len(a))
	}
	refTF, refGreedy := run(openModel(t, storiesPath, tensor.F16, testPool(t)))
	f := quantizedStories(t)
	load := func(act tensor.NVFP4Activations, kv tensor.DType) Model {
		pool := testPool(t)
		pool.SetNVFP4Activations(act)
		m, err := Load(f, Options{KVType: kv, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a16TF, a16Greedy := run(load(tensor.NVFP4ActF32, tensor.F16))
	for _, tc := range []struct {
		name    string
		act     tensor.NVFP4Activations
		kv      tensor.DType
		minTop1 float64 // teacher-forced, against the unquantized model
	}{
		{"W4A16/F16KV", tensor.NVFP4ActF32, tensor.F16, 0.8},
		{"W4A8/F16KV", tensor.NVFP4ActQ8, tensor.F16, 0.8},
		{"W4A4/F16KV", tensor.NVFP4ActFP4, tensor.F16, 0.7},
		{"W4A16/FP8KV", tensor.NVFP4ActF32, tensor.E4M3, 0.75},
		{"W4A4/FP8KV", tensor.NVFP4ActFP4, tensor.E4M3, 0.65},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf, gr := run(load(tc.act, tc.kv))
			t1, kl := compare(tf, refTF)
			same, prefix, total := greedyAgreement(gr, refGreedy)
			t.Logf("vs unquantized: greedy %.1f%% of %d positions (%.1f%% before first divergence); teacher-forced top-1 %.1f%%, mean KL %.4f nats",
				100*float64(same)/float64(total), total, 100*float64(prefix)/float64(total), 100*t1, kl)
			a1, akl := compare(tf, a16TF)
			same, prefix, total = greedyAgreement(gr, a16Greedy)
			t.Logf("vs W4A16/F16KV: greedy %.1f%% (%.1f%% before first divergence); teacher-forced top-1 %.1f%%, mean KL %.4f nats",
				100*float64(same)/float64(total), 100*float64(prefix)/float64(total), 100*a1, akl)
			if t1 < tc.minTop1 {
				t.Errorf("teacher-forced top-1 %.3f against the unquantized model, floor %.2f", t1, tc.minTop1)
			}
		})
	}
}

// BenchmarkDecodeSynthBenchNVFP4 decodes with engine/quantize's `synth
// --size bench` qwen35 model (F16, seed 1) quantized to NVFP4, one thread,
// in each activation mode and with F16 and FP8 KV caches ("tokens/s";
// "tokens/cpu-s" counts the decoding thread's own CPU time, the figure to
// trust on a shared machine; "MB/token" is the NVFP4 file's tensor bytes,
// which one token reads).
func BenchmarkDecodeSynthBenchNVFP4(b *testing.B) {
	dir := b.TempDir()
	in, out := filepath.Join(dir, "bench-f16.gguf"), filepath.Join(dir, "bench-nvfp4.gguf")
	if err := synth.Write(in, synth.Options{Size: "bench", Seed: 1}); err != nil {
		b.Fatal(err)
	}
	rep, err := quantize.QuantizeFile(in, out, quantize.Options{Type: tensor.NVFP4})
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		act  tensor.NVFP4Activations
		kv   tensor.DType
	}{
		{"W4A8/F16KV", tensor.NVFP4ActQ8, tensor.F16},
		{"W4A4/F16KV", tensor.NVFP4ActFP4, tensor.F16},
		{"W4A4/FP8KV", tensor.NVFP4ActFP4, tensor.E4M3},
		{"W4A16/F16KV", tensor.NVFP4ActF32, tensor.F16},
	} {
		b.Run(c.name, func(b *testing.B) {
			pool := tensor.NewPool(1)
			defer pool.Close()
			pool.SetNVFP4Activations(c.act)
			m, err := Load(f, Options{KVType: c.kv, Pool: pool})
			if err != nil {
				b.Fatal(err)
			}
			const ctx = 256
			st := m.NewState(ctx)
			logits := make([]float32, m.Hyper().Vocab)
			batch := ChainBatch([]int32{1}, 0, false)
			// A one-thread pool runs everything on this goroutine: its
			// thread's CPU time is the decode's, whatever else the machine
			// runs.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var ru0, ru1 unix.Rusage
			b.ResetTimer()
			unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
			for i := 0; i < b.N; i++ {
				if st.Len() == ctx {
					st.Reset()
				}
				batch.Tokens[0], batch.Pos[0] = argmax(logits), int32(st.Len())
				if err := m.Forward(st, batch, logits); err != nil {
					b.Fatal(err)
				}
			}
			unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
			cpu := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e9
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(b.N)/cpu, "tokens/cpu-s")
			b.ReportMetric(float64(rep.OutBytes)/1e6, "MB/token")
		})
	}
}
