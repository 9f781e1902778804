package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// tokenSource runs one generation and calls emit for each output token, as
// engine.Scheduler.Submit does (the production source). Tests give a
// scripted source to stream known token sequences through the real
// handlers.
type tokenSource func(ctx context.Context, req engine.Request, emit func(engine.Token) error) (engine.Result, error)

// genPlan is one request's generation, ready to run.
type genPlan struct {
	prompt    []int32
	maxTokens int // 0: until end of generation or the context is full
	sample    sample.Params
	ignoreEOS bool
	stops     []turn.Stop
	split     turn.Splitter
	publishAt []int // prefix cache snapshot positions (engine.Request.PublishAt)
	// constraint limits the output (after any forced markup) to a
	// grammar; penalties and logprobs go to the engine as given.
	constraint  *engine.Constraint
	penalties   sample.Penalties
	logprobs    bool
	topLogprobs int
	lp          *logprobQueue // the output's log-probabilities, when asked for

	// force is markup the answer must begin with (tool_choice "required"
	// or a named function). With mayReason the model first writes its
	// reasoning freely, and force (possibly empty: a response_format
	// grammar) follows "</think>" + afterReasoning; the constraint holds
	// from there.
	force string
	// callMarkers start a tool call ("<tool_call>") and its parts (an
	// XML parameter) when the output is parsed for calls: the text of a
	// call cut by the token limit is dropped (endText).
	callMarkers []string
	mayReason   bool
	// reasoningBudget bounds the reasoning (Anthropic's thinking
	// budget_tokens): past it the reasoning is closed for the model.
	reasoningBudget int
	reasoningOpen   bool // the prompt ends inside <think>
	afterReasoning  string
}

// beginGeneration starts a generation route: it reads the body, decodes it
// with decode, puts the model and flags on the request's log line and
// checks the model is the one served. promptParam is the field that holds
// the prompt, for errors about it. When ok is false the error response
// has been written.
func beginGeneration[P interface{ gen() *genParams }](s *Server, w http.ResponseWriter, r *http.Request,
	promptParam string, decode func([]byte) (P, error)) (p P, rec *record, ok bool) {
	rec = recordOf(r.Context())
	rec.generation = true
	rec.promptParam = promptParam
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return p, rec, false
	}
	s.tagSession(w, r, body)
	if p, err = decode(body); err != nil {
		writeError(w, r, err)
		return p, rec, false
	}
	g := p.gen()
	rec.model, rec.stream, rec.ignored = g.Model, g.Stream, g.Ignored
	if !s.servesModel(g.Model) {
		writeError(w, r, modelNotFound(g.Model))
		return p, rec, false
	}
	return p, rec, true
}

// genOutcome summarises a generation for the response and the log line.
type genOutcome struct {
	promptTokens int
	cachedTokens int    // prompt tokens the engine restored from its prefix cache
	outputTokens int    // generated tokens, plus forced markup tokens
	finish       string // "stop" or "length"; the caller turns "stop" into "tool_calls"
	// stopSequence is the request's stop string that ended the text.
	stopSequence string
	firstToken   time.Time
	lastToken    time.Time
	timedTokens  int // tokens between firstToken and lastToken, inclusive
	// speculative decoding: the parameters used, forward passes while
	// decoding, draft tokens verified and accepted
	draft          string
	targetSteps    int
	draftTokens    int
	acceptedTokens int
	draftSteps     int
	acceptedAt     [speculative.MaxStatDepth]int
}

// addSpec counts one engine run's speculative decoding figures.
func (o *genOutcome) addSpec(res engine.Result) {
	o.draft = res.Draft
	o.targetSteps += res.TargetSteps
	o.draftTokens += res.DraftTokens
	o.acceptedTokens += res.AcceptedTokens
	o.draftSteps += res.DraftSteps
	for i, n := range res.AcceptedAt {
		o.acceptedAt[i] += n
	}
}

func (o *genOutcome) tokenArrived() {
	now := time.Now()
	if o.timedTokens == 0 {
		o.firstToken = now
	}
	o.lastToken = now
	o.timedTokens++
}

// tpot is the mean time per output token after the first.
func (o *genOutcome) tpot() time.Duration {
	if o.timedTokens < 2 {
		return 0
	}
	return o.lastToken.Sub(o.firstToken) / time.Duration(o.timedTokens-1)
}

// errEmitPanic is returned to the engine when the text pipeline panicked
// inside the emit callback, which runs on the engine worker's goroutine.
var errEmitPanic = errors.New("internal error in the output pipeline")

