package sample

import (
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestArgmaxLowestIndexOnTies(t *testing.T) {
	if got := Argmax([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("Argmax = %d, want 1", got)
	}
}

func TestGreedyIgnoresSeed(t *testing.T) {
	logits := []float32{0.1, 2.5, 2.4, -1}
	for seed := uint64(0); seed < 10; seed++ {
		if got := New(Params{Seed: seed}).Pick(logits); got != 1 {
			t.Fatalf("seed %d: greedy picked %d", seed, got)
		}
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 64).Draw(t, "n")
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rapid.Float64Range(-5, 5).Draw(t, "logit"))
		}
		p := Params{
			Temperature: float32(rapid.Float64Range(0.1, 2).Draw(t, "temp")),
			TopK:        rapid.IntRange(0, n).Draw(t, "topk"),
			TopP:        float32(rapid.Float64Range(0.05, 1).Draw(t, "topp")),
			Seed:        rapid.Uint64().Draw(t, "seed"),
		}
		a, b := New(p), New(p)
		for i := 0; i < 20; i++ {
			x, y := a.Pick(logits), b.Pick(logits)
			if x != y {
				t.Fatalf("draw %d: %d != %d with the same seed", i, x, y)
			}
			if x < 0 || int(x) >= n {
				t.Fatalf("token %d out of range", x)
			}
		}
	})
}

func TestTopKRestricts(t *testing.T) {
	logits := []float32{5, 4, 3, 2, 1, 0}
	s := New(Params{Temperature: 5, TopK: 2, Seed: 7})
	for i := 0; i < 500; i++ {
		if got := s.Pick(logits); got > 1 {
			t.Fatalf("top-k 2 picked token %d", got)
		}
	}
}

func TestTopPRestricts(t *testing.T) {
	// probabilities ~ 0.64, 0.24, 0.09, 0.03: top-p 0.8 keeps the first two.
	logits := []float32{3, 2, 1, 0}
	s := New(Params{Temperature: 1, TopP: 0.8, Seed: 3})
	seen := map[int32]int{}
	for i := 0; i < 2000; i++ {
		seen[s.Pick(logits)]++
	}
	if seen[2] != 0 || seen[3] != 0 {
		t.Fatalf("top-p 0.8 picked outside the nucleus: %v", seen)
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("top-p 0.8 should pick both nucleus tokens: %v", seen)
	}
}

func TestTemperatureMatchesDistribution(t *testing.T) {
	logits := []float32{1, 0}
	s := New(Params{Temperature: 1, Seed: 11})
	n, hits := 20000, 0
	for i := 0; i < n; i++ {
		if s.Pick(logits) == 0 {
			hits++
		}
	}
	want := 1 / (1 + math.Exp(-1)) // 0.731
	got := float64(hits) / float64(n)
	if math.Abs(got-want) > 0.02 {
		t.Fatalf("P(token 0) = %.3f, want %.3f", got, want)
	}
}

func TestValidateNamesSetting(t *testing.T) {
	for _, c := range []struct {
		p    Params
		want string
	}{
		{Params{Temperature: -1}, "temperature"},
		{Params{TopK: -2}, "top_k"},
		{Params{TopP: 1.5}, "top_p"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c.p, err, c.want)
		}
	}
	if err := (Params{Temperature: 0.7, TopK: 40, TopP: 0.9}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	logits := make([]float32, 512)
	for i := range logits {
		logits[i] = float32(i%17) * 0.1
	}
	s := New(Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1})
	s.Pick(logits)
	if n := testing.AllocsPerRun(50, func() { s.Pick(logits) }); n > 1 {
		t.Fatalf("Pick allocates %v times per call", n)
	}
}
