package web

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"

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

func newUsage(res turn.Result) usage {
	u := res.Usage
	return usage{PromptTokens: u.PromptTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.PromptTokens + u.OutputTokens,
		PromptTokensDetails: promptTokensDetails{CachedTokens: u.CachedTokens}}
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
	plans, err := s.planChoices(&p.Turn, p.N)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rec.promptTokens = len(plans[0].Prompt)
	ctx, cancel := s.requestContext(r)
	defer cancel()
	r = r.WithContext(ctx)
	id := "chatcmpl-" + randomHex(12)
	if p.Stream {
		s.streamChat(w, r, id, p, plans)
		return
	}
	var choices []chatChoice
	var total turn.Result
	for i, plan := range plans { // each choice its own plan: its parser, logprobs, seed
		var deltas []chat.Delta
		res, err := s.generate(ctx, plan, func(ds []chat.Delta) { deltas = append(deltas, ds...) })
		total = addChoice(total, res, i)
		s.recordOutcome(rec, total)
		if err != nil {
			writeError(w, r, err)
			return
		}
		msg := chat.Assemble(deltas)
		finish := chatFinish(res)
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

// planChoices plans the n choices of one request, each its own plan (its
// parser, logprobs, seed: a fixed seed is seed+i for choice i).
func (s *Server) planChoices(t *turn.Request, n int) ([]*genPlan, error) {
	var plans []*genPlan
	for i := range max(n, 1) {
		plan, err := s.plan(t)
		if err != nil {
			return nil, err
		}
		plan.Choice(i)
		plans = append(plans, plan)
	}
	return plans, nil
}

// addChoice adds choice i's result to those before it: the prompt is
// counted once (and its cached tokens as the first choice found them),
// the output tokens of every choice.
func addChoice(total, res turn.Result, i int) turn.Result {
	if i == 0 {
		return res
	}
	total.Usage.OutputTokens += res.Usage.OutputTokens
	total.Usage.ReasoningTokens += res.Usage.ReasoningTokens
	total.Engine.Add(res.Engine)
	total.Finish, total.StopSequence = res.Finish, res.StopSequence
	return total
}

// chatFinish is OpenAI's finish reason: stop, length or tool_calls.
func chatFinish(res turn.Result) string {
	if res.Finish == turn.FinishStopSequence {
		return string(turn.FinishStop)
	}
	return string(res.Finish)
}

func (s *Server) recordOutcome(rec *record, res turn.Result) {
	rec.promptTokens = res.Usage.PromptTokens
	rec.cachedTokens = res.Usage.CachedTokens
	rec.outputTokens = res.Usage.OutputTokens
	e := res.Engine
	rec.draft = e.Draft
	rec.spec = e.Spec
	rec.finish = string(res.Finish)
	if e.TimedTokens > 0 {
		rec.ttft = e.FirstToken.Sub(rec.start)
	}
	rec.tpot = e.TPOT()
}

// streamChat streams a chat completion: a role chunk, a chunk per delta,
// a finish chunk, the usage chunk when asked for, [DONE]. n choices are
// streamed one after another, each opened by its role chunk and closed by
// its finish chunk.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, id string, p *chatParams, plans []*genPlan) {
	created := recordOf(r.Context()).start.Unix()
	index := 0
	chunk := func(d chunkDelta, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
			SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{{Index: index, Delta: d, FinishReason: finish}}}
	}
	role := func() any {
		empty := ""
		return chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
	}
	// choiceEnd is the finish chunk of the choice streamed.
	choiceEnd := func(res turn.Result) (string, chatChunk) {
		finish := chatFinish(res)
		c := chunk(chunkDelta{}, &finish)
		c.Choices[0].Logprobs = plans[index].lp.takeChat()
		return finish, c
	}
	usageChunk := func(res turn.Result) []any {
		if !p.IncludeUsage {
			return nil
		}
		u := newUsage(res)
		return []any{chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ModelName,
			SystemFingerprint: s.opt.SystemFingerprint, Choices: []chunkChoice{}, Usage: &u}}
	}
	f := streamFormat{
		first: role,
		delta: func(d chat.Delta) any {
			c := chunk(chunkDeltaOf(d), nil)
			c.Choices[0].Logprobs = plans[index].lp.takeChat()
			return c
		},
		end: func(res turn.Result) (string, []any) {
			finish, c := choiceEnd(res)
			return finish, append([]any{c}, usageChunk(res)...)
		},
	}
	if len(plans) > 1 {
		var finish string
		f.more = plans[1:]
		f.choiceEnd = func(res turn.Result) []any {
			var c chatChunk
			finish, c = choiceEnd(res)
			evs := []any{c}
			if index++; index < len(plans) {
				evs = append(evs, role())
			}
			return evs
		}
		f.end = func(total turn.Result) (string, []any) { return finish, usageChunk(total) }
	}
	s.stream(w, r, plans[0], f)
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
