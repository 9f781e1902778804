package state

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

const storiesPath = "../../testdata/models/stories260K.gguf" // the repository's one copy

func stories(t *testing.T) model.Model {
	t.Helper()
	f, err := gguf.Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pool := tensor.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randTokens(rng *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(1 + rng.IntN(vocab-1))
	}
	return t
}

// run prefills toks into a fresh state and returns it.
func run(t *testing.T, m model.Model, toks []int32) model.State {
	t.Helper()
	st := m.NewState(1024)
	lg := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(st, model.ChainBatch(toks, 0, false), lg); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	a := randTokens(rng, 3*PageSize+5, 500)
	b := slices.Clone(a)
	b[PageSize+3]++
	ca, cb := Chain(a), Chain(b)
	if len(ca) != 3 {
		t.Fatalf("Chain of %d tokens has %d pages, want 3", len(a), len(ca))
	}
	if ca[0] != cb[0] || ca[1] == cb[1] || ca[2] == cb[2] {
		t.Error("a change in page 1 must change the hashes of pages 1 and 2 only")
	}
	if !slices.Equal(Chain(a[:2*PageSize]), ca[:2]) {
		t.Error("the chain of a prefix is a prefix of the chain")
	}
}

// TestLookupLongestPrefix publishes snapshots at several positions and
// checks that lookups find the longest one that is a prefix of the query
// within the limit, and that what they restore continues bit for bit as the
// source did.
func TestLookupLongestPrefix(t *testing.T) {
	m := stories(t)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(2, 2))
	toks := randTokens(rng, 200, V)
	c := New(1 << 30)
	for _, p := range []int{10, 64, 100, 128, 150} {
		if ok, err := c.Publish(toks[:p], run(t, m, toks[:p])); err != nil || !ok {
			t.Fatalf("Publish %d: %v %v", p, ok, err)
		}
	}
	if ok, _ := c.Publish(toks[:100], run(t, m, toks[:100])); ok {
		t.Error("a second Publish of the same prefix stored a copy")
	}
	other := slices.Clone(toks)
	other[120] = (other[120] + 1) % int32(V)
	cases := []struct {
		name  string
		query []int32
		limit int
		want  int
	}{
		{"all", toks, 200, 150},
		{"limit", toks, 149, 128},
		{"limit on a snapshot", toks, 128, 128},
		{"page end", toks, 127, 100},
		{"diverges at 120", other, 200, 100},
		{"short", toks[:9], 9, 0},
		{"diverges at once", append([]int32{toks[0] + 1}, toks[1:]...), 200, 0},
	}
	for _, tc := range cases {
		sn, ok := c.Lookup(tc.query, tc.limit)
		if got := sn.Len; ok != (tc.want > 0) || got != tc.want {
			t.Errorf("%s: Lookup = %d, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
	st := c.Stats()
	if st.Entries != 5 || st.Pages != 2 {
		t.Errorf("Stats: %d entries, %d pages; want 5 and 2 (pages shared)", st.Entries, st.Pages)
	}

	// Restore the 150-token snapshot and continue.
	sn, _ := c.Lookup(toks, 200)
	warm := m.NewState(1024)
	if err := warm.Restore(sn); err != nil {
		t.Fatal(err)
	}
	cold := run(t, m, toks[:150])
	lw, lc := make([]float32, 50*V), make([]float32, 50*V)
	if err := m.Forward(warm, model.ChainBatch(toks[150:], 150, true), lw); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(cold, model.ChainBatch(toks[150:], 150, true), lc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lw, lc) {
		t.Error("logits after a restore from the cache differ from the source's")
	}
}

// TestSharedPrefix: two prompts that share their first pages share those
// pages in the cache, and each finds its own snapshot.
func TestSharedPrefix(t *testing.T) {
	m := stories(t)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(3, 3))
	common := randTokens(rng, 2*PageSize+10, V)
	a := append(slices.Clone(common), randTokens(rng, 90, V)...)
	b := append(slices.Clone(common), randTokens(rng, 90, V)...)
	c := New(1 << 30)
	if _, err := c.Publish(a, run(t, m, a)); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if _, err := c.Publish(b, run(t, m, b)); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	// a and b each have 3 full pages; the first 2 are common.
	if before.Pages != 3 || after.Pages != 4 {
		t.Errorf("pages: %d after a, %d after b; want 3 and 4", before.Pages, after.Pages)
	}
	pageBytes := (after.Bytes - before.Bytes) // b's own page + tail + no recurrent
	if pageBytes >= before.Bytes {
		t.Errorf("b added %d bytes, a took %d: common pages were copied", pageBytes, before.Bytes)
	}
	for _, q := range [][]int32{a, b} {
		if sn, ok := c.Lookup(q, len(q)); !ok || sn.Len != len(q) {
			t.Errorf("Lookup of a published prompt: %d, %v", sn.Len, ok)
		}
	}
	// No snapshot ends inside the common part, but an attention-only
	// model's KV can be cut: its two common pages are a snapshot.
	q := append(slices.Clone(common), 7, 7, 7)
	sn, ok := c.Lookup(q, len(q))
	if !ok || sn.Len != 2*PageSize || sn.Recurrent != nil {
		t.Fatalf("Lookup of the common part: %d tokens, %v; want %d", sn.Len, ok, 2*PageSize)
	}
	warm, cold := m.NewState(1024), run(t, m, q[:2*PageSize])
	if err := warm.Restore(sn); err != nil {
		t.Fatal(err)
	}
	lw, lc := make([]float32, 13*V), make([]float32, 13*V)
	m.Forward(warm, model.ChainBatch(q[2*PageSize:], 2*PageSize, true), lw)
	m.Forward(cold, model.ChainBatch(q[2*PageSize:], 2*PageSize, true), lc)
	if !slices.Equal(lw, lc) {
		t.Error("logits after restoring the common pages differ")
	}
}

// TestBudget: the cache never holds more than its budget, evicts the least
// recently used snapshot first and frees pages no snapshot uses.
func TestBudget(t *testing.T) {
	m := stories(t)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(4, 4))
	var prompts [][]int32
	for i := 0; i < 6; i++ {
		prompts = append(prompts, randTokens(rng, 3*PageSize, V))
	}
	probe := New(1 << 30)
	probe.Publish(prompts[0], run(t, m, prompts[0]))
	one := probe.Stats().Bytes
	c := New(3*one + one/2) // room for three
	for i, p := range prompts {
		if _, err := c.Publish(p, run(t, m, p)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			// Touch prompt 1 so that 2 is the oldest now.
			if _, ok := c.Lookup(prompts[1], len(prompts[1])); !ok {
				t.Fatal("prompt 1 evicted too early")
			}
		}
		if st := c.Stats(); st.Bytes > st.MaxBytes {
			t.Fatalf("after %d publishes: %d bytes held, budget %d", i+1, st.Bytes, st.MaxBytes)
		}
	}
	st := c.Stats()
	if st.Entries != 3 || st.Pages != 9 || st.Evicted != 3 {
		t.Errorf("Stats %+v: want 3 entries, 9 pages, 3 evicted", st)
	}
	for i, want := range []bool{false, true, false, false, true, true} {
		if _, ok := c.Lookup(prompts[i], len(prompts[i])); ok != want {
			t.Errorf("prompt %d held: %v, want %v", i, ok, want)
		}
	}
	tiny := New(one / 2)
	if ok, _ := tiny.Publish(prompts[0], run(t, m, prompts[0])); ok {
		t.Error("a snapshot larger than the budget was stored")
	}
	c.Clear()
	if st := c.Stats(); st.Bytes != 0 || st.Entries != 0 || st.Pages != 0 {
		t.Errorf("after Clear: %+v", st)
	}
}
