package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

func randTokens(rng *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(vocab))
	}
	return t
}

// TestQwen35MatchesReference holds the whole qwen35 forward pass (DeltaNet
// and gated attention layers, F32 KV cache) against the float64 reference,
// token by token and as prefill chains (short, and long enough for the tiled
// attention path).
func TestQwen35MatchesReference(t *testing.T) {
	sm := buildSynth(t, defaultSpec(), 1)
	m := sm.load(t, tensor.F32)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(2, 2))
	for _, tc := range []struct {
		name    string
		prefill int // tokens in the first chain batch
		decode  int // then one at a time
	}{
		{"decode", 1, 12},
		{"prefill", 9, 4},
		{"tiled-prefill", 70, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := newRef(sm)
			toks := randTokens(rng, tc.prefill+tc.decode, V)
			var want [][]float64
			for i, tok := range toks {
				l, _ := ref.forward(int(tok), i)
				want = append(want, l)
			}
			st := m.NewState(len(toks))
			got := make([]float32, tc.prefill*V)
			if err := m.Forward(st, ChainBatch(toks[:tc.prefill], 0, true), got); err != nil {
				t.Fatal(err)
			}
			for i := tc.prefill; i < len(toks); i++ {
				row := make([]float32, V)
				if err := m.Forward(st, ChainBatch(toks[i:i+1], i, false), row); err != nil {
					t.Fatal(err)
				}
				got = append(got, row...)
			}
			for i := range toks {
				if d := relDiff(got[i*V:(i+1)*V], want[i]); d > 2e-5 || math.IsNaN(d) {
					t.Errorf("token %d: logits differ from the reference by %.3g (relative)", i, d)
				}
			}
		})
	}
}

// TestQwen35F16KV checks that an F16 cache stays close to the reference.
func TestQwen35F16KV(t *testing.T) {
	sm := buildSynth(t, defaultSpec(), 3)
	m := sm.load(t, tensor.F16)
	V := m.Hyper().Vocab
	ref := newRef(sm)
	toks := randTokens(rand.New(rand.NewPCG(4, 4)), 20, V)
	st := m.NewState(len(toks))
	got := make([]float32, len(toks)*V)
	if err := m.Forward(st, ChainBatch(toks, 0, true), got); err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		want, _ := ref.forward(int(tok), i)
		if d := relDiff(got[i*V:(i+1)*V], want); d > 5e-3 {
			t.Errorf("token %d: F16-KV logits differ from the reference by %.3g", i, d)
		}
	}
}

// TestDeltaNetLayer runs one Gated DeltaNet layer alone on random inputs,
// as a chain and token by token, against the float64 equations of §1.6.
func TestDeltaNetLayer(t *testing.T) {
	sm := buildSynth(t, defaultSpec(), 5)
	d := sm.load(t, tensor.F32).(*decoder)
	E := d.hp.Embd
	rng := rand.New(rand.NewPCG(6, 6))
	const T = 11
	h := make([]float32, T*E)
	for i := range h {
		h[i] = float32(rng.NormFloat64())
	}
	ref := newRef(sm)
	want := make([][]float64, T)
	for i := 0; i < T; i++ {
		x := make([]float64, E)
		for j := range x {
			x[j] = float64(h[i*E+j])
		}
		want[i] = ref.deltaNet(0, "blk.0.", x)
	}
	for _, chunk := range []int{T, 1, 4} {
		s := d.NewState(T).(*state)
		out := make([]float32, T*E)
		for i := 0; i < T; i += chunk {
			n := min(chunk, T-i)
			b := ChainBatch(make([]int32, n), i, false)
			s.begin(&b, true, 0)
			d.layers[0].delta.forward(d, s.alone(), 0, h[i*E:(i+n)*E], s.w.y[:n*E])
			copy(out[i*E:], s.w.y[:n*E])
			s.finish()
		}
		for i := 0; i < T; i++ {
			if dd := relDiff(out[i*E:(i+1)*E], want[i]); dd > 1e-5 {
				t.Errorf("chunks of %d: token %d differs from the reference by %.3g", chunk, i, dd)
			}
		}
	}
}

// treeCase is a verify tree: parents (by batch index) and the path to keep.
type treeCase struct {
	name   string
	parent []int32
	path   []int
}

