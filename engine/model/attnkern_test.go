package model

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The restructured attention and DeltaNet loops (useAttnKernels) give the
// same bits as the per-query loops they replace: prefill in uneven chunks
// (tiles and KV blocks not aligned), decode steps and a tree batch, for
// every KV type, on stories260K and a synth qwen35 model.
func TestAttnKernelsMatchLoops(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.gguf")
	if err := synth.Write(small, synth.Options{Size: "small", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{storiesPath, small} {
		for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := Load(f, Options{KVType: kv, Pool: testPool(t)})
			if err != nil {
				t.Fatal(err)
			}
			run := func(kern bool) [][]float32 {
				useAttnKernels = kern
				defer func() { useAttnKernels = true }()
				V := m.Hyper().Vocab
				st := m.NewState(400)
				var out [][]float32
				prompt := make([]int32, 300)
				for i := range prompt {
					prompt[i] = int32((i*7919 + 13) % V)
				}
				for _, c := range [][2]int{{0, 70}, {70, 71}, {71, 200}, {200, 265}, {265, 300}} {
					lg := make([]float32, (c[1]-c[0])*V)
					if err := m.Forward(st, ChainBatch(prompt[c[0]:c[1]], c[0], true), lg); err != nil {
						t.Fatal(err)
					}
					out = append(out, lg)
				}
				for i := 0; i < 5; i++ {
					lg := make([]float32, V)
					if err := m.Forward(st, ChainBatch([]int32{int32(i + 5)}, st.Len(), false), lg); err != nil {
						t.Fatal(err)
					}
					out = append(out, lg)
				}
				// a tree batch (verify), committed along a path, then a step
				L := int32(st.Len())
				tree := Batch{Tokens: []int32{7, 8, 9, 10, 11, 12}, Pos: []int32{L, L + 1, L + 1, L + 2, L + 2, L + 2},
					Parent: []int32{-1, 0, 0, 1, 1, 2}, Logits: []bool{true, true, true, true, true, true}}
				lg := make([]float32, 6*V)
				if err := m.Forward(st, tree, lg); err != nil {
					t.Fatal(err)
				}
				out = append(out, lg)
				if err := st.Commit([]int{0, 1, 4}); err != nil {
					t.Fatal(err)
				}
				lg = make([]float32, V)
				if err := m.Forward(st, ChainBatch([]int32{3}, st.Len(), false), lg); err != nil {
					t.Fatal(err)
				}
				out = append(out, lg)
				return out
			}
			want, got := run(false), run(true)
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s %v: pass %d logit %d: kernels %g, loops %g", filepath.Base(path), kv, i, j, got[i][j], want[i][j])
					}
				}
			}
		}
	}
}

// BenchmarkAttnKernels compares the restructured loops with the plain ones
// (useAttnKernels false) on the same machine state: prefill of 2048 tokens
// in chunks of 512 and a decode step at 2k context, F16 KV, two threads.
// EDGELLMD_ATTN_BENCH_MODEL adds a model file (e.g. synth --size bench),
// EDGELLMD_ATTN_BENCH_CTX sets the context, EDGELLMD_ATTN_BENCH_KV=f32 or
// e4m3 the KV cache type.
func BenchmarkAttnKernels(b *testing.B) {
	dir := b.TempDir()
	small := filepath.Join(dir, "small.gguf")
	if err := synth.Write(small, synth.Options{Size: "small", Seed: 1}); err != nil {
		b.Fatal(err)
	}
	models := [][2]string{{"stories260K", storiesPath}, {"synth-small", small}}
	if p := os.Getenv("EDGELLMD_ATTN_BENCH_MODEL"); p != "" {
		models = append(models, [2]string{"extra", p})
	}
	ctx := 2048
	if s := os.Getenv("EDGELLMD_ATTN_BENCH_CTX"); s != "" {
		ctx, _ = strconv.Atoi(s)
	}
	for _, mp := range models {
		f, err := gguf.Open(mp[1])
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		kv := tensor.F16
		switch os.Getenv("EDGELLMD_ATTN_BENCH_KV") {
		case "f32":
			kv = tensor.F32
		case "e4m3":
			kv = tensor.E4M3
		}
		m, err := Load(f, Options{KVType: kv, Pool: testPool(b)})
		if err != nil {
			b.Fatal(err)
		}
		V := m.Hyper().Vocab
		prompt := make([]int32, ctx)
		for i := range prompt {
			prompt[i] = int32((i*7919 + 13) % V)
		}
		lg := make([]float32, V)
		prefill := func(st State) {
			for s := 0; s < len(prompt); s += 512 {
				e := min(s+512, len(prompt))
				if err := m.Forward(st, ChainBatch(prompt[s:e], s, false), lg); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, kern := range []bool{false, true} {
			name := map[bool]string{false: "loops", true: "kernels"}[kern]
			b.Run(mp[0]+"/prefill/"+name, func(b *testing.B) {
				useAttnKernels = kern
				defer func() { useAttnKernels = true }()
				st := m.NewState(ctx)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					st.Reset()
					prefill(st)
				}
				b.ReportMetric(float64(b.N*ctx)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
		st := m.NewState(ctx + 1024)
		prefill(st)
		for _, kern := range []bool{false, true} {
			name := map[bool]string{false: "loops", true: "kernels"}[kern]
			b.Run(mp[0]+"/decode/"+name, func(b *testing.B) {
				useAttnKernels = kern
				defer func() { useAttnKernels = true }()
				if b.N > 512 {
					b.Skip("context would run out")
				}
				bt := ChainBatch([]int32{1}, 0, false)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					bt.Tokens[0], bt.Pos[0] = int32(i%V), int32(st.Len())
					if err := m.Forward(st, bt, lg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
