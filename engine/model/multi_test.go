package model

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// ForwardMulti against each sequence alone: random mixes of 1 to 8
// sequences, each with a prefill chain (some long enough for the tiled
// attention path), a decode step, a verify tree or a Verify chain (then
// Commit of a random path), or nothing this round, in a random order in
// the pass; every logit, hidden row and state bit must be what the same
// batches give run one by one on a twin state.

// multiCase is a model to check ForwardMulti on.
type multiCase struct {
	name string
	m    Model
}

// multiModels loads the models: stories260K (llama) in F32 and, rewritten,
// F16, BF16, Q8_0 and NVFP4 in its three activation modes; the in-memory
// synthetic qwen35 (F32 weights) with F16, F32 and FP8 KV caches; and
// engine/quantize's tiny qwen35 (the synth writer) in Q8_0 and F16.
func multiModels(t *testing.T) []multiCase {
	t.Helper()
	load := func(f *gguf.File, kv tensor.DType, act tensor.NVFP4Activations) Model {
		pool := testPool(t)
		pool.SetNVFP4Activations(act)
		m, err := Load(f, Options{KVType: kv, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	synthTiny := func(typ string) *gguf.File {
		w, err := synth.Build(synth.Options{Size: "tiny", Type: typ, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse("synth tiny "+typ, buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	nv := storiesAs(t, tensor.NVFP4)
	qwen := buildSynth(t, defaultSpec(), 31)
	return []multiCase{
		{"stories-F32", openModel(t, storiesPath, tensor.F16, testPool(t))},
		{"stories-F16", load(storiesAs(t, tensor.F16), tensor.F16, 0)},
		{"stories-BF16", load(storiesAs(t, tensor.BF16), tensor.F16, 0)},
		{"stories-Q8_0", load(storiesAs(t, tensor.Q8_0), tensor.F16, 0)},
		{"stories-NVFP4-W4A8", load(nv, tensor.F16, tensor.NVFP4ActQ8)},
		{"stories-NVFP4-W4A4", load(nv, tensor.E4M3, tensor.NVFP4ActFP4)},
		{"stories-NVFP4-W4A16", load(nv, tensor.F32, tensor.NVFP4ActF32)},
		{"qwen35-F16KV", qwen.load(t, tensor.F16)},
		{"qwen35-F32KV", qwen.load(t, tensor.F32)},
		{"qwen35-FP8KV", qwen.load(t, tensor.E4M3)},
		{"synth-tiny-Q8_0", load(synthTiny("Q8_0"), tensor.F16, 0)},
		{"synth-tiny-F16", load(synthTiny("F16"), tensor.F16, 0)},
	}
}

// draw returns a number in [lo, hi] (rapid's draws, or a seeded PCG's).
type draw func(lo, hi int, label string) int

func rapidDraw(rt *rapid.T) draw {
	return func(lo, hi int, label string) int { return rapid.IntRange(lo, hi).Draw(rt, label) }
}

func seededDraw(seed uint64) draw {
	r := rand.New(rand.NewPCG(seed, 0x6d756c7469))
	return func(lo, hi int, _ string) int { return lo + r.IntN(hi-lo+1) }
}

// randomBatch draws the next batch of a sequence with committed tokens:
// a prefill chain, a decode step, a tree or a Verify chain. It also
// reports whether the batch stays pending.
func randomBatch(d draw, vocab, committed int) (b Batch, pending bool) {
	tokens := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(d(0, vocab-1, "token"))
		}
		return t
	}
	switch d(0, 3, "kind") {
	case 0: // prefill chain; one in five past the tiled-attention size
		n := d(1, 12, "prefill")
		if d(0, 4, "long") == 0 {
			n = d(tiledQueries-4, tiledQueries+8, "long prefill")
		}
		b = ChainBatch(tokens(n), committed, false)
		switch d(0, 2, "logits") {
		case 1:
			b.Logits = make([]bool, n)
			for i := range b.Logits {
				b.Logits[i] = true
			}
		case 2:
			b.Logits = make([]bool, n)
			for i := range b.Logits {
				b.Logits[i] = d(0, 1, "flag") == 1
			}
		}
		return b, false
	case 1: // decode step
		return ChainBatch(tokens(1), committed, false), false
	case 2: // verify tree (a forest: several roots may hang off the sequence)
		n := d(1, 8, "nodes")
		b = Batch{Tokens: tokens(n), Pos: make([]int32, n), Parent: make([]int32, n), Logits: make([]bool, n)}
		depth := make([]int32, n)
		for i := range n {
			p := d(-1, i-1, "parent")
			b.Parent[i] = int32(p)
			if p >= 0 {
				depth[i] = depth[p] + 1
			}
			b.Pos[i] = int32(committed) + depth[i]
			b.Logits[i] = true
		}
		// a tree that happens to be a chain commits at once unless Verify
		b.Verify = d(0, 1, "verify") == 1
		chain, _ := b.check(vocab)
		return b, b.Verify || !chain
	default: // a linear draft to verify
		b = ChainBatch(tokens(d(1, 6, "draft")), committed, true)
		b.Verify = true
		return b, true
	}
}

// logitRows counts the tokens of b that want logits.
func logitRows(b *Batch) int {
	n := 0
	for i := range b.Tokens {
		if b.wantsLogits(i) {
			n++
		}
	}
	return n
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// stateDiff says how two states differ (committed length, pending batch,
// committed KV rows, recurrent state and conv window), "" when they don't.
func stateDiff(a, b *state) string {
	if a.n != b.n || a.pending != b.pending {
		return fmt.Sprintf("length %d (pending %d) against %d (pending %d)", a.n, a.pending, b.n, b.pending)
	}
	for i := range a.kv {
		ca, cb := &a.kv[i], &b.kv[i]
		n := a.n * ca.dim
		if !slices.Equal(ca.k16[:min(n, len(ca.k16))], cb.k16[:min(n, len(cb.k16))]) ||
			!slices.Equal(ca.v16[:min(n, len(ca.v16))], cb.v16[:min(n, len(cb.v16))]) ||
			!sameBits(ca.k32[:min(n, len(ca.k32))], cb.k32[:min(n, len(cb.k32))]) ||
			!sameBits(ca.v32[:min(n, len(ca.v32))], cb.v32[:min(n, len(cb.v32))]) ||
			!slices.Equal(ca.k8[:min(n, len(ca.k8))], cb.k8[:min(n, len(cb.k8))]) ||
			!slices.Equal(ca.v8[:min(n, len(ca.v8))], cb.v8[:min(n, len(cb.v8))]) {
			return fmt.Sprintf("layer %d: KV rows differ", i)
		}
		if !sameBits(a.rec[i].s, b.rec[i].s) || !sameBits(a.rec[i].conv, b.rec[i].conv) {
			return fmt.Sprintf("layer %d: recurrent state differs", i)
		}
	}
	return ""
}

// checkMulti runs a random schedule of passes on m and fails (fatalf) at
// the first bit that differs from running each sequence alone.
func checkMulti(fatalf func(format string, args ...any), m Model, d draw) {
	hp := m.Hyper()
	V, E := hp.Vocab, hp.Embd
	const room = 2*tiledQueries + 48
	k := d(1, 8, "sequences")
	multi, alone := make([]State, k), make([]State, k)
	for i := range multi {
		multi[i], alone[i] = m.NewState(room), m.NewState(room)
	}
	rounds := d(1, 4, "rounds")
	for round := range rounds {
		var seqs []SeqBatch
		var owner []int // sequence number of each entry of seqs
		var pending []bool
		for i := range k {
			if d(0, 4, "skip") == 0 {
				continue
			}
			b, pend := randomBatch(d, V, multi[i].Len())
			if multi[i].Len()+len(b.Tokens) > room {
				continue
			}
			sb := SeqBatch{State: multi[i], Batch: b, Logits: make([]float32, logitRows(&b)*V)}
			if d(0, 1, "hidden") == 1 {
				sb.Hidden = make([]float32, logitRows(&b)*E)
			}
			seqs = append(seqs, sb)
			owner = append(owner, i)
			pending = append(pending, pend)
		}
		// a random order in the pass
		for i := len(seqs) - 1; i > 0; i-- {
			j := d(0, i, "order")
			seqs[i], seqs[j] = seqs[j], seqs[i]
			owner[i], owner[j] = owner[j], owner[i]
			pending[i], pending[j] = pending[j], pending[i]
		}
		if d(0, 1, "one buffer") == 1 {
			// the logits as consecutive parts of one buffer, which the
			// pass writes directly
			total := 0
			for _, sb := range seqs {
				total += len(sb.Logits)
			}
			buf, r := make([]float32, total), 0
			for e := range seqs {
				k := len(seqs[e].Logits)
				seqs[e].Logits = buf[r : r+k]
				r += k
			}
		}
		if err := ForwardMulti(m, seqs); err != nil {
			fatalf("round %d: %v", round, err)
		}
		for e, sb := range seqs {
			i := owner[e]
			lg := make([]float32, len(sb.Logits))
			var hid []float32
			if sb.Hidden != nil {
				hid = make([]float32, len(sb.Hidden))
			}
			if err := m.ForwardHidden(alone[i], sb.Batch, lg, hid); err != nil {
				fatalf("round %d: sequence %d alone: %v", round, i, err)
			}
			what := fmt.Sprintf("round %d, sequence %d (place %d of %d in the pass, %d tokens, tree %v)",
				round, i, e, len(seqs), len(sb.Batch.Tokens), pending[e])
			if !sameBits(sb.Logits, lg) {
				fatalf("%s: logits differ from the sequence run alone", what)
			}
			if !sameBits(sb.Hidden, hid) {
				fatalf("%s: hidden rows differ from the sequence run alone", what)
			}
			if pending[e] {
				// keep a random root-to-node path (maybe none)
				var path []int
				for j := d(-1, len(sb.Batch.Tokens)-1, "commit"); j >= 0; j = int(sb.Batch.Parent[j]) {
					path = append(path, j)
				}
				slices.Reverse(path)
				for _, st := range []State{multi[i], alone[i]} {
					if err := st.Commit(path); err != nil {
						fatalf("%s: Commit(%v): %v", what, path, err)
					}
				}
			}
			if diff := stateDiff(multi[i].(*state), alone[i].(*state)); diff != "" {
				fatalf("%s: state after the pass: %s", what, diff)
			}
		}
	}
}

// TestForwardMultiMatchesAlone runs seeded schedules on every model.
func TestForwardMultiMatchesAlone(t *testing.T) {
	for _, c := range multiModels(t) {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(16) {
				checkMulti(func(format string, args ...any) {
					t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
				}, c.m, seededDraw(seed))
			}
		})
	}
}

// TestForwardMultiProperty is the same check as a rapid property (which
// shrinks a failure to a small schedule) on the two architectures.
func TestForwardMultiProperty(t *testing.T) {
	models := map[string]Model{
		"llama":  openModel(t, storiesPath, tensor.F16, testPool(t)),
		"qwen35": buildSynth(t, defaultSpec(), 32).load(t, tensor.F16),
	}
	for name, m := range models {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { checkMulti(rt.Fatalf, m, rapidDraw(rt)) })
		})
	}
}

// plainModel hides ForwardMulti: the fallback path of the package function.
type plainModel struct{ Model }

// TestForwardMultiFallback: a model without the multi-sequence form runs
// the sequences one by one, with the same results.
func TestForwardMultiFallback(t *testing.T) {
	m := buildSynth(t, defaultSpec(), 33).load(t, tensor.F16)
	if _, ok := any(plainModel{m}).(MultiForwarder); ok {
		t.Fatal("plainModel is a MultiForwarder")
	}
	for seed := range uint64(4) {
		checkMulti(func(format string, args ...any) {
			t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
		}, plainModel{m}, seededDraw(100+seed))
	}
	V := m.Hyper().Vocab
	st := m.NewState(8)
	b := ChainBatch([]int32{1}, 0, false)
	err := ForwardMulti(plainModel{m}, []SeqBatch{{State: st, Batch: b, Logits: make([]float32, V)}, {State: st, Batch: b, Logits: make([]float32, V)}})
	var se *SeqError
	if !errors.As(err, &se) || se.Index != 1 || st.Len() != 0 {
		t.Errorf("a state twice in the fallback: err = %v, Len %d; want a SeqError for sequence 1 and nothing run", err, st.Len())
	}
}

// TestForwardMultiErrors: every bad sequence is named by its index, and a
// failed call changes nothing: the states then run on exactly as their
// twins that never saw it.
func TestForwardMultiErrors(t *testing.T) {
	m := buildSynth(t, defaultSpec(), 34).load(t, tensor.F16)
	other := buildSynth(t, defaultSpec(), 35).load(t, tensor.F16)
	V := m.Hyper().Vocab
	const room = 16
	var sts, twins []State
	for range 3 {
		st, tw := m.NewState(room), m.NewState(room)
		for _, s := range []State{st, tw} {
			if err := m.Forward(s, ChainBatch([]int32{1, 2, 3}, 0, false), make([]float32, V)); err != nil {
				t.Fatal(err)
			}
		}
		sts, twins = append(sts, st), append(twins, tw)
	}
	decode := func(st State) SeqBatch {
		return SeqBatch{State: st, Batch: ChainBatch([]int32{4}, st.Len(), false), Logits: make([]float32, V)}
	}
	pendingSt := m.NewState(room)
	if err := m.Forward(pendingSt, Batch{Tokens: []int32{5, 6}, Pos: []int32{0, 1}, Parent: []int32{-1, -1}}, make([]float32, V)); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name  string
		index int
		want  string
		seq   func() SeqBatch
	}{
		{"state twice", 2, "state of sequence 0 again", func() SeqBatch { return decode(sts[0]) }},
		{"does not fit", 2, "does not fit", func() SeqBatch {
			return SeqBatch{State: sts[2], Batch: ChainBatch(make([]int32, room), sts[2].Len(), false), Logits: make([]float32, V)}
		}},
		{"pending tree", 2, "pending", func() SeqBatch { return decode(pendingSt) }},
		{"logits too small", 2, "logits has room", func() SeqBatch {
			sb := decode(sts[2])
			sb.Logits = sb.Logits[:V-1]
			return sb
		}},
		{"hidden too small", 2, "hidden has room", func() SeqBatch {
			sb := decode(sts[2])
			sb.Hidden = make([]float32, 3)
			return sb
		}},
		{"bad parent", 2, "parent", func() SeqBatch {
			sb := decode(sts[2])
			sb.Batch.Parent[0] = 0
			return sb
		}},
		{"token outside the vocabulary", 2, "vocabulary", func() SeqBatch {
			sb := decode(sts[2])
			sb.Batch.Tokens[0] = int32(V)
			return sb
		}},
		{"chunk shorter than its piece", 2, "piece of a chunk", func() SeqBatch {
			sb := decode(sts[2])
			sb.Batch.Tokens, sb.Batch.Pos, sb.Batch.Parent = []int32{4, 5}, []int32{3, 4}, []int32{-1, 0}
			sb.Batch.Chunk = 1
			return sb
		}},
		{"piece of a chunk that is a verify chain", 2, "must be a chain that commits", func() SeqBatch {
			sb := decode(sts[2])
			sb.Batch.Verify, sb.Batch.Chunk = true, 64
			return sb
		}},
		{"another model's state", 2, "not made by this model", func() SeqBatch { return decode(other.NewState(room)) }},
		{"the MTP head's state", 2, "not made by this model", func() SeqBatch { return decode(m.MTP().NewState(room)) }},
		{"no state", 2, "not made by this model", func() SeqBatch { sb := decode(sts[2]); sb.State = nil; return sb }},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			seqs := []SeqBatch{decode(sts[0]), decode(sts[1]), c.seq()}
			err := ForwardMulti(m, seqs)
			var se *SeqError
			if !errors.As(err, &se) || se.Index != c.index || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), fmt.Sprintf("sequence %d", c.index)) {
				t.Fatalf("err = %v, want a SeqError for sequence %d about %q", err, c.index, c.want)
			}
			for i := range sts {
				if diff := stateDiff(sts[i].(*state), twins[i].(*state)); diff != "" {
					t.Fatalf("state %d changed by a failed call: %s", i, diff)
				}
			}
		})
	}
	// The states go on as their twins.
	seqs := []SeqBatch{decode(sts[0]), decode(sts[1]), decode(sts[2])}
	if err := ForwardMulti(m, seqs); err != nil {
		t.Fatal(err)
	}
	for i, tw := range twins {
		lg := make([]float32, V)
		if err := m.Forward(tw, seqs[i].Batch, lg); err != nil {
			t.Fatal(err)
		}
		if !sameBits(lg, seqs[i].Logits) {
			t.Errorf("sequence %d: logits after the failed calls differ from its twin's", i)
		}
	}
	if err := ForwardMulti(m, nil); err != nil {
		t.Errorf("no sequences: %v", err)
	}
}

