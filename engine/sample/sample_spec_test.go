package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDistributionIsPicks: Distribution lists exactly the tokens Pick
// returns, with the frequencies Pick returns them with (chi-square at the
// 0.1% level), for settings that exercise top-k, top-p and temperature;
// greedy settings give the argmax alone.
func TestDistributionIsPicks(t *testing.T) {
	// 0.1% critical values of chi-square for 1..15 degrees of freedom
	// (NIST/SEMATECH e-Handbook, table 1.3.6.7.4).
	crit := []float64{0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588, 31.264, 32.909, 34.528, 36.123, 37.697}
	rng := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 16)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	logits[3] = float32(math.Inf(-1))
	for _, p := range []Params{
		{Temperature: 1},
		{Temperature: 0.5, TopK: 5},
		{Temperature: 2, TopP: 0.7},
		{Temperature: 1.2, TopK: 8, TopP: 0.95, Seed: 3},
		{Temperature: 0}, // greedy
		{Temperature: 1, TopK: 1},
	} {
		s := New(p)
		dist := s.Distribution(logits, nil)
		want := map[int32]float64{}
		sum := 0.0
		for i, e := range dist {
			if i > 0 && e.P > dist[i-1].P {
				t.Errorf("%+v: Distribution not most likely first at %d", p, i)
			}
			want[e.ID] += e.P
			sum += e.P
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%+v: probabilities sum to %v", p, sum)
		}
		if p.Greedy() && (len(dist) != 1 || dist[0].ID != Argmax(logits)) {
			t.Errorf("%+v: greedy Distribution is %v", p, dist)
		}
		const n = 30000
		counts := map[int32]int{}
		for range n {
			counts[s.Pick(logits)]++
		}
		stat := 0.0
		for tok := range counts {
			if want[tok] == 0 {
				t.Fatalf("%+v: Pick returned %d, which Distribution leaves out", p, tok)
			}
		}
		for tok, pr := range want {
			d := float64(counts[tok]) - pr*n
			stat += d * d / (pr * n)
		}
		if df := len(want) - 1; df > 0 && stat > crit[df] {
			t.Errorf("%+v: Pick frequencies differ from Distribution: chi-square %.1f, %d degrees of freedom", p, stat, df)
		}
	}
}

// TestUniformIsThePickStream: Uniform draws from the stream Pick uses, so
// a sampler's draws stay reproducible from its seed.
func TestUniformIsThePickStream(t *testing.T) {
	a, b := New(Params{Seed: 11, Temperature: 1}), New(Params{Seed: 11, Temperature: 1})
	for range 5 {
		if x, y := a.Uniform(), b.Uniform(); x != y || x < 0 || x >= 1 {
			t.Fatalf("Uniform draws %v and %v from the same seed", x, y)
		}
	}
	logits := []float32{0, 0, 0, 0, 0, 0, 0, 0}
	if a.Pick(logits) != b.Pick(logits) {
		t.Fatal("Picks after the same Uniform draws differ")
	}
}
