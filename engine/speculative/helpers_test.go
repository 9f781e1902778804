package speculative

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

const storiesPath = "../../testdata/models/stories260K.gguf" // the repository's one copy

var (
	poolOnce sync.Once
	pool     *tensor.Pool
)

// testPool is one two-thread pool for the package's tests (the machine is
// shared; never closed, like the process).
func testPool() *tensor.Pool {
	poolOnce.Do(func() { pool = tensor.NewPool(2) })
	return pool
}

func openModel(t testing.TB, path string, kv tensor.DType) model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f, model.Options{KVType: kv, Pool: testPool()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synthMTP writes engine/quantize's tiny random qwen35 with an MTP block
// and loads it.
func synthMTP(t testing.TB, seed uint64, kv tensor.DType) model.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth-mtp.gguf")
	if err := synth.Write(path, synth.Options{Size: "tiny", MTP: true, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, path, kv)
	if m.MTP() == nil {
		t.Fatal("synth --mtp model has no MTP head")
	}
	return m
}

// plainDecode is the reference: prefill, then one ChainBatch(one) forward
// pass per token, each token sampled from the last logits.
func plainDecode(t testing.TB, m model.Model, prompt []int32, n, ctxLen int, p sample.Params) []int32 {
	t.Helper()
	st := m.NewState(ctxLen)
	lg := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(st, model.ChainBatch(prompt, 0, false), lg); err != nil {
		t.Fatal(err)
	}
	smp := sample.New(p)
	out := make([]int32, 0, n)
	for {
		tok := smp.Pick(lg)
		out = append(out, tok)
		if len(out) == n {
			return out
		}
		if err := m.Forward(st, model.ChainBatch([]int32{tok}, st.Len(), false), lg); err != nil {
			t.Fatal(err)
		}
	}
}

// specDecode runs d as engine.Generate does: prefill with the last
// token's hidden state, pick the first token from the prefill logits, then
// Step until n tokens are out, never past ctxLen.
func specDecode(t testing.TB, m model.Model, d *Decoder, prompt []int32, n, ctxLen int, p sample.Params) []int32 {
	t.Helper()
	hp := m.Hyper()
	st := m.NewState(ctxLen)
	lg, hid := make([]float32, hp.Vocab), make([]float32, hp.Embd)
	if err := m.ForwardHidden(st, model.ChainBatch(prompt, 0, false), lg, hid); err != nil {
		t.Fatal(err)
	}
	d.Begin(prompt, hid)
	smp := sample.New(p)
	out := []int32{smp.Pick(lg)}
	for len(out) < n {
		room := ctxLen - st.Len()
		before := st.Len()
		toks, err := d.Step(st, out[len(out)-1], room, smp)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) < 1 || st.Len()-before != len(toks) {
			t.Fatalf("Step emitted %d tokens and committed %d (want emitted = committed >= 1)", len(toks), st.Len()-before)
		}
		if st.Len() > ctxLen {
			t.Fatalf("state holds %d tokens, more than the room given (%d)", st.Len(), ctxLen)
		}
		out = append(out, toks...)
	}
	return out[:n]
}
