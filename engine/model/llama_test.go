package model

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

const storiesPath = "../../testdata/models/stories260K.gguf" // the repository's one copy

type goldenLine struct {
	Prompt       string  `json:"prompt"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
}

func readGolden(t testing.TB, path string) []goldenLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g goldenLine
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// openModel loads a GGUF file for a test and closes it at the end.
func openModel(t testing.TB, path string, kv tensor.DType, pool *tensor.Pool) Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := Load(f, Options{KVType: kv, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testPool(t testing.TB) *tensor.Pool {
	p := tensor.NewPool(2)
	t.Cleanup(p.Close)
	return p
}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// greedy prefills prompt as one chain and decodes n tokens one at a time.
func greedy(t testing.TB, m Model, st State, prompt []int32, n int) []int32 {
	t.Helper()
	logits := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(st, ChainBatch(prompt, st.Len(), false), logits); err != nil {
		t.Fatal(err)
	}
	var out []int32
	b := ChainBatch([]int32{0}, 0, false)
	for len(out) < n {
		tok := argmax(logits)
		out = append(out, tok)
		b.Tokens[0], b.Pos[0] = tok, int32(st.Len())
		if err := m.Forward(st, b, logits); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStoriesGolden reproduces llama.cpp's greedy continuations of
// stories260K with an F16 KV cache, token for token.
func TestStoriesGolden(t *testing.T) {
	m := openModel(t, storiesPath, tensor.F16, testPool(t))
	for _, g := range readGolden(t, "../../testdata/golden/stories260K-greedy64.jsonl") {
		st := m.NewState(len(g.PromptTokens) + len(g.Tokens) + 1)
		got := greedy(t, m, st, g.PromptTokens, len(g.Tokens))
		for i := range g.Tokens {
			if got[i] != g.Tokens[i] {
				t.Errorf("%q: token %d is %d, llama.cpp has %d\n got  %v\n want %v", g.Prompt, i, got[i], g.Tokens[i], got, g.Tokens)
				break
			}
		}
	}
}

// TestDecodeAllocs checks that a decode step allocates nothing once the
// state's scratch has been sized.
func TestDecodeAllocs(t *testing.T) {
	m := openModel(t, storiesPath, tensor.F16, testPool(t))
	st := m.NewState(256)
	logits := make([]float32, m.Hyper().Vocab)
	b := ChainBatch([]int32{1}, 0, false)
	if err := m.Forward(st, b, logits); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		b.Tokens[0], b.Pos[0] = argmax(logits), int32(st.Len())
		if err := m.Forward(st, b, logits); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a decode step allocates %v times, want 0", allocs)
	}
}

// BenchmarkDecodeStories260K measures greedy decode speed, one token per
// forward pass, F16 KV cache, two threads.
func BenchmarkDecodeStories260K(b *testing.B) {
	m := openModel(b, storiesPath, tensor.F16, testPool(b))
	const ctx = 512
	st := m.NewState(ctx)
	logits := make([]float32, m.Hyper().Vocab)
	batch := ChainBatch([]int32{1}, 0, false)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st.Len() == ctx {
			st.Reset()
		}
		batch.Tokens[0], batch.Pos[0] = argmax(logits), int32(st.Len())
		if err := m.Forward(st, batch, logits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func TestStoriesHyper(t *testing.T) {
	hp := openModel(t, storiesPath, tensor.F16, testPool(t)).Hyper()
	want := Hyper{Arch: "llama", Vocab: 512, Context: 2048, Embd: 64, Layers: 5, Heads: 8, KVHeads: 4,
		HeadDim: 8, FFN: 172, RopeDims: 8, RopeBase: 10000, NormEps: 1e-5}
	if hp.Arch != want.Arch || hp.Vocab != want.Vocab || hp.Context != want.Context || hp.Embd != want.Embd ||
		hp.Layers != want.Layers || hp.Heads != want.Heads || hp.KVHeads != want.KVHeads || hp.HeadDim != want.HeadDim ||
		hp.FFN != want.FFN || hp.RopeDims != want.RopeDims || hp.RopeBase != want.RopeBase || hp.NormEps != want.NormEps {
		t.Errorf("Hyper = %+v\nwant    %+v", hp, want)
	}
}

// TestStoriesTruncate cuts an attention-only state back and checks that it
// continues exactly as a state that never held the cut tokens.
func TestStoriesTruncate(t *testing.T) {
	m := openModel(t, storiesPath, tensor.F16, testPool(t))
	prompt := []int32{1, 403, 407, 261, 378}
	fresh := m.NewState(64)
	want := greedy(t, m, fresh, prompt, 10)
	cut := m.NewState(64)
	lg := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(cut, ChainBatch(append(append([]int32{}, prompt...), 300, 301, 302), 0, false), lg); err != nil {
		t.Fatal(err)
	}
	if err := cut.Truncate(len(prompt) - 1); err != nil {
		t.Fatal(err)
	}
	got := greedy(t, m, cut, prompt[len(prompt)-1:], 10)
	if !slices.Equal(got, want) {
		t.Errorf("after Truncate: %v, want %v", got, want)
	}
}
