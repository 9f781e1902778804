package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Params are the user-visible sampling settings.
type Params struct {
	Temperature float32 // <= 0 means greedy
	TopK        int     // <= 0 means no limit
	TopP        float32 // >= 1 or <= 0 means no limit
	Seed        uint64
}

// Validate reports the first setting that is out of range, naming it.
func (p Params) Validate() error {
	switch {
	case math.IsNaN(float64(p.Temperature)) || p.Temperature < 0:
		return fmt.Errorf("temperature must be >= 0, got %v", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("top_k must be >= 0, got %d", p.TopK)
	case math.IsNaN(float64(p.TopP)) || p.TopP < 0 || p.TopP > 1:
		return fmt.Errorf("top_p must be in [0, 1], got %v", p.TopP)
	}
	return nil
}

// Greedy reports whether p always picks the most likely token.
func (p Params) Greedy() bool { return p.Temperature <= 0 || p.TopK == 1 }

// Sampler draws tokens for one sequence.
type Sampler struct {
	p    Params
	rng  *rand.Rand
	cand []candidate
}

type candidate struct {
	id    int32
	logit float32
	prob  float64
}

// New returns a sampler for p, seeded with p.Seed.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Params returns the settings the sampler was made with.
func (s *Sampler) Params() Params { return s.p }

// Argmax returns the index of the largest logit (the lowest index on ties,
// as llama.cpp's greedy sampler does).
func Argmax(logits []float32) int32 {
	best := 0
	for i := 1; i < len(logits); i++ {
		if logits[i] > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// Pick returns the next token for logits (one row of vocabulary size).
func (s *Sampler) Pick(logits []float32) int32 {
	if s.p.Greedy() {
		return Argmax(logits)
	}
	c := s.cand[:0]
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) && !math.IsNaN(float64(l)) {
			c = append(c, candidate{id: int32(i), logit: l})
		}
	}
	s.cand = c
	if len(c) == 0 {
		return Argmax(logits)
	}
	c = s.filter(c)
	u := s.rng.Float64()
	cum := 0.0
	for i := range c {
		cum += c[i].prob
		if u < cum {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

// softmax fills prob for sorted candidates (largest logit first).
func softmax(c []candidate, temp float32) {
	maxL := float64(c[0].logit)
	sum := 0.0
	for i := range c {
		c[i].prob = math.Exp((float64(c[i].logit) - maxL) / float64(temp))
		sum += c[i].prob
	}
	for i := range c {
		c[i].prob /= sum
	}
}

func byLogitDesc(a, b candidate) int {
	switch {
	case a.logit > b.logit:
		return -1
	case a.logit < b.logit:
		return 1
	}
	return int(a.id - b.id)
}
