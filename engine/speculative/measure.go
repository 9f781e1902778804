package speculative

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// Measure decodes n greedy tokens after each prompt with cfg and returns
// the summed counts and the tokens decoded after the first (each needs a
// target step without drafting). It checks on the way that every token is
// the one plain greedy decoding gives, and fails if one is not.
func Measure(m model.Model, cfg Config, prompts [][]int32, n int) (Stats, int64, error) {
	var sum Stats
	var tokens int64
	hp := m.Hyper()
	for pi, prompt := range prompts {
		ctxLen := min(len(prompt)+n, hp.Context)
		if len(prompt) < 1 || ctxLen <= len(prompt) {
			return sum, tokens, fmt.Errorf("measure: prompt %d of %d tokens leaves no room in a context of %d", pi, len(prompt), hp.Context)
		}
		d, err := New(m, cfg, ctxLen)
		if err != nil {
			return sum, tokens, err
		}
		st, ref := m.NewState(ctxLen), m.NewState(ctxLen)
		lg, refLg, hid := make([]float32, hp.Vocab), make([]float32, hp.Vocab), make([]float32, hp.Embd)
		if err := m.ForwardHidden(st, model.ChainBatch(prompt, 0, false), lg, hid); err != nil {
			return sum, tokens, err
		}
		if err := m.Forward(ref, model.ChainBatch(prompt, 0, false), refLg); err != nil {
			return sum, tokens, err
		}
		d.Begin(prompt, hid)
		smp := sample.New(sample.Params{})
		pending := sample.Argmax(lg)
		want := pending
		one := []int32{0}
		for st.Len() < ctxLen {
			toks, err := d.Step(st, pending, ctxLen-st.Len(), smp)
			if err != nil {
				return sum, tokens, err
			}
			for _, t := range toks {
				one[0] = want
				if err := m.Forward(ref, model.ChainBatch(one, ref.Len(), false), refLg); err != nil {
					return sum, tokens, err
				}
				if want = sample.Argmax(refLg); t != want {
					return sum, tokens, fmt.Errorf("measure: prompt %d: speculative token %d differs from plain greedy %d", pi, t, want)
				}
			}
			tokens += int64(len(toks))
			pending = toks[len(toks)-1]
		}
		s := d.Stats()
		sum.TargetSteps += s.TargetSteps
		sum.Drafted += s.Drafted
		sum.Accepted += s.Accepted
	}
	return sum, tokens, nil
}