// TestForwardMultiAllocs: once the scratch is sized, a pass of four decode
// steps allocates nothing, nor does a pass of four verify trees and their
// Commits.
func TestForwardMultiAllocs(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Model
	}{
		{"llama", openModel(t, storiesPath, tensor.F16, testPool(t))},
		{"qwen35", buildSynth(t, defaultSpec(), 36).load(t, tensor.F16)},
	} {
		t.Run(c.name, func(t *testing.T) {
			V := c.m.Hyper().Vocab
			seqs := make([]SeqBatch, 4)
			trees := make([]SeqBatch, 4)
			for i := range seqs {
				st := c.m.NewState(1024)
				if err := c.m.Forward(st, ChainBatch([]int32{1, int32(2 + i)}, 0, false), make([]float32, V)); err != nil {
					t.Fatal(err)
				}
				seqs[i] = SeqBatch{State: st, Batch: ChainBatch([]int32{1}, 0, false), Logits: make([]float32, V)}
				trees[i] = SeqBatch{State: st, Batch: Batch{Tokens: []int32{4, 5, 6, 7}, Pos: make([]int32, 4),
					Parent: []int32{-1, 0, 0, 2}, Logits: []bool{true, true, true, true}}, Logits: make([]float32, 4*V), Hidden: make([]float32, 4*c.m.Hyper().Embd)}
			}
			step := func() {
				for i := range seqs {
					sb := &seqs[i]
					sb.Batch.Tokens[0], sb.Batch.Pos[0] = argmax(sb.Logits), int32(sb.State.Len())
				}
				if err := ForwardMulti(c.m, seqs); err != nil {
					t.Fatal(err)
				}
			}
			if a := testing.AllocsPerRun(10, step); a != 0 {
				t.Errorf("a pass of 4 decode steps allocates %v times, want 0", a)
			}
			path := []int{0, 2, 3}
			verify := func() {
				for i := range trees {
					n := int32(trees[i].State.Len())
					copy(trees[i].Batch.Pos, []int32{n, n + 1, n + 1, n + 2})
				}
				if err := ForwardMulti(c.m, trees); err != nil {
					t.Fatal(err)
				}
				for i := range trees {
					if err := trees[i].State.Commit(path); err != nil {
						t.Fatal(err)
					}
				}
			}
			if a := testing.AllocsPerRun(10, verify); a != 0 {
				t.Errorf("a pass of 4 verify trees and their commits allocates %v times, want 0", a)
			}
		})
	}
}

