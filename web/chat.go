package web

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// OpenAI's chat completion objects, as far as this server fills them.

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []chatChoice `json:"choices"`
	Usage             usage        `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *chatLogprobs   `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role             string             `json:"role"`
	Content          *string            `json:"content"`
	ReasoningContent *string            `json:"reasoning_content,omitempty"`
	ToolCalls        []responseToolCall `json:"tool_calls,omitempty"`
}

type responseToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

type promptTokensDetails struct {
	// CachedTokens are the prompt tokens restored from the prefix cache.
	CachedTokens int `json:"cached_tokens"`
}

func newUsage(o genOutcome) usage {
	return usage{PromptTokens: o.promptTokens, CompletionTokens: o.outputTokens, TotalTokens: o.promptTokens + o.outputTokens,
		PromptTokensDetails: promptTokensDetails{CachedTokens: o.cachedTokens}}
}

type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int           `json:"index"`
	Delta        chunkDelta    `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallChunk `json:"tool_calls,omitempty"`
}

type toolCallChunk struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolFunctionChunk `json:"function"`
}

type toolFunctionChunk struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chunkDeltaOf is the wire form of one parsed delta. A call's first delta
// carries its id, type and name (arguments ""), later ones its argument
// fragments.
func chunkDeltaOf(d chat.Delta) chunkDelta {
	switch {
	case d.ToolCall != nil:
		tc := toolCallChunk{Index: d.ToolCall.Index, Function: toolFunctionChunk{Name: d.ToolCall.Name, Arguments: d.ToolCall.Arguments}}
		if d.ToolCall.ID != "" {
			tc.ID, tc.Type = d.ToolCall.ID, "function"
		}
		return chunkDelta{ToolCalls: []toolCallChunk{tc}}
	case d.Reasoning != "":
		return chunkDelta{ReasoningContent: &d.Reasoning}
	}
	return chunkDelta{Content: &d.Content}
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	p, rec, ok := beginGeneration(s, w, r, "messages", decodeChatRequest)
	if !ok {
		return
	}
	plan, err := s.chatPlan(p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rec.promptTokens = len(plan.prompt)
	ctx, cancel := s.requestContext(r)
	defer cancel()
	r = r.WithContext(ctx)
	id := "chatcmpl-" + randomHex(12)
	if p.Stream {
		s.streamChat(w, r, id, p, plan)
		return
	}
	var choices []chatChoice
	var total genOutcome
	for i := range p.N {
		if i > 0 { // each choice its own plan: its parser, logprobs, seed
			if plan, err = s.chatPlan(p); err != nil {
				writeError(w, r, err)
				return
			}
			if p.SeedGiven {
				plan.sample.Seed += uint64(i)
			}
		}
		var deltas []chat.Delta
		out, err := s.generate(ctx, plan, func(ds []chat.Delta) { deltas = append(deltas, ds...) })
		total = addChoice(total, out, i)
		s.recordOutcome(rec, total)
		if err != nil {
			writeError(w, r, err)
			return
		}
		msg := chat.Assemble(deltas)
		finish := finishReason(out.finish, len(msg.ToolCalls) > 0)
		rec.finish = finish
		rm := responseMessage{Role: "assistant", ReasoningContent: msg.ReasoningContent}
		if msg.Content.Text != "" || len(msg.ToolCalls) == 0 {
			rm.Content = &msg.Content.Text
		}
		for _, tc := range msg.ToolCalls {
			rm.ToolCalls = append(rm.ToolCalls, responseToolCall{ID: tc.ID, Type: "function",
				Function: functionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		choices = append(choices, chatChoice{Index: i, Message: rm, FinishReason: finish, Logprobs: plan.lp.takeChat()})
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: id, Object: "chat.completion", Created: rec.start.Unix(), Model: s.opt.ModelName, SystemFingerprint: s.opt.SystemFingerprint,
		Choices: choices, Usage: newUsage(total),
	})
}

// addChoice adds choice i's outcome to those before it: the prompt is
// counted once (and its cached tokens as the first choice found them),
// the output tokens of every choice.
func addChoice(total, out genOutcome, i int) genOutcome {
	if i == 0 {
		return out
	}
	total.outputTokens += out.outputTokens
	total.targetSteps += out.targetSteps
	total.draftTokens += out.draftTokens
	total.acceptedTokens += out.acceptedTokens
	total.draftSteps += out.draftSteps
	for j, n := range out.acceptedAt {
		total.acceptedAt[j] += n
	}
	if out.timedTokens > 0 {
		total.lastToken = out.lastToken
		total.timedTokens += out.timedTokens
	}
	total.finish = out.finish
	return total
}

// finishReason is OpenAI's: "tool_calls" when the answer holds calls and
// was not cut by the token limit.
func finishReason(engineFinish string, calls bool) string {
	if calls && engineFinish != "length" {
		return "tool_calls"
	}
	if engineFinish == "" {
		return "stop"
	}
	return engineFinish
}

func (s *Server) recordOutcome(rec *record, out genOutcome) {
	rec.promptTokens = out.promptTokens
	rec.cachedTokens = out.cachedTokens
	rec.outputTokens = out.outputTokens
	rec.draft = out.draft
	rec.targetSteps = out.targetSteps
	rec.draftTokens = out.draftTokens
	rec.acceptedTokens = out.acceptedTokens
	rec.draftSteps = out.draftSteps
	rec.acceptedAt = out.acceptedAt
	rec.finish = out.finish
	if out.timedTokens > 0 {
		rec.ttft = out.firstToken.Sub(rec.start)
	}
	rec.tpot = out.tpot()
}

// streamChat streams a chat completion: a role chunk, a chunk per delta,
// a finish chunk, the usage chunk when asked for, [DONE].
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, id string, p *chatParams, plan *genPlan) {
	created := recordOf(r.Context()).start.Unix()
	chunk := func(d chunkDelta, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
			SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	calls := false
	if p.N > 1 {
		s.streamChoices(w, r, id, p, plan)
		return
	}
	s.stream(w, r, plan, streamFormat{
		first: func() any {
			empty := ""
			return chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
		},
		delta: func(d chat.Delta) any {
			calls = calls || d.ToolCall != nil
			c := chunk(chunkDeltaOf(d), nil)
			c.Choices[0].Logprobs = plan.lp.takeChat()
			return c
		},
		end: func(out genOutcome) (string, []any) {
			finish := finishReason(out.finish, calls)
			c := chunk(chunkDelta{}, &finish)
			c.Choices[0].Logprobs = plan.lp.takeChat()
			last := []any{c}
			if p.IncludeUsage {
				u := newUsage(out)
				last = append(last, chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
					SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{}, Usage: &u})
			}
			return finish, last
		},
	})
}

// streamChoices streams n choices one after another, each opened by its
// role chunk and closed by its finish chunk, then the usage chunk when
// asked for and [DONE]. Choice i uses seed+i when a seed was given.
func (s *Server) streamChoices(w http.ResponseWriter, r *http.Request, id string, p *chatParams, plan *genPlan) {
	created := recordOf(r.Context()).start.Unix()
	plans := []*genPlan{plan}
	for i := 1; i < p.N; i++ {
		pl, err := s.chatPlan(p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if p.SeedGiven {
			pl.sample.Seed += uint64(i)
		}
		plans = append(plans, pl)
	}
	index, calls := 0, false
	chunk := func(d chunkDelta, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
			SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{{Index: index, Delta: d, FinishReason: finish}}}
	}
	role := func() any {
		empty := ""
		return chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
	}
	var finish string
	s.stream(w, r, plan, streamFormat{
		more:  plans[1:],
		first: role,
		delta: func(d chat.Delta) any {
			calls = calls || d.ToolCall != nil
			c := chunk(chunkDeltaOf(d), nil)
			c.Choices[0].Logprobs = plans[index].lp.takeChat()
			return c
		},
		choiceEnd: func(out genOutcome) []any {
			finish = finishReason(out.finish, calls)
			c := chunk(chunkDelta{}, &finish)
			c.Choices[0].Logprobs = plans[index].lp.takeChat()
			evs := []any{c}
			if index++; index < len(plans) {
				calls = false
				evs = append(evs, role())
			}
			return evs
		},
		end: func(total genOutcome) (string, []any) {
			var last []any
			if p.IncludeUsage {
				u := newUsage(total)
				last = append(last, chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
					SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{}, Usage: &u})
			}
			return finish, last
		},
	})
}

// chatPlan renders and tokenizes the prompt and sets up the output side.
func (s *Server) chatPlan(p *chatParams) (*genPlan, error) {
	promptText, err := s.tpl.Render(p.Chat)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	plain, err := s.messageSpans(p.Chat, promptText)
	if err != nil {
		return nil, err
	}
	plan, err := s.newPlan("messages", promptText, plain, nil, p.genParams)
	if err != nil {
		return nil, err
	}
	formatted := false // the answer is held to response_format (or grammar, json_schema)
	if plan.constraint == nil {
		// response_format wins over the tool calls' own grammar (an answer
		// in its format holds no call markup)
		if plan.constraint, err = s.toolConstraint(p); err != nil {
			return nil, err
		}
	} else {
		formatted = true
		if p.ToolChoice == toolRequired || p.ToolChoice == toolNamed {
			return nil, badRequest("response_format", "response_format and tool_choice %q both say what the answer is: send one", toolChoiceName(p))
		}
	}
	plan.publishAt = s.publishPoints(p.Chat, promptText, plan.prompt)
	// And the whole prompt but its last token (the engine always runs that
	// one, for its logits): an identical request (a retry, an agent asking
	// again, a fixed prompt) then reuses all of it, whatever the template.
	if n := len(plan.prompt) - 1; n > 0 && !slices.Contains(plan.publishAt, n) {
		plan.publishAt = append(plan.publishAt, n)
	}
	reasoningOpen := chat.ReasoningOpen(promptText)
	if formatted && (reasoningOpen || (s.markup.Reasons && !strings.HasSuffix(strings.TrimRight(promptText, " \t\r\n"), turn.ThinkClose))) {
		// A model that reasons first writes its <think> block freely; the
		// format holds from after "</think>" (what the template writes
		// there is forced), as a forced tool call does.
		plan.mayReason, plan.reasoningOpen, plan.afterReasoning = true, reasoningOpen, s.markup.AfterReasoning
	}
	hasTools := len(p.Chat.Tools) > 0
	parse := hasTools && p.ToolChoice != toolNone
	if parse {
		idPrefix := p.callIDPrefix
		if idPrefix == "" {
			idPrefix = "call_"
		}
		plan.split = chat.NewParser(p.Chat.Tools, chat.ParserOptions{StartInReasoning: reasoningOpen, IDPrefix: idPrefix + randomHex(4) + "_"})
		plan.callMarkers = []string{"<tool_call>", "</tool_call>"}
		if s.markup.XML {
			plan.callMarkers = append(plan.callMarkers, strings.TrimSpace(s.markup.ParamOpen))
		}
	} else {
		// No tools offered: the reasoning is split off, call markup stays
		// content, verbatim.
		plan.split = chat.NewParser(nil, chat.ParserOptions{StartInReasoning: reasoningOpen, NoCalls: true})
	}
	switch p.ToolChoice {
	case toolNone:
		if hasTools && s.canForce {
			// The tools stay in the prompt (as llama.cpp and vLLM keep
			// them, and the prompt cache wants); a call the model starts
			// anyway ends the answer instead of leaking markup.
			plan.stops = append(plan.stops, turn.Stop{Text: strings.TrimSpace(s.markup.Open)})
		}
	case toolRequired, toolNamed:
		if !s.canForce {
			return nil, badRequest("tool_choice", "tool_choice %q cannot be honoured: this model's chat template writes no tool-call markup", toolChoiceName(p))
		}
		plan.force = s.markup.Prefix(p.ToolName)
		plan.reasoningOpen = reasoningOpen
		plan.mayReason = reasoningOpen || (s.markup.Reasons && !strings.HasSuffix(strings.TrimRight(promptText, " \t\r\n"), turn.ThinkClose))
		plan.afterReasoning = s.markup.AfterReasoning
	}
	if p.reasoningBudget > 0 && (reasoningOpen || (s.markup.Reasons && !strings.HasSuffix(strings.TrimRight(promptText, " \t\r\n"), turn.ThinkClose))) {
		// The reasoning runs first, up to its budget; past it the
		// reasoning is closed for the model and the answer follows.
		plan.mayReason, plan.reasoningOpen, plan.afterReasoning = true, reasoningOpen, s.markup.AfterReasoning
		plan.reasoningBudget = p.reasoningBudget
	}
	if parse && (!p.ParallelToolCalls || p.ToolChoice == toolNamed) {
		// One call at most: the generation ends after the first call's
		// closing tag (kept, so the parser sees the call complete).
		plan.stops = append(plan.stops, turn.Stop{Text: "</tool_call>", Keep: true})
	}
	return plan, nil
}

func toolChoiceName(p *chatParams) string {
	if p.ToolChoice == toolNamed {
		return "function " + p.ToolName
	}
	return "required"
}

// newPlan tokenizes a prompt (text, or the given ids) and applies the
// generation settings; param is the request field that holds the prompt.
// plain are the byte ranges of text whose control-token text stays text
// (messageSpans).
func (s *Server) newPlan(param, text string, plain [][2]int, ids []int32, g genParams) (*genPlan, error) {
	if ids == nil {
		// Every token stands for at least one byte of the text (one more
		// for a SentencePiece dummy prefix, one token more for BOS), at most
		// maxTokenBytes: a text this long is over the context whatever its
		// tokens, and is refused before tokenizing it.
		if s.maxTokenBytes > 0 && len(text) > s.ctxLen*s.maxTokenBytes {
			return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
				Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt is %d bytes, so at least %d tokens (no token is longer than %d bytes).",
					s.ctxLen, len(text), len(text)/s.maxTokenBytes, s.maxTokenBytes)}
		}
		if s.tokenizing != nil {
			select {
			case s.tokenizing <- struct{}{}:
			default:
				return nil, toAPIError(nil, engine.ErrQueueFull)
			}
			ids = s.encodePrompt(text, plain)
			<-s.tokenizing
		} else {
			ids = s.encodePrompt(text, plain)
		}
	}
	if len(ids) == 0 {
		return nil, badRequest(param, "the prompt is empty")
	}
	if len(ids) >= s.ctxLen {
		return nil, contextLengthExceeded(param, len(ids), s.ctxLen)
	}
	// (the ranges are checked with the body; the token ids here)
	if err := g.Penalties.Validate(len(s.tok.Vocab().Tokens)); err != nil {
		return nil, badRequest("logit_bias", "%v", err)
	}
	plan := &genPlan{prompt: ids, maxTokens: g.MaxTokens, sample: g.Sample, ignoreEOS: g.IgnoreEOS,
		penalties: g.Penalties, logprobs: g.Logprobs, topLogprobs: g.TopLogprobs}
	if g.Logprobs {
		plan.lp = &logprobQueue{}
	}
	if g.Grammar != nil {
		plan.constraint = &engine.Constraint{Grammar: g.Grammar}
	}
	if !g.SeedGiven {
		plan.sample.Seed = rand.Uint64()
	}
	for _, st := range g.Stop {
		plan.stops = append(plan.stops, turn.Stop{Text: st, Client: true})
	}
	return plan, nil
}

// encodePrompt tokenizes prompt text, special tokens written in it
// included but in the ranges plain, with BOS first when the model wants one and the text does not
// already start with it (templates that write bos_token themselves).
func (s *Server) encodePrompt(text string, plain [][2]int) []int32 {
	ids := s.tok.EncodeMixed(text, false, plain)
	v := s.tok.Vocab()
	if v.AddBOS && v.BOS >= 0 && (s.bosText == "" || !strings.HasPrefix(text, s.bosText)) {
		ids = append([]int32{v.BOS}, ids...)
	}
	return ids
}

// servesModel reports whether a request's "model" names this server's:
// its name, an alias or the model file's path.
func (s *Server) servesModel(name string) bool {
	return name == "" || name == s.opt.ModelName || (s.opt.ModelPath != "" && name == s.opt.ModelPath) ||
		slices.Contains(s.aliases, name)
}

func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	if s.opt.RequestTimeout > 0 {
		ctx := context.WithValue(r.Context(), requestTimeoutKey{}, s.opt.RequestTimeout)
		return context.WithTimeoutCause(ctx, s.opt.RequestTimeout, errRequestTimeout)
	}
	return context.WithCancel(r.Context())
}

func randomHex(n int) string {
	b := make([]byte, n)
	crand.Read(b)
	return hex.EncodeToString(b)
}
