package gpu

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Passes over several sequences against each sequence alone. The bar is
// bits: every op of a pass but attention and the DeltaNet recurrence works
// row by row in an order the row count does not change (MatMul's contract,
// checked by TestMatMul), and those two run per sequence with the shape
// the sequence alone has, so each sequence's logits, hidden rows and state
// must be exactly ForwardHidden's on it alone.

// multiCase is a model the multi-sequence tests run.
type multiCase struct {
	name string
	path func(t testing.TB) string
	kv   tensor.DType
	act  tensor.NVFP4Activations
}

// multiCases: qwen35 (attention and DeltaNet) with F32 weights over an
// F16 cache (attention_f16's path for small batches) and with NVFP4
// weights and activations (a scale per vector: the conversion most tied
// to its row), and the llama stories model over an F32 cache.
var multiCases = []multiCase{
	{"qwen35 F32 F16-KV", func(t testing.TB) string { return synthFile(t, "tiny", "F32", false) }, tensor.F16, tensor.NVFP4ActQ8},
	{"qwen35 NVFP4-A4 E4M3-KV", func(t testing.TB) string { return nvfp4File(t, synthFile(t, "tiny", "F32", false)) }, tensor.E4M3, tensor.NVFP4ActFP4},
	{"stories260K F32-KV", func(testing.TB) string { return storiesPath }, tensor.F32, tensor.NVFP4ActQ8},
}

type multiModel interface {
	model.Model
	model.MultiForwarder
	ForwardGreedy(model.State, model.Batch, []int32) error
	ForwardMultiGreedy([]model.SeqBatch, [][]int32) error
}

// multiPair is one sequence twice: a state that runs in passes beside
// others and one that runs alone, fed the same batches.
type multiPair struct {
	multi, alone model.State
}

func newPairs(m model.Model, n, maxTokens int) []multiPair {
	p := make([]multiPair, n)
	for i := range p {
		p[i] = multiPair{m.NewState(maxTokens), m.NewState(maxTokens)}
	}
	return p
}

// sameBits reports the first index where a and b differ in bits, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// multiStep runs batches[i] on pairs[i] for every i: one ForwardMulti over
// the multi states, one ForwardHidden per alone state. It checks that the
// logits and hidden rows are the same bits and the states the same length,
// and returns each sequence's logits (the rows that want them).
func multiStep(t *testing.T, m multiModel, pairs []multiPair, batches []model.Batch) [][]float32 {
	t.Helper()
	V, E := m.Hyper().Vocab, m.Hyper().Embd
	n := len(pairs)
	seqs := make([]model.SeqBatch, n)
	want := make([][]float32, n)
	wantH := make([][]float32, n)
	// the sequences' logits consecutive in one buffer, as an engine may
	// pass them, and their hidden rows each in its own
	rows := make([]int, n)
	all := 0
	for i, b := range batches {
		rows[i] = outRows(&b, 0, len(b.Tokens))
		all += rows[i]
	}
	lg := make([]float32, all*V)
	r := 0
	for i, b := range batches {
		seqs[i] = model.SeqBatch{State: pairs[i].multi, Batch: b, Logits: lg[r*V : (r+rows[i])*V], Hidden: make([]float32, rows[i]*E)}
		r += rows[i]
		want[i] = make([]float32, rows[i]*V)
		wantH[i] = make([]float32, rows[i]*E)
		if err := m.ForwardHidden(pairs[i].alone, b, want[i], wantH[i]); err != nil {
			t.Fatalf("sequence %d alone: %v", i, err)
		}
	}
	if err := m.ForwardMulti(seqs); err != nil {
		t.Fatalf("ForwardMulti: %v", err)
	}
	out := make([][]float32, n)
	for i := range seqs {
		if k := sameBits(seqs[i].Logits, want[i]); k >= 0 {
			t.Fatalf("sequence %d (%d tokens): logit %d (row %d) is %g beside the others, %g alone", i, len(batches[i].Tokens), k, k/V, seqs[i].Logits[k], want[i][k])
		}
		if k := sameBits(seqs[i].Hidden, wantH[i]); k >= 0 {
			t.Fatalf("sequence %d: hidden value %d is %g beside the others, %g alone", i, k, seqs[i].Hidden[k], wantH[i][k])
		}
		if a, b := pairs[i].multi.Len(), pairs[i].alone.Len(); a != b {
			t.Fatalf("sequence %d: %d tokens after the pass beside the others, %d alone", i, a, b)
		}
		out[i] = seqs[i].Logits
	}
	return out
}