// TestConsecutiveLogits: the direct path is taken exactly when the rows'
// Logits follow one another in one buffer.
func TestConsecutiveLogits(t *testing.T) {
	const V = 3
	buf := make([]float32, 10*V)
	other := make([]float32, 4*V)
	cases := []struct {
		name   string
		logits [][]float32
		nOut   []int
		want   bool
	}{
		{"consecutive", [][]float32{buf[:V], buf[V : 3*V], buf[3*V : 4*V]}, []int{1, 2, 1}, true},
		{"rest of the buffer each", [][]float32{buf, buf[V:], buf[3*V:]}, []int{1, 2, 1}, true},
		{"rowless between", [][]float32{buf[:V], nil, buf[V : 2*V]}, []int{1, 0, 1}, true},
		{"gap", [][]float32{buf[:V], buf[2*V : 3*V]}, []int{1, 1}, false},
		{"out of order", [][]float32{buf[V : 2*V], buf[:V]}, []int{1, 1}, false},
		{"two buffers", [][]float32{buf[:V], other[:V]}, []int{1, 1}, false},
		{"no rows", [][]float32{nil, nil}, []int{0, 0}, false},
	}
	for _, c := range cases {
		seqs := make([]SeqBatch, len(c.logits))
		for i, lg := range c.logits {
			seqs[i].Logits = lg
		}
		got, ok := consecutiveLogits(seqs, c.nOut, V)
		if ok != c.want {
			t.Errorf("%s: consecutive = %v, want %v", c.name, ok, c.want)
			continue
		}
		total := 0
		for _, k := range c.nOut {
			total += k * V
		}
		if ok && (len(got) != total || &got[0] != &c.logits[0][0]) {
			t.Errorf("%s: span of %d floats, want %d from the first sequence's logits", c.name, len(got), total)
		}
	}
}
