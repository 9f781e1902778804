package tensor_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// End-to-end figures for the attention and DeltaNet kernels (attn_*.go):
// prefill of a 2048-token prompt in chunks of 512 (the engine's
// prefillChunk), and a decode step at 2k context, F16 KV cache, two
// threads. They live here, in an external test package, because the model
// package imports this one. Run with e.g.
//
//	go test ./engine/tensor/ -run '^$' -bench 'Prefill|DecodeAt2k' -benchtime 3x
//
// EDGELLMD_ATTN_BENCH_MODEL=/path/to/file.gguf adds that model (e.g. a
// `synth --size bench` one) to the set.

func attnBenchModels(b *testing.B) map[string]string {
	dir := b.TempDir()
	small := filepath.Join(dir, "synth-small.gguf")
	if err := synth.Write(small, synth.Options{Size: "small", Seed: 1}); err != nil {
		b.Fatal(err)
	}
	m := map[string]string{
		"synth-small": small,
		"stories260K": "../../testdata/models/stories260K.gguf",
	}
	if p := os.Getenv("EDGELLMD_ATTN_BENCH_MODEL"); p != "" {
		m["extra"] = p
	}
	return m
}

func openBenchModel(b *testing.B, path string) model.Model {
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	pool := tensor.NewPool(2)
	b.Cleanup(pool.Close)
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchPrompt(m model.Model, n int) []int32 {
	v := m.Hyper().Vocab
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7919 + 13) % v)
	}
	return p
}

func prefill(b *testing.B, m model.Model, st model.State, prompt []int32, logits []float32) {
	for start := 0; start < len(prompt); start += 512 {
		end := min(start+512, len(prompt))
		if err := m.Forward(st, model.ChainBatch(prompt[start:end], st.Len(), false), logits); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPrefill2048(b *testing.B) {
	for name, path := range attnBenchModels(b) {
		b.Run(name, func(b *testing.B) {
			m := openBenchModel(b, path)
			st := m.NewState(2048)
			logits := make([]float32, m.Hyper().Vocab)
			prompt := benchPrompt(m, 2048)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				st.Reset()
				prefill(b, m, st, prompt, logits)
			}
			b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkDecodeAt2k(b *testing.B) {
	for name, path := range attnBenchModels(b) {
		b.Run(name, func(b *testing.B) {
			m := openBenchModel(b, path)
			const ctx = 2048
			st := m.NewState(ctx + 256)
			logits := make([]float32, m.Hyper().Vocab)
			prefill(b, m, st, benchPrompt(m, ctx), logits)
			batch := model.ChainBatch([]int32{1}, 0, false)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if st.Len() == ctx+256 {
					b.StopTimer()
					st.Reset()
					prefill(b, m, st, benchPrompt(m, ctx), logits)
					b.StartTimer()
				}
				batch.Tokens[0], batch.Pos[0] = int32(i%m.Hyper().Vocab), int32(st.Len())
				if err := m.Forward(st, batch, logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
