package web

import (
	"net/http"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type textChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := beginGeneration(s, w, r, "prompt", decodeCompletionRequest)
	if !ok {
		return
	}
	var ids []int32
	if p.IsTokens {
		ids = append([]int32{}, p.PromptTokens...)
		n := len(s.tok.Vocab().Tokens)
		for i, id := range ids {
			if id < 0 || int(id) >= n {
				writeError(w, r, badRequest("prompt", "prompt[%d]: token %d is outside the vocabulary of %d tokens", i, id, n))
				return
			}
		}
	}
	plan, err := s.newPlan("prompt", p.PromptText, nil, ids, p.genParams)
	if err != nil {
		writeError(w, r, err)
		return
	}
	plan.split = turn.PlainText{}
	// A raw prompt has no template to say where the next one will agree
	// with it: publish it whole, for a next prompt that extends it.
	plan.publishAt = []int{len(plan.prompt)}
	rec.promptTokens = len(plan.prompt)
	ctx, cancel := s.requestContext(r)
	defer cancel()
	r = r.WithContext(ctx)
	id := "cmpl-" + randomHex(12)
	created := rec.start.Unix()
	index := 0 // the choice being streamed
	chunk := func(text string, finish *string) textCompletion {
		return textCompletion{ID: id, Object: "text_completion", Created: created, Model: s.opt.ModelName,
			SystemFingerprint: s.opt.SystemFingerprint, Choices: []textChoice{{Index: index, Text: text, FinishReason: finish}}}
	}
	// The plans of the choices after the first (n > 1).
	plans := []*genPlan{plan}
	for i := 1; i < p.N; i++ {
		pl, err := s.newPlan("prompt", p.PromptText, nil, ids, p.genParams)
		if err != nil {
			writeError(w, r, err)
			return
		}
		pl.split = turn.PlainText{}
		pl.publishAt = []int{len(pl.prompt)}
		if p.SeedGiven {
			pl.sample.Seed += uint64(i)
		}
		plans = append(plans, pl)
	}
	if p.Stream {
		var choiceEnd func(out genOutcome) []any
		if len(plans) > 1 {
			choiceEnd = func(out genOutcome) []any {
				finish := finishReason(out.finish, false)
				c := chunk("", &finish)
				c.Choices[0].Logprobs = plans[index].lp.takeCompletion()
				index++
				return []any{c}
			}
		}
		s.stream(w, r, plan, streamFormat{
			more:      plans[1:],
			choiceEnd: choiceEnd,
			delta: func(d chat.Delta) any {
				c := chunk(d.Content, nil)
				c.Choices[0].Logprobs = plans[index].lp.takeCompletion()
				return c
			},
			end: func(out genOutcome) (string, []any) {
				finish := finishReason(out.finish, false)
				var last []any
				if len(plans) == 1 {
					c := chunk("", &finish)
					c.Choices[0].Logprobs = plan.lp.takeCompletion()
					last = append(last, c)
				}
				if p.IncludeUsage {
					u := newUsage(out)
					last = append(last, textCompletion{ID: id, Object: "text_completion", Created: created, Model: s.opt.ModelName,
						SystemFingerprint: s.opt.SystemFingerprint, Choices: []textChoice{}, Usage: &u})
				}
				return finish, last
			},
		})
		return
	}
	res := chunk("", nil)
	res.Choices = nil
	var total genOutcome
	for i, plan := range plans { // each choice its own plan: its logprobs, seed
		var text []byte
		out, err := s.generate(ctx, plan, func(ds []chat.Delta) {
			for _, d := range ds {
				text = append(text, d.Content...)
			}
		})
		total = addChoice(total, out, i)
		s.recordOutcome(rec, total)
		if err != nil {
			writeError(w, r, err)
			return
		}
		finish := finishReason(out.finish, false)
		rec.finish = finish
		res.Choices = append(res.Choices, textChoice{Index: i, Text: string(text), FinishReason: &finish, Logprobs: plan.lp.takeCompletion()})
	}
	u := newUsage(total)
	res.Usage = &u
	writeJSON(w, http.StatusOK, res)
}
