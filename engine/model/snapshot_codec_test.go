package model

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// encodeSnapshot encodes each KV run and the recurrent state of sn.
func encodeSnapshot(t testing.TB, sn Snapshot) (runs [][]byte, rec []byte) {
	t.Helper()
	for _, r := range sn.KV {
		b, err := AppendKVRows(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, b)
	}
	if sn.Recurrent != nil {
		rec = AppendRecurrent(nil, sn.Recurrent)
	}
	return runs, rec
}

func decodeSnapshot(runs [][]byte, rec []byte, n int, want *Layout) (Snapshot, error) {
	sn := Snapshot{Len: n}
	for _, b := range runs {
		r, err := DecodeKVRows(b, want)
		if err != nil {
			return Snapshot{}, err
		}
		sn.KV = append(sn.KV, r)
	}
	if rec != nil {
		rc, err := DecodeRecurrent(rec, want)
		if err != nil {
			return Snapshot{}, err
		}
		sn.Recurrent = rc
	}
	return sn, nil
}

// TestSnapshotCodecRoundTrip: a snapshot encoded, decoded against its
// model's layout and restored continues with the same logits, bit for bit,
// as the source state; the encoding is canonical (decode then encode gives
// the same bytes).
func TestSnapshotCodecRoundTrip(t *testing.T) {
	for _, tc := range snapshotModels(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			V := m.Hyper().Vocab
			lay, err := LayoutOf(m)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			prefix, rest := randTokens(rng, 70, V), randTokens(rng, 9, V)
			src := m.NewState(128)
			prefillChunks(t, m, src, prefix, 16)
			run, err := src.CopyKV(0, 64)
			if err != nil {
				t.Fatal(err)
			}
			sn, err := src.SnapshotWith([]*KVRows{run})
			if err != nil {
				t.Fatal(err)
			}
			runs, rec := encodeSnapshot(t, sn)
			got, err := decodeSnapshot(runs, rec, sn.Len, &lay)
			if err != nil {
				t.Fatal(err)
			}
			runs2, rec2 := encodeSnapshot(t, got)
			for i := range runs {
				if !slices.Equal(runs[i], runs2[i]) {
					t.Errorf("run %d: encoding not canonical", i)
				}
			}
			if !slices.Equal(rec, rec2) {
				t.Error("recurrent encoding not canonical")
			}
			if got.Bytes() != sn.Bytes() {
				t.Errorf("decoded snapshot takes %d bytes, the original %d", got.Bytes(), sn.Bytes())
			}
			dst := m.NewState(128)
			if err := dst.Restore(got); err != nil {
				t.Fatal(err)
			}
			want := prefillChunks(t, m, src, rest, 16)
			if g := prefillChunks(t, m, dst, rest, 16); !slices.Equal(g, want) {
				t.Error("logits after restoring a decoded snapshot differ from the source's")
			}
		})
	}
}

// TestSnapshotCodecRejects: rows and state of another model or KV type,
// truncated or altered encodings give errors (never a panic).
func TestSnapshotCodecRejects(t *testing.T) {
	ms := snapshotModels(t)
	type enc struct {
		runs [][]byte
		rec  []byte
		n    int
		lay  Layout
	}
	var encs []enc
	for _, tc := range ms {
		lay, err := LayoutOf(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		st := tc.m.NewState(32)
		prefillChunks(t, tc.m, st, []int32{1, 2, 3, 4, 5}, 5)
		sn, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		runs, rec := encodeSnapshot(t, sn)
		encs = append(encs, enc{runs, rec, sn.Len, lay})
	}
	for i := range encs {
		for j := range encs {
			_, err := decodeSnapshot(encs[i].runs, encs[i].rec, encs[i].n, &encs[j].lay)
			if (err == nil) != (i == j) {
				t.Errorf("snapshot of %s decoded for %s: err %v", ms[i].name, ms[j].name, err)
			}
		}
	}
	// Every truncation and a flip of every byte of a small encoding.
	q := encs[2] // qwen35-synth/F16: KV and recurrent
	for _, b := range [][]byte{q.runs[0], q.rec} {
		for cut := 0; cut < len(b); cut++ {
			if _, err := DecodeKVRows(b[:cut], nil); err == nil {
				t.Fatalf("KV rows cut at %d of %d decoded", cut, len(b))
			}
			if _, err := DecodeRecurrent(b[:cut], nil); err == nil {
				t.Fatalf("recurrent state cut at %d of %d decoded", cut, len(b))
			}
		}
		for i := range b {
			c := slices.Clone(b)
			c[i] ^= 0x80
			// Flipped payload bytes decode (the files' checksums catch
			// them); flipped header bytes must not pass the layout.
			DecodeKVRows(c, &q.lay)
			DecodeRecurrent(c, &q.lay)
		}
	}
	if _, err := DecodeKVRows(append(slices.Clone(q.runs[0]), 0), nil); err == nil {
		t.Error("KV rows with a trailing byte decoded")
	}
}

// FuzzDecodeSnapshotParts: no input makes the decoders panic, and what
// decodes encodes back to the same bytes.
func FuzzDecodeSnapshotParts(f *testing.F) {
	sm := buildSynth(f, defaultSpec(), 11)
	m := sm.load(f, tensor.F16)
	st := m.NewState(16)
	lg := make([]float32, 3*m.Hyper().Vocab)
	if err := m.Forward(st, ChainBatch([]int32{1, 2, 3}, 0, true), lg); err != nil {
		f.Fatal(err)
	}
	sn, err := st.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	runs, rec := encodeSnapshot(f, sn)
	f.Add(runs[0])
	f.Add(rec)
	f.Add([]byte("KV\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Varints need not be minimal, so the check is that a decoded
		// value encodes to bytes that decode to the same encoding.
		if r, err := DecodeKVRows(b, nil); err == nil {
			e1, err := AppendKVRows(nil, r)
			if err != nil {
				t.Fatalf("decoded KV rows do not encode: %v", err)
			}
			r2, err := DecodeKVRows(e1, nil)
			if err != nil {
				t.Fatalf("re-encoded KV rows do not decode: %v", err)
			}
			if e2, _ := AppendKVRows(nil, r2); !slices.Equal(e1, e2) {
				t.Error("KV rows do not round-trip")
			}
		}
		if rc, err := DecodeRecurrent(b, nil); err == nil {
			e1 := AppendRecurrent(nil, rc)
			rc2, err := DecodeRecurrent(e1, nil)
			if err != nil {
				t.Fatalf("re-encoded recurrent state does not decode: %v", err)
			}
			if e2 := AppendRecurrent(nil, rc2); !slices.Equal(e1, e2) {
				t.Error("recurrent state does not round-trip")
			}
		}
	})
}
