package turn

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
)

// ErrPanic is returned when the text stage panicked inside the engine's
// emit callback, which runs on the engine worker's goroutine: the request
// fails, the worker lives on.
var ErrPanic = errors.New("internal error in the output pipeline")

// run is one Run's state: what the result will say, and what the sink saw.
type run struct {
	res      Result
	engineFn string // the engine's finish reason: "stop" or "length"
	calls    bool   // a tool-call delta went out
	thinking []Delta
	// prefixKnown: the cached prompt tokens are known (the first engine
	// run restored its prefix, or the turn ended without one); until
	// then deltas (a forced call's markup) wait in held.
	prefixKnown bool
	held        []Delta
	onPrefix    func(cached int)
	sink        func([]Delta)
}

// prefix records the cached prompt tokens of the turn's first engine run
// (later runs continue its prompt: they are not the client's), tells
// Plan.OnPrefix and lets the held deltas go.
func (r *run) prefix(cached int) {
	if r.prefixKnown {
		return
	}
	r.prefixKnown = true
	r.res.Usage.CachedTokens = min(cached, r.res.Usage.PromptTokens)
	if r.onPrefix != nil {
		r.onPrefix(r.res.Usage.CachedTokens)
	}
	if len(r.held) > 0 {
		r.sink(r.held)
		r.held = nil
	}
}

func (r *run) tokenArrived() {
	now := time.Now()
	e := &r.res.Engine
	if e.TimedTokens == 0 {
		e.FirstToken = now
	}
	e.LastToken = now
	e.TimedTokens++
}

// addSpec counts one engine run's speculative decoding figures.
func (r *run) addSpec(res engine.Result) {
	e := &r.res.Engine
	e.Draft = res.Draft
	e.Spec.Add(res.Spec)
}

// Run generates plan's answer. Every delta goes to sink as soon as it is
// known, from the goroutine that calls emit (the engine worker), so a
// stop string ends the generation at the token that completes it; sink
// must not block on the client. The result's Finish is FinishToolCalls
// when the answer holds a call and was not cut by the token limit,
// FinishStopSequence when one of the request's stop strings ended it. On
// an error the result holds what was counted so far.
func (p *Pipeline) Run(ctx context.Context, plan *Plan, sink func([]Delta)) (Result, error) {
	r := &run{onPrefix: plan.OnPrefix, sink: sink}
	r.res.Usage.PromptTokens = len(plan.Prompt)
	out := func(ds []Delta) {
		for _, d := range ds {
			switch {
			case d.ToolCall != nil:
				r.calls = true
			case d.Reasoning != "":
				r.thinking = append(r.thinking, d)
			}
		}
		if !r.prefixKnown {
			r.held = append(r.held, ds...)
			return
		}
		sink(ds)
	}
	err := p.generate(ctx, plan, r, out)
	if err == nil {
		r.prefix(0) // no engine run reached the prompt (a forced call cut by max_tokens)
	}
	res := r.res
	switch {
	case r.engineFn == "length":
		res.Finish = FinishLength
	case r.calls:
		res.Finish = FinishToolCalls
	case res.StopSequence != "":
		res.Finish = FinishStopSequence
	default:
		res.Finish = FinishStop
	}
	if len(r.thinking) > 0 {
		if rc := chat.Assemble(r.thinking).ReasoningContent; rc != nil {
			res.Usage.ReasoningTokens = min(len(p.tok.Encode(*rc, false, false)), res.Usage.OutputTokens)
		}
	}
	return res, err
}

// generate runs plan on the source.
func (p *Pipeline) generate(ctx context.Context, plan *Plan, r *run, sink func([]Delta)) error {
	dec := NewTextDecoder(plan.stops, plan.split)
	if plan.mayReason {
		// The server's own stop strings (after one call's "</tool_call>")
		// are about the answer, not the reasoning before it, which may
		// mention them: they hold from the end of the reasoning on.
		dec.SetStops(ClientStops(plan.stops))
	}
	emit := p.guard(func(t engine.Token) error {
		r.tokenArrived()
		if plan.OnToken != nil {
			plan.OnToken(t)
		}
		deltas, stop := dec.Push(t.Piece)
		sink(deltas)
		if stop {
			return engine.ErrStop
		}
		return nil
	})
	req := plan.request()
	req.Constraint = plan.constraint
	req.OnPrefix = r.prefix

	if plan.force != "" || plan.mayReason {
		prompt := plan.Prompt
		used := 0
		closing := "" // markup that closes reasoning the model left open
		if plan.mayReason {
			kept, cl, done, err := p.reasonFirst(ctx, plan, dec, sink, r)
			if err != nil || done {
				return err
			}
			closing = cl
			prompt = append(append([]int32(nil), plan.Prompt...), kept...)
			used = len(kept)
			dec.SetStops(plan.stops)
		}
		forced := plan.force
		if used > 0 || closing != "" {
			forced = closing + plan.afterReasoning + forced
		}
		forcedTokens := p.tok.Encode(forced, false, true)
		used += len(forcedTokens)
		r.res.Usage.OutputTokens = used
		sink(dec.Inject(forced))
		req.Prompt = append(prompt, forcedTokens...)
		if plan.maxTokens > 0 {
			if req.MaxTokens = plan.maxTokens - used; req.MaxTokens <= 0 {
				r.engineFn = "length"
				sink(plan.endText(dec, r.engineFn))
				return nil
			}
		}
	}

	res, err := p.opt.Source(ctx, req, emit)
	r.addSpec(res)
	if err == nil {
		r.prefix(res.CachedTokens) // a source that did not call OnPrefix
	}
	r.res.Usage.OutputTokens += len(res.Tokens)
	if err != nil {
		if plan.force != "" && errors.Is(err, engine.ErrContextFull) && r.res.Usage.OutputTokens > 0 {
			// The reasoning and the forced markup filled the context.
			r.engineFn = "length"
			sink(plan.endText(dec, r.engineFn))
			return nil
		}
		return err
	}
	r.engineFn = res.FinishReason
	if m := dec.Matched(); m != nil && m.Client {
		r.res.StopSequence = m.Text
	}
	sink(plan.endText(dec, r.engineFn))
	return nil
}