// multiPrompt is a prompt of n tokens, distinct for each seed.
func multiPrompt(V, seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((seed*131 + i*17 + i*i*7 + 1) % V)
	}
	return p
}

// lastTokens is the argmax of each sequence's last row of logits.
func lastTokens(lg [][]float32, V int) [][]int32 {
	out := make([][]int32, len(lg))
	for i, l := range lg {
		out[i] = []int32{argmax(l[len(l)-V:])}
	}
	return out
}

func decodeBatches(pairs []multiPair, next [][]int32) []model.Batch {
	b := make([]model.Batch, len(pairs))
	for i := range pairs {
		b[i] = model.ChainBatch(next[i], pairs[i].multi.Len(), false)
	}
	return b
}

func loadMulti(t testing.TB, c multiCase) multiModel {
	t.Helper()
	_, gm := loadPair(t, c.path(t), c.kv, c.act)
	return gm.(multiModel)
}

// TestMultiDecode: 2, 3 and 4 sequences prefill prompts of different
// lengths in one pass, then decode together, step by step.
func TestMultiDecode(t *testing.T) {
	for _, c := range multiCases {
		t.Run(c.name, func(t *testing.T) {
			m := loadMulti(t, c)
			V := m.Hyper().Vocab
			for _, n := range []int{2, 3, 4} {
				pairs := newPairs(m, n, 96)
				batches := make([]model.Batch, n)
				for i := range batches {
					batches[i] = model.ChainBatch(multiPrompt(V, 10*n+i, 3+11*i), 0, false)
				}
				lg := multiStep(t, m, pairs, batches)
				for step := 0; step < 4; step++ {
					lg = multiStep(t, m, pairs, decodeBatches(pairs, lastTokens(lg, V)))
				}
			}
		})
	}
}

// TestMultiPrefillBesideDecode: a prompt chunk of one sequence (the last
// row's logits, then every row's) in the pass of the others' decode steps.
func TestMultiPrefillBesideDecode(t *testing.T) {
	for _, c := range multiCases {
		t.Run(c.name, func(t *testing.T) {
			m := loadMulti(t, c)
			V := m.Hyper().Vocab
			pairs := newPairs(m, 3, 160)
			first := make([]model.Batch, 3)
			for i := range first {
				first[i] = model.ChainBatch(multiPrompt(V, i, 5+3*i), 0, false)
			}
			lg := multiStep(t, m, pairs, first)
			for step, allLogits := range []bool{false, true, false} {
				next := lastTokens(lg, V)
				batches := decodeBatches(pairs, next)
				chunk := multiPrompt(V, 40+step, 37)
				batches[step%3] = model.ChainBatch(chunk, pairs[step%3].multi.Len(), allLogits)
				lg = multiStep(t, m, pairs, batches)
			}
		})
	}
}

