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
	plans, err := s.planChoices(&p.Turn, p.N)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rec.promptTokens = len(plans[0].Prompt)
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
	if p.Stream {
		var choiceEnd func(res turn.Result) []any
		if len(plans) > 1 {
			choiceEnd = func(res turn.Result) []any {
				finish := chatFinish(res)
				c := chunk("", &finish)
				c.Choices[0].Logprobs = plans[index].lp.takeCompletion()
				index++
				return []any{c}
			}
		}
		s.stream(w, r, plans[0], streamFormat{
			more:      plans[1:],
			choiceEnd: choiceEnd,
			delta: func(d chat.Delta) any {
				c := chunk(d.Content, nil)
				c.Choices[0].Logprobs = plans[index].lp.takeCompletion()
				return c
			},
			end: func(res turn.Result) (string, []any) {
				finish := chatFinish(res)
				var last []any
				if len(plans) == 1 {
					c := chunk("", &finish)
					c.Choices[0].Logprobs = plans[0].lp.takeCompletion()
					last = append(last, c)
				}
				if p.IncludeUsage {
					u := newUsage(res)
					last = append(last, textCompletion{ID: id, Object: "text_completion", Created: created, Model: s.opt.ModelName,
						SystemFingerprint: s.opt.SystemFingerprint, Choices: []textChoice{}, Usage: &u})
				}
				return finish, last
			},
		})
		return
	}
	out := chunk("", nil)
	out.Choices = nil
	var total turn.Result
	for i, plan := range plans { // each choice its own plan: its logprobs, seed
		var text []byte
		res, err := s.generate(ctx, plan, func(ds []chat.Delta) {
			for _, d := range ds {
				text = append(text, d.Content...)
			}
		})
		total = addChoice(total, res, i)
		s.recordOutcome(rec, total)
		if err != nil {
			writeError(w, r, err)
			return
		}
		finish := chatFinish(res)
		rec.finish = finish
		out.Choices = append(out.Choices, textChoice{Index: i, Text: string(text), FinishReason: &finish, Logprobs: plan.lp.takeCompletion()})
	}
	u := newUsage(total)
	out.Usage = &u
	writeJSON(w, http.StatusOK, out)
}