// endText ends the text of a generation that finished for reason finish.
// When the token limit cut a tool call before its name and arguments began
// (the parser then gives its text back as content), the call is dropped:
// partial markup never reaches the content. A call cut later is reported
// as far as it got, with finish reason "length".
func (plan *Plan) endText(dec *TextDecoder, finish string) []Delta {
	ds := dec.Finish()
	if finish != "length" || len(plan.callMarkers) == 0 {
		return ds
	}
	return DropCutCall(ds, plan.callMarkers...)
}

// request is the engine request of plan, without its constraint.
func (plan *Plan) request() engine.Request {
	return engine.Request{Prompt: plan.Prompt, MaxTokens: plan.maxTokens, Sample: plan.sample, IgnoreEOS: plan.ignoreEOS,
		PublishAt: plan.publishAt, Penalties: plan.penalties, Logprobs: plan.logprobs, TopLogprobs: plan.topLogprobs}
}

// reasonFirst runs the reasoning part of a forced tool call: the model
// writes its <think> block freely and the generation stops where it
// closes. kept are the tokens to continue after; done reports that the
// generation ended for good (end of generation, length, a stop string).
// When the model does not open with reasoning, nothing is kept or sent
// and the call is forced from the start. A model that ends its turn
// inside its reasoning does not end the turn while a call is pending:
// its reasoning is kept and closing ("</think>") closes it, the call is
// forced after it.
func (p *Pipeline) reasonFirst(ctx context.Context, plan *Plan, dec *TextDecoder, sink func([]Delta), r *run) (kept []int32, closing string, done bool, err error) {
	gate := ReasoningGate{Open: plan.reasoningOpen}
	stoppedByText := false
	emit := p.guard(func(t engine.Token) error {
		r.tokenArrived()
		if plan.OnToken != nil {
			plan.OnToken(t)
		}
		pass, stop := gate.Push(t.Piece)
		if len(pass) > 0 {
			deltas, textStop := dec.Push(pass)
			sink(deltas)
			if textStop {
				stoppedByText = true
				return engine.ErrStop
			}
		}
		if stop {
			return engine.ErrStop
		}
		return nil
	})
	req := plan.request() // the reasoning is free: the constraint applies to the forced call
	req.OnPrefix = r.prefix
	budget := plan.reasoningBudget
	if budget > 0 && (req.MaxTokens == 0 || budget < req.MaxTokens) {
		req.MaxTokens = budget
	} else {
		budget = 0 // max_tokens comes first
	}
	res, err := p.opt.Source(ctx, req, emit)
	r.addSpec(res)
	if err != nil {
		return nil, "", true, err
	}
	r.prefix(res.CachedTokens) // a source that did not call OnPrefix

	endedTurn := res.FinishReason == "stop" && !stoppedByText // the model wrote its end of turn
	// pending: a forced call or a format must still follow the reasoning.
	pending := plan.force != "" || (plan.constraint != nil && plan.constraint.Trigger == "")
	overBudget := budget > 0 && res.FinishReason == "length" && !stoppedByText
	switch {
	case stoppedByText:
	case gate.Closed:
		return res.Tokens, "", false, nil
	case gate.Open && (overBudget || endedTurn && pending):
		kept := res.Tokens
		for len(kept) > 0 && p.tok.IsEOG(kept[len(kept)-1]) {
			kept = kept[:len(kept)-1]
		}
		return kept, "\n" + ThinkClose, false, nil
	case gate.None || endedTurn && pending:
		// Nothing of this run counts: the call is forced from the start
		// (the engine's figures and the cached prompt stay).
		e := r.res.Engine
		r.res = Result{Usage: Usage{PromptTokens: r.res.Usage.PromptTokens, CachedTokens: r.res.Usage.CachedTokens},
			Engine: EngineStats{Draft: e.Draft, Spec: e.Spec}}
		return nil, "", false, nil
	case len(gate.Undecided) > 0:
		deltas, _ := dec.Push(gate.Undecided)
		sink(deltas)
	}
	r.res.Usage.OutputTokens = len(res.Tokens)
	r.engineFn = res.FinishReason
	if m := dec.Matched(); m != nil && m.Client {
		r.res.StopSequence = m.Text
	}
	sink(plan.endText(dec, r.engineFn))
	return nil, "", true, nil
}

// guard recovers a panic of the text stage inside emit, which runs on
// the engine worker's goroutine: the request fails, the worker lives on.
func (p *Pipeline) guard(emit func(engine.Token) error) func(engine.Token) error {
	return func(t engine.Token) (err error) {
		defer func() {
			if v := recover(); v != nil {
				p.opt.Log.Error().Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).Msg("panic in the output pipeline")
				err = ErrPanic
			}
		}()
		return emit(t)
	}
}