// generate runs plan on src. Every delta goes to sink as soon as it is
// known, from the goroutine that calls emit (the engine worker).
func (s *Server) generate(ctx context.Context, plan *genPlan, sink func([]chat.Delta)) (out genOutcome, err error) {
	out.promptTokens = len(plan.prompt)
	live := &liveSeq{start: time.Now(), prompt: len(plan.prompt)}
	if rec := recordOf(ctx); rec != nil {
		live.id, live.start = rec.id, rec.start
	}
	s.live.add(live)
	defer s.live.remove(live)
	dec := turn.NewTextDecoder(plan.stops, plan.split)
	if plan.mayReason {
		// The server's own stop strings (after one call's "</tool_call>")
		// are about the answer, not the reasoning before it, which may
		// mention them: they hold from the end of the reasoning on.
		dec.SetStops(turn.ClientStops(plan.stops))
	}
	emit := s.guard(func(t engine.Token) error {
		out.tokenArrived()
		live.token()
		plan.lp.push(t)
		deltas, stop := dec.Push(t.Piece)
		sink(deltas)
		if stop {
			return engine.ErrStop
		}
		return nil
	})
	req := plan.request()
	req.Constraint = plan.constraint

	reasoned := false
	if plan.force != "" || plan.mayReason {
		prompt := plan.prompt
		used := 0
		closing := "" // markup that closes reasoning the model left open
		if plan.mayReason {
			var kept []int32
			var done bool
			reasoned = true
			kept, closing, done, err = s.reasonFirst(ctx, plan, dec, sink, &out)
			if err != nil || done {
				return out, err
			}
			prompt = append(append([]int32(nil), plan.prompt...), kept...)
			used = len(kept)
			dec.SetStops(plan.stops)
		}
		forced := plan.force
		if used > 0 || closing != "" {
			forced = closing + plan.afterReasoning + forced
		}
		forcedTokens := s.tok.Encode(forced, false, true)
		used += len(forcedTokens)
		out.outputTokens = used
		sink(dec.Inject(forced))
		req.Prompt = append(prompt, forcedTokens...)
		if plan.maxTokens > 0 {
			if req.MaxTokens = plan.maxTokens - used; req.MaxTokens <= 0 {
				out.finish = "length"
				sink(plan.endText(dec, out.finish))
				return out, nil
			}
		}
	}

	res, err := s.source(ctx, req, emit)
	out.addSpec(res)
	if !reasoned { // else the reasoning run, on the prompt itself, said it
		out.cachedTokens = min(res.CachedTokens, out.promptTokens)
	}
	out.outputTokens += len(res.Tokens)
	if err != nil {
		if plan.force != "" && errors.Is(err, engine.ErrContextFull) && out.outputTokens > 0 {
			// The reasoning and the forced markup filled the context.
			out.finish = "length"
			sink(plan.endText(dec, out.finish))
			return out, nil
		}
		return out, err
	}
	out.finish = res.FinishReason
	if m := dec.Matched(); m != nil && m.Client {
		out.stopSequence = m.Text
	}
	sink(plan.endText(dec, out.finish))
	return out, nil
}

// endText ends the text of a generation that finished for reason finish.
// When the token limit cut a tool call before its name and arguments began
// (the parser then gives its text back as content), the call is dropped:
// partial markup never reaches the content. A call cut later is reported
// as far as it got, with finish reason "length".
func (plan *genPlan) endText(dec *turn.TextDecoder, finish string) []chat.Delta {
	ds := dec.Finish()
	if finish != "length" || len(plan.callMarkers) == 0 {
		return ds
	}
	return turn.DropCutCall(ds, plan.callMarkers...)
}

// request is the engine request of plan, without its constraint.
func (plan *genPlan) request() engine.Request {
	return engine.Request{Prompt: plan.prompt, MaxTokens: plan.maxTokens, Sample: plan.sample, IgnoreEOS: plan.ignoreEOS,
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
func (s *Server) reasonFirst(ctx context.Context, plan *genPlan, dec *turn.TextDecoder, sink func([]chat.Delta), out *genOutcome) (kept []int32, closing string, done bool, err error) {
	gate := turn.ReasoningGate{Open: plan.reasoningOpen}
	stoppedByText := false
	emit := s.guard(func(t engine.Token) error {
		out.tokenArrived()
		plan.lp.push(t)
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
	budget := plan.reasoningBudget
	if budget > 0 && (req.MaxTokens == 0 || budget < req.MaxTokens) {
		req.MaxTokens = budget
	} else {
		budget = 0 // max_tokens comes first
	}
	res, err := s.source(ctx, req, emit)
	out.addSpec(res)
	out.cachedTokens = res.CachedTokens
	if err != nil {
		return nil, "", true, err
	}
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
		for len(kept) > 0 && s.tok.IsEOG(kept[len(kept)-1]) {
			kept = kept[:len(kept)-1]
		}
		return kept, "\n" + turn.ThinkClose, false, nil
	case gate.None || endedTurn && pending:
		*out = genOutcome{promptTokens: out.promptTokens, cachedTokens: out.cachedTokens, draft: out.draft,
			targetSteps: out.targetSteps, draftTokens: out.draftTokens, acceptedTokens: out.acceptedTokens,
			draftSteps: out.draftSteps, acceptedAt: out.acceptedAt}
		return nil, "", false, nil
	case len(gate.Undecided) > 0:
		deltas, _ := dec.Push(gate.Undecided)
		sink(deltas)
	}
	out.outputTokens = len(res.Tokens)
	out.finish = res.FinishReason
	if m := dec.Matched(); m != nil && m.Client {
		out.stopSequence = m.Text
	}
	sink(plan.endText(dec, out.finish))
	return nil, "", true, nil
}

// guard recovers a panic of the text pipeline inside emit, which runs on
// the engine worker's goroutine: the request fails, the worker lives on.
func (s *Server) guard(emit func(engine.Token) error) func(engine.Token) error {
	return func(t engine.Token) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("panic in the output pipeline")
				err = errEmitPanic
			}
		}()
		return emit(t)
	}
}