// TestMultiTreeBesideChains: a verify tree of one sequence and a verify
// chain of another beside a decode step and a prompt chunk; after Commit
// of the same paths on both sides the sequences decode alike.
func TestMultiTreeBesideChains(t *testing.T) {
	for _, c := range multiCases {
		t.Run(c.name, func(t *testing.T) {
			m := loadMulti(t, c)
			V := m.Hyper().Vocab
			pairs := newPairs(m, 4, 96)
			first := make([]model.Batch, 4)
			for i := range first {
				first[i] = model.ChainBatch(multiPrompt(V, 7+i, 4+5*i), 0, false)
			}
			lg := multiStep(t, m, pairs, first)
			next := lastTokens(lg, V)
			batches := decodeBatches(pairs, next)
			// sequence 0: a tree of 7 nodes, every node's logits
			parent := []int32{-1, 0, 0, 1, 2, 2, 4}
			tree := model.Batch{Tokens: multiPrompt(V, 90, 7), Parent: parent, Pos: make([]int32, 7), Logits: make([]bool, 7)}
			for i := range parent {
				d := int32(0)
				for j := parent[i]; j >= 0; j = parent[j] {
					d++
				}
				tree.Pos[i], tree.Logits[i] = int32(pairs[0].multi.Len())+d, true
			}
			batches[0] = tree
			// sequence 2: a verify chain of 4 tokens, every row's logits
			vc := model.ChainBatch(append(next[2], multiPrompt(V, 91, 3)...), pairs[2].multi.Len(), true)
			vc.Verify = true
			batches[2] = vc
			// sequence 3: a prompt chunk
			batches[3] = model.ChainBatch(multiPrompt(V, 92, 20), pairs[3].multi.Len(), false)
			multiStep(t, m, pairs, batches)
			// the chains committed; the tree and the verify chain wait for
			// Commit, refusing a pass until then
			for _, i := range []int{1, 3} {
				if err := pairs[i].multi.Commit([]int{0}); err == nil {
					t.Fatalf("sequence %d: Commit after a chain accepted", i)
				}
			}
			refused := []model.SeqBatch{
				{State: pairs[1].multi, Batch: model.ChainBatch(next[1], pairs[1].multi.Len(), false), Logits: make([]float32, V)},
				{State: pairs[2].multi, Batch: model.ChainBatch(next[2], pairs[2].multi.Len(), false), Logits: make([]float32, V)},
			}
			var se *model.SeqError
			if err := m.ForwardMulti(refused); !errors.As(err, &se) || se.Index != 1 {
				t.Fatalf("a pass over a state with a pending verify chain: %v, want a SeqError for sequence 1", err)
			}
			for i, path := range map[int][]int{0: {0, 2, 5}, 2: {0, 1}} {
				for _, st := range []model.State{pairs[i].multi, pairs[i].alone} {
					if err := st.Commit(path); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range next {
				next[i] = []int32{int32((i*13 + 5) % V)}
			}
			lg = multiStep(t, m, pairs, decodeBatches(pairs, next))
			multiStep(t, m, pairs, decodeBatches(pairs, lastTokens(lg, V)))
		})
	}
}

// TestMultiLong: more rows than one recorded pass holds (several command
// buffers), and a chain longer than a state's pass, which runs alone. On
// the llama model: DeltaNet's scan walks a chain's tokens one by one,
// which lavapipe makes slow at these lengths.
func TestMultiLong(t *testing.T) {
	c := multiCases[2]
	m := loadMulti(t, c)
	V := m.Hyper().Vocab
	pairs := newPairs(m, 4, 640)
	batches := []model.Batch{
		model.ChainBatch(multiPrompt(V, 1, 200), 0, false),
		model.ChainBatch(multiPrompt(V, 2, chunkTokens+50), 0, true), // alone, in two passes
		model.ChainBatch(multiPrompt(V, 3, 250), 0, false),
		model.ChainBatch(multiPrompt(V, 4, 120), 0, true), // 570 rows shared: two passes
	}
	lg := multiStep(t, m, pairs, batches)
	multiStep(t, m, pairs, decodeBatches(pairs, lastTokens(lg, V)))
}

// TestMultiGreedy: top tokens for the sequences that ask for them, logits
// for the others, in one pass; as ForwardGreedy and ForwardHidden alone.
func TestMultiGreedy(t *testing.T) {
	m := loadMulti(t, multiCases[0])
	V := m.Hyper().Vocab
	pairs := newPairs(m, 3, 96)
	for step := 0; step < 4; step++ {
		batches := make([]model.Batch, 3)
		for i := range batches {
			toks := multiPrompt(V, 20*step+i, 1)
			if step == 0 {
				toks = multiPrompt(V, i, 6+4*i)
			}
			batches[i] = model.ChainBatch(toks, pairs[i].multi.Len(), step == 2 && i == 1)
		}
		seqs := make([]model.SeqBatch, 3)
		top := make([][]int32, 3)
		wantTop := make([][]int32, 3)
		var wantLg []float32
		for i, b := range batches {
			rows := outRows(&b, 0, len(b.Tokens))
			seqs[i] = model.SeqBatch{State: pairs[i].multi, Batch: b}
			if i == 2 && step%2 == 1 { // sampled beside greedy ones
				seqs[i].Logits = make([]float32, rows*V)
				wantLg = make([]float32, rows*V)
				if err := m.Forward(pairs[i].alone, b, wantLg); err != nil {
					t.Fatal(err)
				}
				continue
			}
			top[i], wantTop[i] = make([]int32, rows), make([]int32, rows)
			if err := m.ForwardGreedy(pairs[i].alone, b, wantTop[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.ForwardMultiGreedy(seqs, top); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			if top[i] == nil {
				if k := sameBits(seqs[i].Logits, wantLg); k >= 0 {
					t.Fatalf("step %d sequence %d: logit %d differs from alone", step, i, k)
				}
				continue
			}
			for r := range top[i] {
				if top[i][r] != wantTop[i][r] {
					t.Fatalf("step %d sequence %d row %d: top token %d beside the others, %d alone", step, i, r, top[i][r], wantTop[i][r])
				}
			}
		}
	}
	if err := m.ForwardMultiGreedy(make([]model.SeqBatch, 2), make([][]int32, 1)); err == nil {
		t.Error("ForwardMultiGreedy with fewer top slices than sequences accepted")
	}
	before := pairs[1].multi.Len()
	all := model.ChainBatch([]int32{1, 2}, before, true)
	seqs := []model.SeqBatch{{State: pairs[0].multi, Batch: model.ChainBatch([]int32{3}, pairs[0].multi.Len(), false)}, {State: pairs[1].multi, Batch: all}}
	var se *model.SeqError
	if err := m.ForwardMultiGreedy(seqs, [][]int32{make([]int32, 1), make([]int32, 1)}); !errors.As(err, &se) || se.Index != 1 {
		t.Errorf("room for 1 top token, 2 rows want logits: %v, want a SeqError for sequence 1", err)
	} else if pairs[1].multi.Len() != before {
		t.Errorf("the refused call moved the state from %d tokens to %d", before, pairs[1].multi.Len())
	}
}

// TestMultiErrors: a call that names a state twice, a state of another
// model or of the MTP head, or a batch that does not fit is refused as a
// *model.SeqError for that sequence, and no state has changed.
func TestMultiErrors(t *testing.T) {
	m := loadMulti(t, multiCase{"qwen35 MTP", func(t testing.TB) string { return synthFile(t, "tiny", "F32", true) }, tensor.F16, tensor.NVFP4ActQ8})
	other := loadMulti(t, multiCases[0])
	V := m.Hyper().Vocab
	const maxTokens = 160
	pairs := newPairs(m, 3, maxTokens)
	first := make([]model.Batch, 3)
	for i := range first {
		first[i] = model.ChainBatch(multiPrompt(V, i, 4+i), 0, false)
	}
	lg := multiStep(t, m, pairs, first)
	next := lastTokens(lg, V)
	lens := []int{pairs[0].multi.Len(), pairs[1].multi.Len(), pairs[2].multi.Len()}
	good := func() []model.SeqBatch {
		seqs := make([]model.SeqBatch, 3)
		for i, b := range decodeBatches(pairs, next) {
			seqs[i] = model.SeqBatch{State: pairs[i].multi, Batch: b, Logits: make([]float32, V)}
		}
		return seqs
	}
	bigTree := model.Batch{Tokens: make([]int32, maxTreeNodes+1), Pos: make([]int32, maxTreeNodes+1), Parent: make([]int32, maxTreeNodes+1)}
	for i := range bigTree.Parent {
		bigTree.Parent[i], bigTree.Pos[i] = -1, int32(lens[1])
	}
	cases := []struct {
		name  string
		index int
		edit  func(seqs []model.SeqBatch)
	}{
		{"the same state twice", 2, func(s []model.SeqBatch) { s[2].State = s[0].State }},
		{"a state of another model", 1, func(s []model.SeqBatch) { s[1].State = other.NewState(maxTokens) }},
		{"the MTP head's state", 1, func(s []model.SeqBatch) { s[1].State = m.MTP().NewState(maxTokens) }},
		{"a chain past the state's end", 2, func(s []model.SeqBatch) {
			s[2].Batch = model.ChainBatch(multiPrompt(V, 5, maxTokens-lens[2]+1), lens[2], false)
		}},
		{"a tree of more nodes than a pass holds", 1, func(s []model.SeqBatch) { s[1].Batch = bigTree }},
		{"no room for logits", 0, func(s []model.SeqBatch) { s[0].Logits = nil }},
		{"a token outside the vocabulary", 1, func(s []model.SeqBatch) { s[1].Batch.Tokens = []int32{int32(V)} }},
	}
	for _, c := range cases {
		seqs := good()
		c.edit(seqs)
		err := m.ForwardMulti(seqs)
		var se *model.SeqError
		if !errors.As(err, &se) || se.Index != c.index {
			t.Errorf("%s: error %v, want a *model.SeqError for sequence %d", c.name, err, c.index)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for i := range pairs {
			if n := pairs[i].multi.Len(); n != lens[i] {
				t.Fatalf("%s: sequence %d holds %d tokens, %d before", c.name, i, n, lens[i])
			}
		}
	}
	// the states are as they were: the next pass gives the alone bits
	multiStep(t, m, pairs, decodeBatches(pairs, next))
}

var multiBenchModel = flag.String("multi.model", "", "GGUF model for BenchmarkMultiDecode (default: engine/quantize's synthetic bench model in Q8_0 on a GPU, stories260K on lavapipe)")

// BenchmarkMultiDecode: greedy decode steps of 1, 2, 4 and 8 sequences,
// one pass (ForwardMultiGreedy) per step of all of them, after 64-token
// prompts, F16 KV. tok/s is the aggregate decode rate (every sequence's
// token over the passes' wall time), ms/pass the time of one pass. The
// model is engine/quantize's synthetic bench model (Q8_0, 245 MB, shared
// with engine's benchmarks) on a GPU; on lavapipe, whose shaders run on
// the CPU and cost in proportion to the rows, stories260K (lavapipe only
// shows that it runs). -multi.model picks another GGUF file.
func BenchmarkMultiDecode(b *testing.B) {
	path := *multiBenchModel
	if path == "" {
		path = storiesPath
		if testDevice(b).Info().Real() {
			path = filepath.Join(os.TempDir(), "edgellmd-synth-bench-q8_0-seed1.gguf")
			if _, err := os.Stat(path); err != nil {
				if err := synth.Write(path, synth.Options{Size: "bench", Type: "Q8_0", Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Logf("%s on %s", filepath.Base(path), testDevice(b).Info().Name)
	_, gm := loadPair(b, path, tensor.F16, tensor.NVFP4ActQ8)
	m := gm.(multiModel)
	V := m.Hyper().Vocab
	const prompt, ctx = 64, 1024
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("seqs=%d", n), func(b *testing.B) {
			states := make([]model.State, n)
			seqs := make([]model.SeqBatch, n)
			top := make([][]int32, n)
			steps := make([]model.Batch, n) // one token each, reused
			for i := range states {
				states[i] = m.NewState(ctx)
				defer states[i].(*gpuState).Close()
				seqs[i] = model.SeqBatch{State: states[i], Batch: model.ChainBatch(multiPrompt(V, i, prompt), 0, false)}
				top[i] = make([]int32, 1)
				steps[i] = model.ChainBatch(make([]int32, 1), 0, false)
			}
			// the prompts, then one untimed step (its pipelines made)
			for range 2 {
				if err := m.ForwardMultiGreedy(seqs, top); err != nil {
					b.Fatal(err)
				}
				for i := range seqs {
					steps[i].Tokens[0], steps[i].Pos[0] = top[i][0], int32(states[i].Len())
					seqs[i].Batch = steps[i]
				}
			}
			b.ResetTimer()
			t0 := time.Now()
			for it := 0; it < b.N; it++ {
				for i := range seqs {
					if states[i].Len() >= ctx {
						b.Fatal("context full: run with a smaller -benchtime")
					}
					steps[i].Tokens[0], steps[i].Pos[0] = top[i][0], int32(states[i].Len())
					seqs[i].Batch = steps[i]
				}
				if err := m.ForwardMultiGreedy(seqs, top); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(t0).Seconds()
			b.ReportMetric(float64(b.N*n)/el, "tok/s")
			b.ReportMetric(el*1e3/float64(b.N), "ms/pass")
		})
	}
}
