package speculative

import (
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// chiSquare001 are the 0.1% critical values of the chi-square distribution
// for 1..15 degrees of freedom (NIST/SEMATECH e-Handbook, table 1.3.6.7.4).
var chiSquare001 = []float64{0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588, 31.264, 32.909, 34.528, 36.123, 37.697}

// chiSquare returns Pearson's statistic of counts (n draws) against the
// probabilities want, and the degrees of freedom (cells with want > 0,
// less one). A draw in a cell of probability 0 makes it infinite.
func chiSquare(counts map[int32]int, want map[int32]float64, n int) (float64, int) {
	stat, cells := 0.0, 0
	for tok, c := range counts {
		if want[tok] == 0 && c > 0 {
			return 1e300, 1
		}
	}
	for tok, p := range want {
		if p == 0 {
			continue
		}
		cells++
		e := p * float64(n)
		d := float64(counts[tok]) - e
		stat += d * d / e
	}
	return stat, cells - 1
}

// lossyReject is a plausible but wrong rule: each drafted child is
// accepted with probability p(c), and when all are rejected the token is
// drawn from p itself (no residual). Drafted tokens come out too often.
func lossyReject(d *Decoder, row []float32, smp *sample.Sampler) int32 {
	tr := &d.tree
	d.dist = smp.Distribution(row, d.dist)
	for c := tr.nodes[0].firstChild; c >= 0; c = tr.nodes[c].nextSibling {
		for _, e := range d.dist {
			if e.ID == tr.nodes[c].tok && smp.Uniform() < e.P {
				return e.ID
			}
		}
	}
	return drawResidual(d.dist, smp.Uniform())
}

// TestRejectKeepsDistribution: the token the multi-draft rule emits at a
// node is distributed as the sampler's own distribution, for drafted
// children that are likely, unlikely, or impossible (outside top-k/top-p),
// under several sampler settings; the same check rejects a lossy rule.
func TestRejectKeepsDistribution(t *testing.T) {
	const V, draws = 12, 40000
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, V)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 1.5)
	}
	order := make([]int32, V) // tokens by logit, best first
	for i := range order {
		order[i] = int32(i)
	}
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if row[order[j]] > row[order[i]] {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	for _, tc := range []struct {
		name   string
		params sample.Params
		drafts []int32 // ranks of the drafted children
	}{
		{"t1/top1", sample.Params{Temperature: 1}, []int32{0}},
		{"t1/top1+top2+top5", sample.Params{Temperature: 1}, []int32{0, 1, 4}},
		{"t0.7/k4/unlikely+impossible", sample.Params{Temperature: 0.7, TopK: 4}, []int32{3, 6, 9}},
		{"t1.5/p0.8/all-in-support", sample.Params{Temperature: 1.5, TopP: 0.8}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"t1/k6/p0.9/second", sample.Params{Temperature: 1, TopK: 6, TopP: 0.9}, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decoder{}
			d.tree.reset(0)
			for _, r := range tc.drafts {
				d.tree.add(0, order[r], -float64(r))
			}
			d.tree.pick(len(tc.drafts), false)
			want := map[int32]float64{}
			for _, e := range sample.New(tc.params).Distribution(row, nil) {
				want[e.ID] = e.P
			}
			run := func(rule func(smp *sample.Sampler) int32) (float64, int) {
				smp := sample.New(tc.params)
				counts := map[int32]int{}
				for range draws {
					counts[rule(smp)]++
				}
				return chiSquare(counts, want, draws)
			}
			stat, df := run(func(smp *sample.Sampler) int32 {
				tok, child := d.reject(0, row, smp)
				if child >= 0 && d.tree.nodes[d.tree.sel[child]].tok != tok {
					t.Fatalf("accepted child %d holds token %d, emitted %d", child, d.tree.nodes[d.tree.sel[child]].tok, tok)
				}
				return tok
			})
			if stat > chiSquare001[df] {
				t.Errorf("multi-draft rule: chi-square %.1f with %d degrees of freedom (0.1%% critical value %.1f)", stat, df, chiSquare001[df])
			}
			lossy, df := run(func(smp *sample.Sampler) int32 { return lossyReject(d, row, smp) })
			t.Logf("chi-square %.1f, lossy rule %.1f, df %d, critical %.1f", stat, lossy, df, chiSquare001[df])
			if lossy <= chiSquare001[df] && len(tc.drafts) < len(want) {
				t.Errorf("the test cannot tell the lossy rule (chi-square %.1f) from the target", lossy)
			}
		})
	}
}

