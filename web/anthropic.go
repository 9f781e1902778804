package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens),
// as Claude Code speaks it: the adapter maps the body to a turn.Request
// and the answer to Anthropic's message and stream events. Errors are in
// Anthropic's shape ({"type":"error","error":{"type","message"}}), set for
// the whole route by anthropicRoute so that the key check and the
// media-type check answer in it too.

// anthropicRequest is the body of POST /v1/messages.
type anthropicRequest struct {
	Model         string             `json:"model"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	MaxTokens     *int               `json:"max_tokens"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	Tools      []anthropicTool `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	OutputConfig *struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// anthropicKnown are the fields read (or accepted with no effect to give:
// metadata, context_management, service_tier; see docs/agents.md).
var anthropicKnown = []string{"model", "messages", "system", "max_tokens", "stop_sequences", "stream", "temperature",
	"top_p", "top_k", "thinking", "tools", "tool_choice", "output_config", "metadata", "context_management", "service_tier"}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is one content block of a request message.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// billingHeader starts a system block Claude Code adds for Anthropic's
// billing; it is no instruction for the model, and its text changes
// between conversations, so it would keep them from sharing the prefix
// cache of the system prompt.
const billingHeader = "x-anthropic-billing-header:"

// anthropicBlocks reads a content that is a string or a list of blocks.
func anthropicBlocks(field string, raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return nil, badRequest(field, "%s: missing", field)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, jsonError(field, err)
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, badRequest(field, "%s must be a string or a list of content blocks", field)
	}
	return blocks, nil
}

// toolResultText is a tool_result's content: a string or text blocks.
func toolResultText(field string, raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return "", nil
	}
	blocks, err := anthropicBlocks(field, raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for j, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image", "document":
			return "", badRequest(fmt.Sprintf("%s[%d]", field, j), "%s[%d]: %s blocks are not supported: this model reads text only", field, j, b.Type)
		default:
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, j), "%s[%d].type: %q is not supported in a tool result (only \"text\")", field, j, b.Type)
		}
	}
	return strings.Join(parts, "\n"), nil
}

// anthropicTurn maps a Messages body to a turn. forCount leaves
// max_tokens optional (count_tokens has none).
func anthropicTurn(a *anthropicRequest, forCount bool) (*turn.Request, error) {
	t := &turn.Request{ParallelToolCalls: true, Sampling: turn.Sampling{Temperature: a.Temperature, TopP: a.TopP, TopK: a.TopK}}
	if !forCount {
		if a.MaxTokens == nil {
			return nil, badRequest("max_tokens", "max_tokens: Field required")
		}
		if *a.MaxTokens < 1 {
			return nil, badRequest("max_tokens", "max_tokens must be at least 1, got %d", *a.MaxTokens)
		}
		t.MaxTokens = *a.MaxTokens
	}
	if a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > 1) {
		return nil, badRequest("temperature", "temperature must be in [0, 1], got %v", *a.Temperature)
	}
	t.Stop = a.StopSequences
	if len(a.System) > 0 && !isNull(a.System) {
		blocks, err := anthropicBlocks("system", a.System)
		if err != nil {
			return nil, err
		}
		var texts []string
		for i, b := range blocks {
			if b.Type != "text" {
				return nil, badRequest(fmt.Sprintf("system[%d].type", i), "system[%d].type must be \"text\", got %q", i, b.Type)
			}
			if strings.HasPrefix(b.Text, billingHeader) {
				continue
			}
			texts = append(texts, b.Text)
		}
		if len(texts) > 0 {
			t.Messages = append(t.Messages, chat.Message{Role: "system", Content: chat.TextContent(strings.Join(texts, "\n"))})
		}
	}
	if len(a.Messages) == 0 {
		return nil, badRequest("messages", "messages: at least one message is required")
	}
	for i, m := range a.Messages {
		field := fmt.Sprintf("messages[%d].content", i)
		blocks, err := anthropicBlocks(field, m.Content)
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case "user", "system": // system: Claude Code's mid-conversation system messages
			var texts []string
			flush := func() {
				if len(texts) > 0 {
					t.Messages = append(t.Messages, chat.Message{Role: m.Role, Content: chat.TextContent(strings.Join(texts, "\n"))})
					texts = nil
				}
			}
			for j, b := range blocks {
				bf := fmt.Sprintf("%s[%d]", field, j)
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_result":
					if m.Role != "user" {
						return nil, badRequest(bf, "%s: tool_result blocks belong in user messages", bf)
					}
					flush()
					text, err := toolResultText(bf+".content", b.Content)
					if err != nil {
						return nil, err
					}
					if b.IsError {
						text = "Error: " + text
					}
					if b.ToolUseID == "" {
						return nil, badRequest(bf+".tool_use_id", "%s.tool_use_id: missing", bf)
					}
					t.Messages = append(t.Messages, chat.Message{Role: "tool", Content: chat.TextContent(text), ToolCallID: b.ToolUseID})
				case "image", "document":
					return nil, badRequest(bf, "%s: %s blocks are not supported: this model reads text only", bf, b.Type)
				default:
					return nil, badRequest(bf+".type", "%s.type: %q is not supported in a %s message", bf, b.Type, m.Role)
				}
			}
			flush()
		case "assistant":
			msg := chat.Message{Role: "assistant"}
			var texts, reasoning []string
			for j, b := range blocks {
				bf := fmt.Sprintf("%s[%d]", field, j)
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "thinking":
					reasoning = append(reasoning, b.Thinking)
				case "redacted_thinking":
					// Only Anthropic's servers can read it; we never write one.
				case "tool_use":
					input, err := rawJSONObject(bf+".input", b.Input)
					if err != nil {
						return nil, err
					}
					if b.ID == "" || b.Name == "" {
						return nil, badRequest(bf, "%s: a tool_use block needs id and name", bf)
					}
					msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: b.ID, Type: "function",
						Function: chat.FunctionCall{Name: b.Name, Arguments: string(input)}})
				default:
					return nil, badRequest(bf+".type", "%s.type: %q is not supported in an assistant message", bf, b.Type)
				}
			}
			msg.Content = chat.TextContent(strings.Join(texts, ""))
			msg.Content.Null = len(texts) == 0 && len(msg.ToolCalls) > 0
			if len(reasoning) > 0 {
				r := strings.Join(reasoning, "\n")
				msg.ReasoningContent = &r
			}
			t.Messages = append(t.Messages, msg)
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role must be \"user\" or \"assistant\", got %q", i, m.Role)
		}
	}
	for i, tool := range a.Tools {
		if tool.Type != "" && tool.Type != "custom" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type: %q is one of Anthropic's server tools, which this server cannot run; send it as a custom tool with input_schema", i, tool.Type)
		}
		if !turn.ToolNamePattern.MatchString(tool.Name) {
			return nil, badRequest(fmt.Sprintf("tools[%d].name", i), "tools[%d].name must be 1 to 64 letters, digits, '_', '-', '.' or ':'", i)
		}
		if len(tool.InputSchema) == 0 || isNull(tool.InputSchema) {
			return nil, badRequest(fmt.Sprintf("tools[%d].input_schema", i), "tools[%d].input_schema: Field required", i)
		}
		t.Tools = append(t.Tools, turn.Tool{Name: tool.Name, Description: tool.Description, Parameters: tool.InputSchema})
	}
	if tc := a.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "":
		case "any":
			t.ToolChoice.Mode = turn.ToolRequired
		case "tool":
			t.ToolChoice = turn.ToolChoice{Mode: turn.ToolNamed, Name: tc.Name}
		case "none":
			t.ToolChoice.Mode = turn.ToolNone
		default:
			return nil, badRequest("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\", got %q", tc.Type)
		}
		t.ParallelToolCalls = !tc.DisableParallelToolUse
	}
	if th := a.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			on := true
			t.Reasoning = &on
			if th.BudgetTokens < 0 {
				return nil, badRequest("thinking.budget_tokens", "thinking.budget_tokens must be >= 0, got %d", th.BudgetTokens)
			}
			t.ReasoningBudget = th.BudgetTokens
		case "disabled":
			off := false
			t.Reasoning = &off
		case "adaptive": // the model decides: the template's default
		default:
			return nil, badRequest("thinking.type", "thinking.type must be \"enabled\", \"disabled\" or \"adaptive\", got %q", th.Type)
		}
	}
	if oc := a.OutputConfig; oc != nil && oc.Format != nil {
		switch oc.Format.Type {
		case "json_schema":
			if len(oc.Format.Schema) == 0 || isNull(oc.Format.Schema) {
				return nil, badRequest("output_config.format.schema", "output_config.format.schema: Field required")
			}
			t.Format = &turn.Format{Kind: turn.FormatJSONSchema, Schema: oc.Format.Schema, Field: "output_config.format.schema"}
		default:
			return nil, badRequest("output_config.format.type", "output_config.format.type must be \"json_schema\", got %q", oc.Format.Type)
		}
	}
	return t, nil
}

// decodeAnthropic reads a Messages body and plans its generation.
func (s *Server) decodeAnthropic(w http.ResponseWriter, r *http.Request, forCount bool) (*anthropicRequest, *genPlan, bool) {
	rec := recordOf(r.Context())
	body, ok := s.beginTurn(w, r, rec)
	if !ok {
		return nil, nil, false
	}
	var a anthropicRequest
	if err := decodeJSONBody(body, &a); err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	rec.model, rec.stream, rec.ignored = a.Model, a.Stream, ignoredFields(body, anthropicKnown)
	if a.Model == "" {
		writeError(w, r, badRequest("model", "model: Field required"))
		return nil, nil, false
	}
	if !s.checkModel(w, r, a.Model) {
		return nil, nil, false
	}
	t, err := anthropicTurn(&a, forCount)
	if err == nil {
		t.CallIDPrefix, t.LateSystemAsUser = "toolu_", true
		var plan *genPlan
		if plan, err = s.plan(t); err == nil {
			rec.promptTokens = len(plan.Prompt)
			return &a, plan, true
		}
	}
	writeError(w, r, err)
	return nil, nil, false
}

// countTokens answers POST /v1/messages/count_tokens: the prompt tokens
// the same request would be charged (input, cache read and cache
// creation tokens together).
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	_, plan, ok := s.decodeAnthropic(w, r, true)
	if !ok {
		return
	}
	recordOf(r.Context()).generation = false
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(plan.Prompt)})
}

// anthropicUsage splits the prompt as Anthropic does: input_tokens are
// the ones prefilled, cache_read_input_tokens the ones restored from the
// prefix cache; the three together are the whole prompt.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func anthropicUsageOf(u turn.Usage) anthropicUsage {
	return anthropicUsage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CachedTokens}
}

type anthropicMessageResponse struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// thinkingSignature stands in Anthropic's signature of a thinking block:
// the SDKs want one, and a client sends it back with the block; the
// reasoning is read back as plain text, so it only marks the block as ours.
const thinkingSignature = "edgellmd"

func anthropicStopReason(res turn.Result) string {
	switch res.Finish {
	case turn.FinishLength:
		return "max_tokens"
	case turn.FinishToolCalls:
		return "tool_use"
	case turn.FinishStopSequence:
		return "stop_sequence"
	}
	return "end_turn"
}

// toolInput is a call's arguments as a JSON object; a call cut by the
// token limit (its arguments unfinished) is dropped.
func toolInput(args string) (json.RawMessage, bool) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), true
	}
	if !json.Valid([]byte(args)) || !isObject(json.RawMessage(args)) {
		return nil, false
	}
	return json.RawMessage(args), true
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	a, plan, ok := s.decodeAnthropic(w, r, false)
	if !ok {
		return
	}
	rec := recordOf(r.Context())
	ctx, cancel := s.requestContext(r)
	defer cancel()
	r = r.WithContext(ctx)
	id := "msg_" + randomHex(12)
	if a.Stream {
		s.streamAnthropic(w, r, id, a.Model, plan)
		return
	}
	msg, res, err := s.runTurn(ctx, rec, plan)
	if err != nil {
		writeError(w, r, err)
		return
	}
	content := []map[string]any{}
	if msg.ReasoningContent != nil {
		content = append(content, map[string]any{"type": "thinking", "thinking": *msg.ReasoningContent, "signature": thinkingSignature})
	}
	if msg.Content.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": msg.Content.Text})
	}
	for _, tc := range msg.ToolCalls {
		if input, ok := toolInput(tc.Function.Arguments); ok {
			content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input})
		}
	}
	stop := anthropicStopReason(res)
	resp := anthropicMessageResponse{ID: id, Type: "message", Role: "assistant", Model: a.Model, Content: content,
		StopReason: &stop, Usage: anthropicUsageOf(res.Usage)}
	if res.StopSequence != "" {
		resp.StopSequence = &res.StopSequence
	}
	writeJSON(w, http.StatusOK, resp)
}

// streamAnthropic streams the answer as Anthropic's events: message_start
// (its usage split as the final one, by the prompt tokens the engine
// restored from the prefix cache before the first delta), ping, for each
// block content_block_start, its deltas and
// content_block_stop, then message_delta (stop reason and usage) and
// message_stop.
func (s *Server) streamAnthropic(w http.ResponseWriter, r *http.Request, id, model string, plan *genPlan) {
	ev := func(name string, data map[string]any) namedEvent {
		data["type"] = name
		return namedEvent{name: name, data: data}
	}
	block := -1     // the open block's index
	kind := ""      // its type: thinking, text, tool_use
	callIndex := -1 // the open tool_use block's call
	closeBlock := func() []any {
		if block < 0 || kind == "" {
			return nil
		}
		var out []any
		if kind == "thinking" {
			out = append(out, ev("content_block_delta", map[string]any{"index": block,
				"delta": map[string]any{"type": "signature_delta", "signature": thinkingSignature}}))
		}
		kind = ""
		return append(out, ev("content_block_stop", map[string]any{"index": block}))
	}
	open := func(k string, start map[string]any) []any {
		out := closeBlock()
		block++
		kind = k
		return append(out, ev("content_block_start", map[string]any{"index": block, "content_block": start}))
	}
	cached := 0 // the prompt tokens restored from the prefix cache
	s.stream(w, r, plan, streamFormat{
		noDone: true,
		cached: func(n int) { cached = n },
		first: func() any {
			// The same split as message_delta's and the whole answer's:
			// the engine has restored the prompt's prefix before the
			// first delta.
			u := anthropicUsageOf(turn.Usage{PromptTokens: len(plan.Prompt), CachedTokens: cached})
			return []any{
				ev("message_start", map[string]any{"message": anthropicMessageResponse{ID: id, Type: "message", Role: "assistant",
					Model: model, Content: []map[string]any{}, Usage: u}}),
				ev("ping", map[string]any{}),
			}
		},
		delta: func(d chat.Delta) any {
			var out []any
			switch {
			case d.Reasoning != "":
				if kind != "thinking" {
					out = open("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""})
				}
				return append(out, ev("content_block_delta", map[string]any{"index": block,
					"delta": map[string]any{"type": "thinking_delta", "thinking": d.Reasoning}}))
			case d.ToolCall != nil:
				tc := d.ToolCall
				if tc.ID != "" || tc.Index != callIndex {
					callIndex = tc.Index
					out = open("tool_use", map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}})
				}
				if tc.Arguments != "" {
					out = append(out, ev("content_block_delta", map[string]any{"index": block,
						"delta": map[string]any{"type": "input_json_delta", "partial_json": tc.Arguments}}))
				}
				return out
			}
			if kind != "text" {
				out = open("text", map[string]any{"type": "text", "text": ""})
			}
			return append(out, ev("content_block_delta", map[string]any{"index": block,
				"delta": map[string]any{"type": "text_delta", "text": d.Content}}))
		},
		end: func(res turn.Result) (string, []any) {
			last := closeBlock()
			var seq *string
			if res.StopSequence != "" {
				seq = &res.StopSequence
			}
			last = append(last,
				ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": anthropicStopReason(res), "stop_sequence": seq},
					"usage": anthropicUsageOf(res.Usage)}),
				ev("message_stop", map[string]any{}))
			return string(res.Finish), last
		},
		fail: func(ae *apiError) []any {
			return []any{namedEvent{name: "error", data: anthropicErrorBody(ae)}}
		},
	})
}

// anthropicErrorType is Anthropic's error type for an answer's status.
func anthropicErrorType(ae *apiError) string {
	switch ae.Status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusRequestTimeout:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	return "api_error"
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicErrorBody(ae *apiError) anthropicError {
	var b anthropicError
	b.Type = "error"
	b.Error.Type = anthropicErrorType(ae)
	b.Error.Message = ae.Message
	if ae.Param != "" && !strings.Contains(ae.Message, ae.Param) {
		b.Error.Message = ae.Param + ": " + ae.Message
	}
	return b
}

// anthropicRoute marks the request so that every error on its way
// (key, media type, readiness) is written in Anthropic's shape.
func anthropicRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec := recordOf(r.Context()); rec != nil {
			rec.wire = wireAnthropic
		}
		next.ServeHTTP(w, r)
	})
}
