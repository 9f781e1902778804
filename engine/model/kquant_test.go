package model

import (
	"fmt"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// kquantFiles are files llama-quantize made from stories260K (whose rows
// of 64 and 172 values take the legacy fallbacks) and from a synthetic
// qwen35 whose rows are 256 values (the K-quants themselves), with
// llama.cpp's greedy tokens on them (its AVX2 build, F16 KV cache;
// testdata/kquant/README.md). exact files match every token of the
// goldens llama.cpp made with the prompt as one batch. On the others
// llama.cpp's own arithmetic depends on the batch: its prompt pass sums
// some products otherwise than its one-token decode steps (repacked Q4_K's
// gemm, IQ4_XS's IQP panels, tinyBLAS for IQ4_NL;
// docs/performance/kquants.md says which, with the evidence), and the
// engine, whose bits do not depend on the batch, keeps the decode steps'
// arithmetic: their floor is the number of golden tokens before the first
// divergence, summed over the prompts, as it stands, so that the test
// catches any step back. oneToken says that llama.cpp fed one token at a
// time gives other tokens than its batched prompt
// (golden-ub1-<name>.jsonl); TestKQuantGoldenOneToken holds every file to
// those (or, where they are the same, to the batched goldens) exactly.
var kquantFiles = []struct {
	name     string
	exact    bool
	floor    int
	oneToken bool
}{
	{"stories260K-Q4_K_M", true, 0, false},
	{"stories260K-Q5_K_M", true, 0, false},
	{"stories260K-Q6_K", true, 0, false},
	{"stories260K-Q4_0", true, 0, false},
	{"stories260K-Q3_K_M", true, 0, false},
	{"stories260K-IQ4_XS", false, 611, true},
	{"synth-kquant-Q4_K_M", false, 276, true},
	{"synth-kquant-Q5_K_M", true, 0, false},
	{"synth-kquant-Q6_K", true, 0, false},
	{"synth-kquant-Q4_0", true, 0, false},
	{"synth-kquant-Q3_K_M", false, 296, true},
	{"synth-kquant-Q2_K", true, 0, false},
	{"synth-kquant-IQ4_XS", false, 284, true},
}

// TestKQuantGolden reproduces llama.cpp's greedy continuations on every
// preset.
func TestKQuantGolden(t *testing.T) {
	for _, f := range kquantFiles {
		t.Run(f.name, func(t *testing.T) {
			m := openModel(t, "../../testdata/kquant/"+f.name+".gguf", tensor.F16, testPool(t))
			same, total, prefix := 0, 0, 0
			var first []string
			for _, g := range readGolden(t, "../../testdata/kquant/golden-"+f.name+".jsonl") {
				st := m.NewState(len(g.PromptTokens) + len(g.Tokens) + 1)
				got := greedy(t, m, st, g.PromptTokens, len(g.Tokens))
				total += len(g.Tokens)
				i := 0
				for i < len(g.Tokens) && got[i] == g.Tokens[i] {
					i++
				}
				prefix += i
				if i == len(g.Tokens) {
					same++
				} else {
					first = append(first, fmt.Sprintf("%q: token %d is %d, llama.cpp has %d", g.Prompt, i, got[i], g.Tokens[i]))
				}
			}
			t.Logf("%s: %d prompts identical, %d of %d tokens before the first divergence", f.name, same, prefix, total)
			switch {
			case f.exact && prefix != total:
				for _, s := range first {
					t.Error(s)
				}
			case !f.exact && prefix < f.floor:
				t.Errorf("%d tokens before the first divergences, fewer than the %d recorded", prefix, f.floor)
				for _, s := range first {
					t.Log(s)
				}
			}
		})
	}
}

// TestKQuantGoldenOneToken reproduces llama.cpp's greedy continuations
// with every token in a ubatch of its own (the prompt fed one token at a
// time, golden-ub1.mjs), token for token on every preset: the shape at
// which llama.cpp's arithmetic is its decode steps' for every type, so
// that the engine's is checked exactly where the batched goldens cannot
// (kquantFiles).
func TestKQuantGoldenOneToken(t *testing.T) {
	for _, f := range kquantFiles {
		t.Run(f.name, func(t *testing.T) {
			m := openModel(t, "../../testdata/kquant/"+f.name+".gguf", tensor.F16, testPool(t))
			path := "../../testdata/kquant/golden-" + f.name + ".jsonl"
			if f.oneToken {
				path = "../../testdata/kquant/golden-ub1-" + f.name + ".jsonl"
			}
			logits := make([]float32, m.Hyper().Vocab)
			for _, g := range readGolden(t, path) {
				st := m.NewState(len(g.PromptTokens) + len(g.Tokens) + 1)
				b := ChainBatch([]int32{0}, 0, false)
				for _, tok := range g.PromptTokens {
					b.Tokens[0], b.Pos[0] = tok, int32(st.Len())
					if err := m.Forward(st, b, logits); err != nil {
						t.Fatal(err)
					}
				}
				for i, want := range g.Tokens {
					got := argmax(logits)
					if got != want {
						t.Errorf("%q: token %d is %d, llama.cpp (one token a ubatch) has %d", g.Prompt, i, got, want)
						break
					}
					b.Tokens[0], b.Pos[0] = got, int32(st.Len())
					if err := m.Forward(st, b, logits); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