var treeCases = []treeCase{
	{"chain-as-tree", []int32{-1, 0, 1}, []int{0, 1, 2}},
	{"two-branches", []int32{-1, 0, 0, 2, 1, 3}, []int{0, 2, 3, 5}},
	{"keep-root-only", []int32{-1, 0, 0}, []int{0}},
	{"second-branch-leaf", []int32{-1, 0, 1, 0, 3, 3, 5}, []int{0, 3, 5, 6}},
	{"forest-of-roots", []int32{-1, -1, 1, 0}, []int{1, 2}},
	{"drop-all", []int32{-1, 0}, nil},
}

// checkTreeMatchesChain verifies on model m that a tree forward followed by
// Commit(path) gives the path's tokens the same logits as a chain forward
// of the path, and leaves the same state: the next tokens then get the same
// logits and the states hold the same bits.
//
// llama.cpp's own arithmetic depends on the shape of a batch (a batch of one
// token takes other matrix kernels than a larger one; without flash
// attention, an F32 cache's P·V sums by cache slot, and tree nodes sit in
// other slots than the chain's tokens), so the chain side runs the path and
// the next tokens as one batch of several tokens, and with exact false (F32
// cache) logits need only agree to 1e-5 and in their argmax.
func checkTreeMatchesChain(t *testing.T, m Model, seed uint64, exact bool) {
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(seed, 7))
	prompt := randTokens(rng, 5, V)
	same := func(what string, got, want []float32) {
		t.Helper()
		if exact {
			if !slices.Equal(got, want) {
				t.Errorf("%s: tree logits differ from the chain's", what)
			}
			return
		}
		w := make([]float64, len(want))
		for i, v := range want {
			w[i] = float64(v)
		}
		if d := relDiff(got, w); d > 1e-5 || argmax(got) != argmax(want) {
			t.Errorf("%s: tree logits differ from the chain's by %.3g (argmax %d, chain %d)", what, d, argmax(got), argmax(want))
		}
	}
	for _, tc := range treeCases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.parent)
			toks := randTokens(rng, n, V)
			next := randTokens(rng, 3, V)
			depth := make([]int32, n)
			for i, p := range tc.parent {
				if p >= 0 {
					depth[i] = depth[p] + 1
				}
			}
			tree, chain := m.NewState(32), m.NewState(32)
			lg := make([]float32, V)
			for _, st := range []State{tree, chain} {
				if err := m.Forward(st, ChainBatch(prompt, 0, false), lg); err != nil {
					t.Fatal(err)
				}
			}
			base := int32(len(prompt))
			tb := Batch{Tokens: toks, Parent: tc.parent, Pos: make([]int32, n), Logits: make([]bool, n), Verify: true}
			for i := range tb.Pos {
				tb.Pos[i] = base + depth[i]
				tb.Logits[i] = true
			}
			treeLogits := make([]float32, n*V)
			if err := m.Forward(tree, tb, treeLogits); err != nil {
				t.Fatal(err)
			}
			if tree.Len() != len(prompt) {
				t.Fatalf("tree batch was committed before Commit: Len %d", tree.Len())
			}
			if err := tree.Commit(tc.path); err != nil {
				t.Fatal(err)
			}
			if tree.Len() != len(prompt)+len(tc.path) {
				t.Fatalf("Len after Commit = %d, want %d", tree.Len(), len(prompt)+len(tc.path))
			}
			treeNext := make([]float32, 3*V)
			if err := m.Forward(tree, ChainBatch(next, tree.Len(), true), treeNext); err != nil {
				t.Fatal(err)
			}

			seq := make([]int32, 0, len(tc.path)+len(next))
			for _, idx := range tc.path {
				seq = append(seq, toks[idx])
			}
			seq = append(seq, next...)
			chainLogits := make([]float32, len(seq)*V)
			if err := m.Forward(chain, ChainBatch(seq, len(prompt), true), chainLogits); err != nil {
				t.Fatal(err)
			}
			for k, idx := range tc.path {
				same(fmt.Sprintf("node %d (path step %d)", idx, k), treeLogits[idx*V:(idx+1)*V], chainLogits[k*V:(k+1)*V])
			}
			for k := range next {
				same(fmt.Sprintf("next token %d after Commit", k), treeNext[k*V:(k+1)*V], chainLogits[(len(tc.path)+k)*V:(len(tc.path)+k+1)*V])
			}
			if exact {
				sameState(t, tree.(*state), chain.(*state))
			}
		})
	}
}