// TestSampledKeepsDistributionStories: through the whole Step (suffix
// drafts verified by stories260K, acceptance, commit, next step), the
// first two tokens after a fixed pending token follow the model's own
// joint distribution under the sampler's settings. Earlier "requests" seed
// the suffix drafter with continuations of the context, both likely and
// impossible ones, and every trial's output joins the history too.
func TestSampledKeepsDistributionStories(t *testing.T) {
	const trials = 1500
	m := openModel(t, storiesPath, tensor.F16)
	V := m.Hyper().Vocab
	params := sample.Params{Temperature: 1, TopK: 3, Seed: 9}
	prompt := []int32{1, 403, 407, 261, 378, 434}
	const ctxLen = 32

	st := m.NewState(ctxLen)
	lg := make([]float32, V)
	if err := m.Forward(st, model.ChainBatch(prompt, 0, false), lg); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	pending := sample.Argmax(lg)
	// the target's joint distribution of the next two tokens
	dist := func(seq ...int32) []sample.TokenProb {
		if err := st.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if err := m.Forward(st, model.ChainBatch(seq, st.Len(), false), lg); err != nil {
			t.Fatal(err)
		}
		return sample.New(params).Distribution(lg, nil)
	}
	want := map[[2]int32]float64{}
	first := dist(pending)
	for _, a := range first {
		for _, b := range dist(pending, a.ID) {
			want[[2]int32{a.ID, b.ID}] = a.P * b.P
		}
	}
	d, err := New(m, Config{Mode: "tree", Steps: 2, TopK: 2, VerifyNodes: 4, Drafters: []string{"suffix"}}, ctxLen)
	if err != nil {
		t.Fatal(err)
	}
	last := prompt[len(prompt)-1]
	impossible := int32(0)
	for impossible == first[0].ID || impossible == first[1].ID || impossible == first[2].ID {
		impossible++
	}
	for _, doc := range [][]int32{
		{last, pending, first[0].ID, dist(pending, first[0].ID)[0].ID},
		{last, pending, first[1].ID, impossible},
		{last, pending, impossible, first[0].ID},
	} {
		d.Begin(doc, nil)
	}
	smp := sample.New(params)
	counts := map[[2]int32]int{}
	var accepted int64
	for range trials {
		if err := st.Restore(snap); err != nil {
			t.Fatal(err)
		}
		d.Begin(prompt, nil)
		var out []int32
		for p := pending; len(out) < 2; p = out[len(out)-1] {
			toks, err := d.Step(st, p, ctxLen-st.Len(), smp)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, toks...)
		}
		accepted += d.Stats().Accepted
		counts[[2]int32{out[0], out[1]}]++
	}
	stat, cells := 0.0, 0
	for k := range counts {
		if want[k] == 0 {
			t.Fatalf("emitted %v, which the target never samples", k)
		}
	}
	for k, p := range want {
		cells++
		e := p * trials
		dv := float64(counts[k]) - e
		stat += dv * dv / e
	}
	df := cells - 1
	t.Logf("joint of 2 tokens over %d cells: chi-square %.1f (0.1%% critical %.1f); %d draft tokens accepted in %d trials",
		cells, stat, chiSquare001[df], accepted, trials)
	if stat > chiSquare001[df] {
		t.Errorf("speculative sampling changed the distribution: chi-square %.1f, %d degrees of freedom", stat, df)
	}
	if accepted < trials/4 {
		t.Errorf("only %d draft tokens accepted in %d trials: the test does not exercise acceptance", accepted, trials)
	}
}
