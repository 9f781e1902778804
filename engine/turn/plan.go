package turn

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// Plan is one request's generation, ready to Run: the prompt's tokens,
// where the prefix cache publishes them, the sampler, the stop strings,
// the output's constraint and the markup a forced call begins with.
type Plan struct {
	// Prompt are the prompt's tokens (BOS included where the model wants
	// one); every API charges them.
	Prompt []int32
	// OnToken, when set, gets each output token as the engine made it
	// (its log-probabilities, the status page's live view), on the engine
	// worker's goroutine, before the token's text reaches the sink.
	OnToken func(engine.Token)
	// OnPrefix, when set, gets the prompt tokens restored from the prefix
	// cache (what Result.Usage.CachedTokens will say) as soon as the engine
	// knows them, before any delta reaches the sink: an API whose stream
	// opens with the usage (Anthropic's message_start) can split it there.
	// Run calls it once, on the engine worker's goroutine, unless the turn
	// fails before the engine reaches the prompt.
	OnPrefix func(cached int)

	maxTokens int // 0: until end of generation or the context is full
	sample    sample.Params
	seeded    bool
	ignoreEOS bool
	stops     []Stop
	split     Splitter
	publishAt []int // prefix cache snapshot positions (engine.Request.PublishAt)
	// constraint limits the output (after any forced markup) to a
	// grammar; penalties and logprobs go to the engine as given.
	constraint  *engine.Constraint
	penalties   sample.Penalties
	logprobs    bool
	topLogprobs int

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

// Choice makes the plan choice i of several of the same request (OpenAI's
// n): a seed the client fixed becomes seed+i, so the choices differ and
// stay reproducible.
func (plan *Plan) Choice(i int) {
	if plan.seeded {
		plan.sample.Seed += uint64(i)
	}
}

// Plan validates req (Validate), renders its conversation with the
// template, tokenizes it and sets up the output side: the splitter into
// reasoning, content and tool calls, the stop strings, the grammar of a
// format or of the tool calls, the forced markup of a required call.
func (p *Pipeline) Plan(req *Request) (*Plan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	c := req.checked
	if req.Prompt != nil {
		plan, err := p.newPlan("prompt", req.Prompt.Text, nil, req.Prompt.Tokens, req, c)
		if err != nil {
			return nil, err
		}
		plan.split = PlainText{}
		// A raw prompt has no template to say where the next one will
		// agree with it: publish it whole, for a next prompt that
		// extends it.
		plan.publishAt = []int{len(plan.Prompt)}
		return plan, nil
	}
	plan, err := p.planChat(req, c, req.Messages)
	if err == nil || !req.LateSystemAsUser {
		return plan, err
	}
	msgs, changed := laterSystemAsUser(req.Messages)
	if !changed {
		return nil, err
	}
	plan, err2 := p.planChat(req, c, msgs)
	if err2 != nil {
		return nil, err
	}
	return plan, nil
}

// laterSystemAsUser turns the system messages after the first message
// into user messages.
func laterSystemAsUser(msgs []chat.Message) ([]chat.Message, bool) {
	out := make([]chat.Message, len(msgs))
	changed := false
	for i, m := range msgs {
		if i > 0 && m.Role == "system" {
			m = chat.Message{Role: "user", Content: chat.TextContent("<system-reminder>\n" + m.Content.String() + "\n</system-reminder>")}
			changed = true
		}
		out[i] = m
	}
	return out, changed
}

// planChat renders and tokenizes the conversation msgs and sets up the
// output side.
func (p *Pipeline) planChat(req *Request, c *checked, msgs []chat.Message) (*Plan, error) {
	creq := req.chatRequest(msgs, c.chatTools)
	promptText, err := p.tpl.Render(creq)
	if err != nil {
		return nil, fieldErr("messages", "%v", err)
	}
	plain, err := p.messageSpans(creq, promptText)
	if err != nil {
		return nil, err
	}
	plan, err := p.newPlan("messages", promptText, plain, nil, req, c)
	if err != nil {
		return nil, err
	}
	formatted := false // the answer is held to a format
	if plan.constraint == nil {
		// A format wins over the tool calls' own grammar (an answer in
		// its format holds no call markup).
		if plan.constraint, err = p.toolConstraint(req, c); err != nil {
			return nil, err
		}
	} else {
		formatted = true
		if req.ToolChoice.Mode == ToolRequired || req.ToolChoice.Mode == ToolNamed {
			field := "response_format"
			if req.Format != nil && req.Format.Field != "" {
				field = strings.SplitN(req.Format.Field, ".", 2)[0]
			}
			return nil, fieldErr(field, "%s and tool_choice %q both say what the answer is: send one", field, toolChoiceName(req.ToolChoice))
		}
	}
	plan.publishAt = p.PublishPoints(creq, promptText, plan.Prompt)
	// And the whole prompt but its last token (the engine always runs that
	// one, for its logits): an identical request (a retry, an agent asking
	// again, a fixed prompt) then reuses all of it, whatever the template.
	if n := len(plan.Prompt) - 1; n > 0 && !slices.Contains(plan.publishAt, n) {
		plan.publishAt = append(plan.publishAt, n)
	}
	reasoningOpen := chat.ReasoningOpen(promptText)
	// mayReason: the model may open the answer with its reasoning.
	mayReason := reasoningOpen || (p.markup.Reasons && !strings.HasSuffix(strings.TrimRight(promptText, " \t\r\n"), ThinkClose))
	if formatted && mayReason {
		// A model that reasons first writes its <think> block freely; the
		// format holds from after "</think>" (what the template writes
		// there is forced), as a forced tool call does.
		plan.mayReason, plan.reasoningOpen, plan.afterReasoning = true, reasoningOpen, p.markup.AfterReasoning
	}
	hasTools := len(req.Tools) > 0
	parse := hasTools && req.ToolChoice.Mode != ToolNone
	if parse {
		idPrefix := req.CallIDPrefix
		if idPrefix == "" {
			idPrefix = "call_"
		}
		plan.split = chat.NewParser(c.chatTools, chat.ParserOptions{StartInReasoning: reasoningOpen, IDPrefix: idPrefix + randomHex(4) + "_"})
		plan.callMarkers = []string{"<tool_call>", "</tool_call>"}
		if p.markup.XML {
			plan.callMarkers = append(plan.callMarkers, strings.TrimSpace(p.markup.ParamOpen))
		}
	} else {
		// No tools offered: the reasoning is split off, call markup stays
		// content, verbatim.
		plan.split = chat.NewParser(nil, chat.ParserOptions{StartInReasoning: reasoningOpen, NoCalls: true})
	}
	switch req.ToolChoice.Mode {
	case ToolNone:
		if hasTools && p.canForce {
			// The tools stay in the prompt (as llama.cpp and vLLM keep
			// them, and the prompt cache wants); a call the model starts
			// anyway ends the answer instead of leaking markup.
			plan.stops = append(plan.stops, Stop{Text: strings.TrimSpace(p.markup.Open)})
		}
	case ToolRequired, ToolNamed:
		if !p.canForce {
			return nil, fieldErr("tool_choice", "tool_choice %q cannot be honoured: this model's chat template writes no tool-call markup", toolChoiceName(req.ToolChoice))
		}
		plan.force = p.markup.Prefix(req.ToolChoice.Name)
		plan.reasoningOpen = reasoningOpen
		plan.mayReason = mayReason
		plan.afterReasoning = p.markup.AfterReasoning
	}
	if req.ReasoningBudget > 0 && mayReason {
		// The reasoning runs first, up to its budget; past it the
		// reasoning is closed for the model and the answer follows.
		plan.mayReason, plan.reasoningOpen, plan.afterReasoning = true, reasoningOpen, p.markup.AfterReasoning
		plan.reasoningBudget = req.ReasoningBudget
	}
	if parse && (!req.ParallelToolCalls || req.ToolChoice.Mode == ToolNamed) {
		// One call at most: the generation ends after the first call's
		// closing tag (kept, so the parser sees the call complete).
		plan.stops = append(plan.stops, Stop{Text: "</tool_call>", Keep: true})
	}
	return plan, nil
}

func toolChoiceName(tc ToolChoice) string {
	if tc.Mode == ToolNamed {
		return "function " + tc.Name
	}
	return "required"
}

// newPlan tokenizes a prompt (text, or the given ids) and applies the
// generation settings; param is the request field that holds the prompt.
// plain are the byte ranges of text whose control-token text stays text
// (messageSpans).
func (p *Pipeline) newPlan(param, text string, plain [][2]int, ids []int32, req *Request, c *checked) (*Plan, error) {
	ctxLen := p.opt.ContextLen
	if ids == nil {
		// Every token stands for at least one byte of the text (one more
		// for a SentencePiece dummy prefix, one token more for BOS), at most
		// maxTokenBytes: a text this long is over the context whatever its
		// tokens, and is refused before tokenizing it.
		if p.maxTokenBytes > 0 && len(text) > ctxLen*p.maxTokenBytes {
			return nil, &FieldError{Field: param, Code: "context_length_exceeded",
				Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt is %d bytes, so at least %d tokens (no token is longer than %d bytes).",
					ctxLen, len(text), len(text)/p.maxTokenBytes, p.maxTokenBytes)}
		}
		if t := p.opt.Tokenizing; t != nil {
			select {
			case t <- struct{}{}:
			default:
				return nil, engine.ErrQueueFull
			}
			ids = p.EncodePrompt(text, plain)
			<-t
		} else {
			ids = p.EncodePrompt(text, plain)
		}
	} else {
		ids = slices.Clone(ids)
		n := len(p.tok.Vocab().Tokens)
		for i, id := range ids {
			if id < 0 || int(id) >= n {
				return nil, fieldErr(param, "%s[%d]: token %d is outside the vocabulary of %d tokens", param, i, id, n)
			}
		}
	}
	if len(ids) == 0 {
		return nil, fieldErr(param, "the prompt is empty")
	}
	if len(ids) >= ctxLen {
		return nil, &FieldError{Field: param, Code: "context_length_exceeded",
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt resulted in %d tokens.", ctxLen, len(ids))}
	}
	s := req.Sampling
	if err := s.Penalties.Validate(len(p.tok.Vocab().Tokens)); err != nil {
		return nil, fieldErr("logit_bias", "%v", err)
	}
	plan := &Plan{Prompt: ids, maxTokens: req.MaxTokens, sample: c.sample, seeded: c.seeded, ignoreEOS: req.IgnoreEOS,
		penalties: s.Penalties, logprobs: s.Logprobs, topLogprobs: s.TopLogprobs}
	if c.grammar != nil {
		plan.constraint = &engine.Constraint{Grammar: c.grammar}
	}
	if !c.seeded {
		plan.sample.Seed = mrand.Uint64()
	}
	for _, st := range req.Stop {
		plan.stops = append(plan.stops, Stop{Text: st, Client: true})
	}
	return plan, nil
}

// EncodePrompt tokenizes prompt text, special tokens written in it
// included but in the ranges plain, with BOS first when the model wants
// one and the text does not already start with it (templates that write
// bos_token themselves).
func (p *Pipeline) EncodePrompt(text string, plain [][2]int) []int32 {
	ids := p.tok.EncodeMixed(text, false, plain)
	v := p.tok.Vocab()
	if v.AddBOS && v.BOS >= 0 && (p.bosText == "" || !strings.HasPrefix(text, p.bosText)) {
		ids = append([]int32{v.BOS}, ids...)
	}
	return ids
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
