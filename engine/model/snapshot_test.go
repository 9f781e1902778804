package model

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// snapshotModels are the models a snapshot must serve: the real trained
// llama (attention only) and the synthetic qwen35 hybrid, F16 and F32 KV.
func snapshotModels(t *testing.T) []struct {
	name string
	m    Model
} {
	pool := testPool(t)
	sm := buildSynth(t, defaultSpec(), 11)
	return []struct {
		name string
		m    Model
	}{
		{"stories260K/F16", openModel(t, storiesPath, tensor.F16, pool)},
		{"stories260K/F32", openModel(t, storiesPath, tensor.F32, pool)},
		{"qwen35-synth/F16", sm.load(t, tensor.F16)},
		{"qwen35-synth/F32", sm.load(t, tensor.F32)},
	}
}

// fp8SnapshotModels are snapshotModels with an FP8 cache. They are kept
// apart until the snapshot codec (snapshot_codec.go), whose tests use
// snapshotModels, knows E4M3 rows; then they can join the list above.
func fp8SnapshotModels(t *testing.T) []struct {
	name string
	m    Model
} {
	pool := testPool(t)
	spec, _, _ := fp8Spec()
	return []struct {
		name string
		m    Model
	}{
		{"stories260K/E4M3", openModel(t, storiesPath, tensor.E4M3, pool)},
		{"qwen35-synth/E4M3", buildSynth(t, spec, 11).load(t, tensor.E4M3)},
	}
}

// prefillChunks runs toks on st as chains of at most chunk tokens and
// returns the logits of every token.
func prefillChunks(t *testing.T, m Model, st State, toks []int32, chunk int) []float32 {
	t.Helper()
	V := m.Hyper().Vocab
	out := make([]float32, 0, len(toks)*V)
	lg := make([]float32, chunk*V)
	for i := 0; i < len(toks); i += chunk {
		end := min(i+chunk, len(toks))
		if err := m.Forward(st, ChainBatch(toks[i:end], st.Len(), true), lg); err != nil {
			t.Fatal(err)
		}
		out = append(out, lg[:(end-i)*V]...)
	}
	return out
}

// TestSnapshotRestoreBitIdentical: a sequence restored from a snapshot (in
// a state that held other tokens before) continues with the same logits,
// bit for bit, as one that ran the whole prompt cold in the same batches,
// and greedy decoding goes on identically.
func TestSnapshotRestoreBitIdentical(t *testing.T) {
	for _, tc := range append(snapshotModels(t), fp8SnapshotModels(t)...) {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			V := m.Hyper().Vocab
			rng := rand.New(rand.NewPCG(3, 4))
			for _, c := range []struct{ prefix, rest, chunk int }{{1, 9, 4}, {17, 23, 64}, {64, 37, 16}, {70, 1, 64}} {
				prefix := randTokens(rng, c.prefix, V)
				rest := randTokens(rng, c.rest, V)
				// The cold run splits its batches where the warm one does:
				// attention's arithmetic depends on a batch's size (one
				// token, fewer than 64, more: as llama.cpp's), so only the
				// same batches give the same bits.
				cold := m.NewState(256)
				want := prefillChunks(t, m, cold, prefix, c.chunk)
				want = append(want, prefillChunks(t, m, cold, rest, c.chunk)...)
				wantGen := decodeFrom(t, m, cold, want[len(want)-V:], 8)

				src := m.NewState(256)
				prefillChunks(t, m, src, prefix, c.chunk)
				snA, err := src.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				// A snapshot that shares runs copied earlier.
				half := c.prefix / 2
				run, err := src.CopyKV(0, half)
				if err != nil {
					t.Fatal(err)
				}
				snB, err := src.SnapshotWith([]*KVRows{run})
				if err != nil {
					t.Fatal(err)
				}
				if len(snB.KV) != 2 || snB.KV[0] != run || snB.KV[1].Len() != c.prefix-half {
					t.Fatalf("SnapshotWith made runs of %v", runLens(snB.KV))
				}
				// The source moves on; the snapshots must not.
				prefillChunks(t, m, src, randTokens(rng, 5, V), 5)

				for name, sn := range map[string]Snapshot{"Snapshot": snA, "SnapshotWith": snB} {
					dst := m.NewState(256)
					prefillChunks(t, m, dst, randTokens(rng, 30, V), 30) // garbage to overwrite
					if err := dst.Restore(sn); err != nil {
						t.Fatal(err)
					}
					if dst.Len() != c.prefix {
						t.Fatalf("%s: Len after Restore = %d, want %d", name, dst.Len(), c.prefix)
					}
					got := prefillChunks(t, m, dst, rest, c.chunk)
					if !slices.Equal(got, want[c.prefix*V:]) {
						t.Errorf("%s %+v: logits after Restore differ from the cold run's", name, c)
					}
					if g := decodeFrom(t, m, dst, got[len(got)-V:], 8); !slices.Equal(g, wantGen) {
						t.Errorf("%s %+v: greedy after Restore %v, cold %v", name, c, g, wantGen)
					}
				}
			}
		})
	}
}

