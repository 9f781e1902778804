package logits

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

func storiesVocab(t *testing.T) *Vocab {
	t.Helper()
	f, err := gguf.Open("../../testdata/models/stories260K.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	v, err := tokenizer.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return NewVocab(tok)
}

// Logprobs against the textbook log-softmax (float64, no shift) and a full
// sort of the row: the picked token's log-probability, the top tokens in
// order, and masked (-Inf) tokens never among them.
func TestLogprobsMatchLogSoftmax(t *testing.T) {
	v := storiesVocab(t)
	rng := rand.New(rand.NewPCG(7, 8))
	row := make([]float32, 512)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 3)
		if i%5 == 0 {
			row[i] = float32(math.Inf(-1)) // a grammar's mask
		}
	}
	for _, temp := range []float64{1, 0.7} {
		sum := 0.0
		for _, l := range row {
			sum += math.Exp(float64(l) / temp)
		}
		ref := func(id int32) float64 { return float64(row[id])/temp - math.Log(sum) }
		order := make([]int32, 0, len(row))
		for i, l := range row {
			if !math.IsInf(float64(l), -1) {
				order = append(order, int32(i))
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		for _, id := range []int32{1, 3, order[0]} {
			lp, top := v.Logprobs(row, temp, id, 5)
			if d := math.Abs(float64(lp) - ref(id)); d > 1e-5 {
				t.Errorf("temp %g token %d: logprob %g, want %g", temp, id, lp, ref(id))
			}
			if len(top) != 5 {
				t.Fatalf("temp %g: %d top tokens, want 5", temp, len(top))
			}
			for i, tl := range top {
				if tl.ID != order[i] || math.Abs(float64(tl.Logprob)-ref(tl.ID)) > 1e-5 || string(tl.Piece) != string(v.tok.Piece(tl.ID)) {
					t.Errorf("temp %g: top[%d] = %d %g %q, want %d %g", temp, i, tl.ID, tl.Logprob, tl.Piece, order[i], ref(order[i]))
				}
			}
		}
		if _, top := v.Logprobs(row, temp, 1, 0); top != nil {
			t.Errorf("no top asked for, got %d", len(top))
		}
	}
}

// A request with neither grammar nor penalties has no shaper.
func TestNoShaperWithoutShaping(t *testing.T) {
	if sh := storiesVocab(t).Shaper(nil, sample.Penalties{}, []int32{1, 2}); sh != nil {
		t.Fatalf("shaper %+v for a request with nothing to shape", sh)
	}
}
