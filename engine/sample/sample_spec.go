package sample

import (
	"math"
	"slices"
)

// What speculative decoding needs from a sampler: the distribution Pick
// draws from (to accept or reject drafted tokens losslessly) and uniform
// draws from the same seeded stream.

// TokenProb is a token and the probability Pick gives it.
type TokenProb struct {
	ID int32
	P  float64
}

// Distribution writes into dst[:0] the tokens Pick may return for logits
// with the probabilities it returns them with (after top-k, top-p and
// temperature, as Pick computes them), most likely first, and returns it.
// For greedy settings it is the argmax with probability 1. It draws nothing
// from the random stream.
func (s *Sampler) Distribution(logits []float32, dst []TokenProb) []TokenProb {
	dst = dst[:0]
	if s.p.Greedy() {
		return append(dst, TokenProb{ID: Argmax(logits), P: 1})
	}
	c := s.cand[:0]
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) && !math.IsNaN(float64(l)) {
			c = append(c, candidate{id: int32(i), logit: l})
		}
	}
	s.cand = c
	if len(c) == 0 {
		return append(dst, TokenProb{ID: Argmax(logits), P: 1})
	}
	c = s.filter(c)
	for i := range c {
		dst = append(dst, TokenProb{ID: c[i].id, P: c[i].prob})
	}
	return dst
}

// filter is the chain Pick and Distribution share once the candidate list
// is built: sort, top-k, top-p on the untempered distribution, then
// temperature, as llama.cpp's default chain does.
func (s *Sampler) filter(c []candidate) []candidate {
	slices.SortFunc(c, byLogitDesc)
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		softmax(c, 1)
		cum := 0.0
		for i := range c {
			cum += c[i].prob
			if cum >= float64(tp) {
				c = c[:i+1]
				break
			}
		}
	}
	softmax(c, s.p.Temperature)
	return c
}

// Uniform draws a number in [0, 1) from the sampler's seeded stream (the
// one Pick draws from).
func (s *Sampler) Uniform() float64 { return s.rng.Float64() }