func sameState(t *testing.T, a, b *state) {
	t.Helper()
	for i := range a.kv {
		ca, cb := &a.kv[i], &b.kv[i]
		n := a.n * ca.dim
		if !slices.Equal(ca.k16[:min(n, len(ca.k16))], cb.k16[:min(n, len(cb.k16))]) ||
			!slices.Equal(ca.v16[:min(n, len(ca.v16))], cb.v16[:min(n, len(cb.v16))]) ||
			!slices.Equal(ca.k32[:min(n, len(ca.k32))], cb.k32[:min(n, len(cb.k32))]) ||
			!slices.Equal(ca.v32[:min(n, len(ca.v32))], cb.v32[:min(n, len(cb.v32))]) ||
			!slices.Equal(ca.k8[:min(n, len(ca.k8))], cb.k8[:min(n, len(cb.k8))]) ||
			!slices.Equal(ca.v8[:min(n, len(ca.v8))], cb.v8[:min(n, len(cb.v8))]) {
			t.Errorf("layer %d: KV caches differ", i)
		}
		if !slices.Equal(a.rec[i].s, b.rec[i].s) || !slices.Equal(a.rec[i].conv, b.rec[i].conv) {
			t.Errorf("layer %d: recurrent states differ", i)
		}
	}
}

func TestTreeMatchesChainQwen35(t *testing.T) {
	// The FP8 cache's attention is the same for every batch size, so its
	// tree and chain agree bit for bit, as F16's do.
	for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
		t.Run(kv.String(), func(t *testing.T) {
			checkTreeMatchesChain(t, buildSynth(t, defaultSpec(), 8).load(t, kv), 9, kv != tensor.F32)
		})
	}
}

func TestTreeMatchesChainStories(t *testing.T) {
	checkTreeMatchesChain(t, openModel(t, storiesPath, tensor.F16, testPool(t)), 10, true)
}

// TestMTPMatchesReference runs the trunk with hidden states out, then the
// MTP head on (x_{t+1}, h_t), chained twice on its own output, against the
// reference.
func TestMTPMatchesReference(t *testing.T) {
	sm := buildSynth(t, defaultSpec(), 11)
	m := sm.load(t, tensor.F32)
	head := m.MTP()
	if head == nil {
		t.Fatal("MTP head not loaded")
	}
	V, E := m.Hyper().Vocab, m.Hyper().Embd
	ref := newRef(sm)
	rng := rand.New(rand.NewPCG(12, 12))
	toks := randTokens(rng, 6, V)
	st := m.NewState(16)
	logits, hidden := make([]float32, len(toks)*V), make([]float32, len(toks)*E)
	if err := m.ForwardHidden(st, ChainBatch(toks, 0, true), logits, hidden); err != nil {
		t.Fatal(err)
	}
	var refHidden [][]float64
	for i, tok := range toks {
		l, h := ref.forward(int(tok), i)
		refHidden = append(refHidden, h)
		if d := relDiff(logits[i*V:(i+1)*V], l); d > 2e-5 {
			t.Errorf("trunk token %d: %.3g", i, d)
		}
		if d := relDiff(hidden[i*E:(i+1)*E], h); d > 2e-5 {
			t.Errorf("trunk hidden %d: %.3g", i, d)
		}
	}
	// Prefill the head: row t takes x_{t+1} and h_t at position t.
	ms := head.NewState(16)
	n := len(toks) - 1
	mLogits, mHidden := make([]float32, n*V), make([]float32, n*E)
	if err := head.Forward(ms, ChainBatch(toks[1:], 0, true), hidden[:n*E], mLogits, mHidden); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		l, _ := ref.mtp(int(toks[i+1]), i, refHidden[i])
		if d := relDiff(mLogits[i*V:(i+1)*V], l); d > 2e-5 {
			t.Errorf("MTP row %d: %.3g", i, d)
		}
	}
	// Draft two steps past the trunk, feeding the head its own output.
	h := make([]float32, E)
	copy(h, hidden[n*E:])
	refH := refHidden[n]
	next := argmax(logits[n*V:])
	for step := 0; step < 2; step++ {
		pos := n + step
		l, out := make([]float32, V), make([]float32, E)
		if err := head.Forward(ms, ChainBatch([]int32{next}, pos, false), h, l, out); err != nil {
			t.Fatal(err)
		}
		wl, wout := ref.mtp(int(next), pos, refH)
		if d := relDiff(l, wl); d > 2e-5 {
			t.Errorf("MTP draft step %d: %.3g", step, d)
		}
		h, refH, next = out, wout, argmax(l)
	}
}