// decodeFrom decodes n tokens greedily from the logits of st's last token.
func decodeFrom(t *testing.T, m Model, st State, last []float32, n int) []int32 {
	t.Helper()
	lg := append([]float32(nil), last...)
	var out []int32
	for len(out) < n {
		tok := argmax(lg)
		out = append(out, tok)
		if err := m.Forward(st, ChainBatch([]int32{tok}, st.Len(), false), lg); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func runLens(kv []*KVRows) []int {
	var n []int
	for _, r := range kv {
		n = append(n, r.Len())
	}
	return n
}

func TestSnapshotErrors(t *testing.T) {
	pool := testPool(t)
	llama := openModel(t, storiesPath, tensor.F16, pool)
	llama32 := openModel(t, storiesPath, tensor.F32, pool)
	llama8 := openModel(t, storiesPath, tensor.E4M3, pool)
	qwen := buildSynth(t, defaultSpec(), 11).load(t, tensor.F16)
	ls := llama.NewState(32)
	prefillChunks(t, llama, ls, []int32{1, 2, 3, 4}, 4)
	lsn, err := ls.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if lsn.Recurrent != nil {
		t.Error("llama snapshot has recurrent state")
	}
	qs := qwen.NewState(32)
	prefillChunks(t, qwen, qs, []int32{1, 2, 3, 4}, 4)
	qsn, err := qs.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if qsn.Recurrent == nil || qsn.Bytes() <= lsn.Bytes()-lsn.KV[0].Bytes() {
		t.Error("qwen35 snapshot lacks recurrent state")
	}
	cases := []struct {
		name string
		st   State
		sn   Snapshot
		want string
	}{
		{"other model", qwen.NewState(32), lsn, "not made by a state of this model"},
		{"other KV type", llama32.NewState(32), lsn, "do not fit this state"},
		{"F16 rows in an FP8 state", llama8.NewState(32), lsn, "do not fit this state"},
		{"too long", llama.NewState(2), lsn, "does not fit"},
		{"no recurrent", qwen.NewState(32), Snapshot{Len: qsn.Len, KV: qsn.KV}, "no recurrent state"},
		{"rows short", llama.NewState(32), Snapshot{Len: 5, KV: lsn.KV}, "holds KV rows of 4"},
	}
	for _, c := range cases {
		if err := c.st.Restore(c.sn); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Restore error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := ls.CopyKV(2, 9); err == nil {
		t.Error("CopyKV past Len succeeded")
	}
	// A pending tree batch cannot be snapshotted.
	b := Batch{Tokens: []int32{5, 6}, Pos: []int32{4, 5}, Parent: []int32{-1, 0}, Verify: true}
	if err := qwen.Forward(qs, b, make([]float32, qwen.Hyper().Vocab)); err != nil {
		t.Fatal(err)
	}
	if _, err := qs.Snapshot(); err == nil {
		t.Error("Snapshot with a pending tree succeeded")
	}
}