func TestRecurrentLayersArray(t *testing.T) {
	spec := defaultSpec()
	spec.recurrentArray = true
	spec.recurrent = []bool{true, false, true, true, false}
	sm := buildSynth(t, spec, 13)
	m := sm.load(t, tensor.F32)
	if got := m.Hyper().Recurrent; !slices.Equal(got, spec.recurrent) {
		t.Fatalf("Recurrent = %v, want %v", got, spec.recurrent)
	}
	ref := newRef(sm)
	toks := randTokens(rand.New(rand.NewPCG(14, 14)), 5, m.Hyper().Vocab)
	V := m.Hyper().Vocab
	got := make([]float32, len(toks)*V)
	if err := m.Forward(m.NewState(8), ChainBatch(toks, 0, true), got); err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		want, _ := ref.forward(int(tok), i)
		if d := relDiff(got[i*V:(i+1)*V], want); d > 2e-5 {
			t.Errorf("token %d: %.3g", i, d)
		}
	}
}

// TestLoadErrors checks that a broken file is refused with an error that
// names the missing or malformed tensor or key and what was expected.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*synthSpec)
		expect []string
	}{
		{"missing tensor", func(s *synthSpec) { s.dropTensor = "blk.1.ssm_a" }, []string{`"blk.1.ssm_a" missing`, "[4]"}},
		{"missing matrix", func(s *synthSpec) { s.dropTensor = "blk.3.attn_q.weight" }, []string{`"blk.3.attn_q.weight" missing`, "[32 128]"}},
		{"missing conv", func(s *synthSpec) { s.dropTensor = "blk.0.ssm_conv1d.weight" }, []string{`"blk.0.ssm_conv1d.weight" missing`, "[4 64]"}},
		{"wrong shape", func(s *synthSpec) { s.wrongShape = "blk.2.ssm_out.weight" }, []string{`"blk.2.ssm_out.weight" has shape [33 32]`, "want [32 32]"}},
		{"missing key", func(s *synthSpec) { s.dropKey = "qwen35.ssm.state_size" }, []string{`"qwen35.ssm.state_size" missing`}},
		{"missing eps", func(s *synthSpec) { s.dropKey = "qwen35.attention.layer_norm_rms_epsilon" }, []string{`"qwen35.attention.layer_norm_rms_epsilon" missing`, "float32"}},
		{"missing sections", func(s *synthSpec) { s.dropKey = "qwen35.rope.dimension_sections" }, []string{`"qwen35.rope.dimension_sections" missing`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := defaultSpec()
			tc.edit(&spec)
			sm := buildSynth(t, spec, 15)
			_, err := Load(sm.file, Options{KVType: tensor.F16, Pool: testPool(t)})
			if err == nil {
				t.Fatal("Load accepted a broken file")
			}
			for _, want := range tc.expect {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), "synth-qwen35.gguf") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestStateErrors(t *testing.T) {
	sm := buildSynth(t, defaultSpec(), 16)
	m := sm.load(t, tensor.F16)
	V := m.Hyper().Vocab
	st := m.NewState(8)
	lg := make([]float32, 4*V)
	if err := st.Commit([]int{0}); err == nil {
		t.Error("Commit with nothing pending succeeded")
	}
	if err := m.Forward(st, ChainBatch([]int32{1, 2, 3}, 0, false), lg); err != nil {
		t.Fatal(err)
	}
	if err := st.Truncate(2); err == nil || !strings.Contains(err.Error(), "recurrent") {
		t.Errorf("Truncate of a hybrid state: err = %v, want a recurrent-state error", err)
	}
	if err := m.Forward(st, ChainBatch(make([]int32, 6), 3, false), lg); err == nil {
		t.Error("a batch past maxTokens was accepted")
	}
	tree := Batch{Tokens: []int32{4, 5, 6}, Pos: []int32{3, 4, 4}, Parent: []int32{-1, 0, 0}}
	if err := m.Forward(st, tree, lg); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(st, ChainBatch([]int32{1}, 3, false), lg); err == nil {
		t.Error("Forward with a pending tree succeeded")
	}
	if err := st.Commit([]int{1}); err == nil {
		t.Error("Commit of a path not starting at a root succeeded")
	}
	if err := st.Commit([]int{0, 1, 2}); err == nil {
		t.Error("Commit of two siblings succeeded")
	}
	if err := st.Commit([]int{0, 2}); err != nil {
		t.Fatal(err)
	}
	if st.Len() != 5 {
		t.Errorf("Len = %d after committing 2 of a tree on 3 tokens, want 5", st.Len())
	}
	bad := []Batch{
		{Tokens: []int32{1}, Pos: []int32{5}, Parent: []int32{0}},
		{Tokens: []int32{int32(V)}, Pos: []int32{5}, Parent: []int32{-1}},
		{Tokens: []int32{1, 2}, Pos: []int32{5}, Parent: []int32{-1, 0}},
	}
	for i, b := range bad {
		if err := m.Forward(st, b, lg); err == nil {
			t.Errorf("bad batch %d accepted", i)
		}
	}
	other := buildSynth(t, defaultSpec(), 17).load(t, tensor.F16)
	if err := other.Forward(st, ChainBatch([]int32{1}, 5, false), lg); err == nil {
		t.Error("a state of another model was accepted")
	}
	if err := m.MTP().Forward(st, ChainBatch([]int32{1}, 5, false), make([]float32, 32), lg, nil); err == nil {
		t.Error("the MTP head accepted the trunk's state")
	}
	st.Reset()
	if st.Len() != 0 {
		t.Errorf("Len after Reset = %d", st.Len())
	}
}

// TestQwen35Allocs checks that decode steps and verify-then-commit cycles
// allocate nothing once the state's scratch is sized.
func TestQwen35Allocs(t *testing.T) {
	for _, kv := range []tensor.DType{tensor.F16, tensor.F32} {
		t.Run(kv.String(), func(t *testing.T) {
			m := buildSynth(t, defaultSpec(), 18).load(t, kv)
			V := m.Hyper().Vocab
			st := m.NewState(1024)
			logits := make([]float32, 4*V)
			if err := m.Forward(st, ChainBatch([]int32{1, 2, 3}, 0, false), logits); err != nil {
				t.Fatal(err)
			}
			b := ChainBatch([]int32{1}, 0, false)
			step := func() {
				b.Tokens[0], b.Pos[0] = argmax(logits[:V]), int32(st.Len())
				if err := m.Forward(st, b, logits); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(20, step); a != 0 {
				t.Errorf("a decode step allocates %v times, want 0", a)
			}
			tree := Batch{Tokens: []int32{4, 5, 6, 7}, Pos: make([]int32, 4), Parent: []int32{-1, 0, 0, 2}, Logits: []bool{true, true, true, true}}
			path := []int{0, 2, 3}
			verify := func() {
				n := int32(st.Len())
				tree.Pos[0], tree.Pos[1], tree.Pos[2], tree.Pos[3] = n, n+1, n+1, n+2
				if err := m.Forward(st, tree, logits); err != nil {
					t.Fatal(err)
				}
				if err := st.Commit(path); err != nil {
					t.Fatal(err)
				}
			}
			verify()
			if a := testing.AllocsPerRun(20, verify); a != 0 {
				t.Errorf("a verify-and-commit cycle allocates %v times, want 0", a)
			}
		})
	}
}

// TestTiedOutputAndNoMTP loads a file without output.weight (the LM head is
// then the token embedding) and without an MTP block.
func TestTiedOutputAndNoMTP(t *testing.T) {
	spec := defaultSpec()
	spec.dropTensor = "output.weight"
	spec.mtp = false
	sm := buildSynth(t, spec, 19)
	m := sm.load(t, tensor.F32)
	if m.MTP() != nil {
		t.Error("MTP head loaded from a file without one")
	}
	ref := newRef(sm)
	V := m.Hyper().Vocab
	toks := randTokens(rand.New(rand.NewPCG(20, 20)), 4, V)
	got := make([]float32, len(toks)*V)
	if err := m.Forward(m.NewState(4), ChainBatch(toks, 0, true), got); err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		want, _ := ref.forward(int(tok), i)
		if d := relDiff(got[i*V:(i+1)*V], want); d > 2e-5 {
			t.Errorf("token %d: %.3g", i, d)
		}
	}
}
