package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// OpenAI's Responses API (POST /v1/responses, GET and DELETE
// /v1/responses/{id}), as Codex speaks it: the adapter maps the body to a
// turn.Request and the answer to output items and stream events. Errors
// are in OpenAI's shape, as for chat completions.

type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Store              *bool             `json:"store"`
	Include            []string          `json:"include"`
	Metadata           map[string]string `json:"metadata"`
	PreviousResponseID string            `json:"previous_response_id"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Conversation       json.RawMessage   `json:"conversation"`
	Text               *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
}

// responsesKnown are the fields read, or accepted with nothing to do
// (prompt_cache_key: the prefix cache needs no key; user, client_metadata,
// safety_identifier, service_tier, truncation, stream_options; see
// docs/agents.md).
var responsesKnown = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
	"max_output_tokens", "temperature", "top_p", "store", "include", "metadata", "previous_response_id", "stream",
	"background", "conversation", "text", "reasoning", "prompt_cache_key", "user", "client_metadata",
	"safety_identifier", "service_tier", "truncation", "stream_options"}

// responseItem is one input item, whatever its type.
type responseItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Input            string          `json:"input"`
	Output           json.RawMessage `json:"output"`
	Summary          []responsePart  `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

type responsePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// customInput is the one parameter a freeform ("custom") tool is given to
// the model as: its raw input text.
const customInput = "input"

// responsesTurn is the turn a Responses body asks for; custom are the
// names of its freeform tools, whose calls are answered as
// custom_tool_call items; ignored lists tools the model is not shown.
type responsesTurn struct {
	turn    *turn.Request
	history []chat.Message // the conversation without the instructions, for the store
	custom  []string
	ignored []string
}

func responsesText(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []responsePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(field, "%s must be a string or a list of content parts", field)
	}
	var texts []string
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text":
			texts = append(texts, p.Text)
		case "input_image", "input_file", "input_audio":
			return "", badRequest(fmt.Sprintf("%s[%d]", field, j), "%s[%d]: %s is not supported: this model reads text only", field, j, p.Type)
		default:
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, j), "%s[%d].type: %q is not a content part this server knows", field, j, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// responsesItems maps input items to chat messages; an assistant's
// reasoning, text and calls in a row become one assistant message.
func responsesItems(items []json.RawMessage) ([]chat.Message, error) {
	var msgs []chat.Message
	var asst *chat.Message
	flush := func() {
		if asst != nil {
			asst.Content.Null = asst.Content.Text == "" && len(asst.ToolCalls) > 0
			msgs = append(msgs, *asst)
			asst = nil
		}
	}
	assistant := func() *chat.Message {
		if asst == nil {
			asst = &chat.Message{Role: "assistant"}
		}
		return asst
	}
	for i, raw := range items {
		field := fmt.Sprintf("input[%d]", i)
		var it responseItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, jsonError(field, err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			text, err := responsesText(field+".content", it.Content)
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case "assistant":
				a := assistant()
				if len(a.ToolCalls) > 0 { // text after calls: a new turn
					flush()
					a = assistant()
				}
				a.Content.Text += text
			case "user", "system", "developer":
				flush()
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				msgs = append(msgs, chat.Message{Role: role, Content: chat.TextContent(text)})
			default:
				return nil, badRequest(field+".role", "%s.role must be user, assistant, system or developer, got %q", field, it.Role)
			}
		case "reasoning":
			text, err := responsesText(field+".content", it.Content)
			if err != nil {
				return nil, err
			}
			if text == "" && it.EncryptedContent != nil {
				text = *it.EncryptedContent // ours: the reasoning as it was
			}
			a := assistant()
			if a.Content.Text != "" || len(a.ToolCalls) > 0 {
				flush()
				a = assistant()
			}
			if text != "" {
				a.ReasoningContent = &text
			}
		case "function_call", "custom_tool_call":
			if it.CallID == "" || it.Name == "" {
				return nil, badRequest(field, "%s: a %s needs call_id and name", field, it.Type)
			}
			args := it.Arguments
			if it.Type == "custom_tool_call" {
				b, _ := json.Marshal(map[string]string{customInput: it.Input})
				args = string(b)
			}
			a := assistant()
			a.ToolCalls = append(a.ToolCalls, chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.FunctionCall{Name: it.Name, Arguments: args}})
		case "function_call_output", "custom_tool_call_output":
			flush()
			text, err := responsesText(field+".output", it.Output)
			if err != nil {
				return nil, err
			}
			if it.CallID == "" {
				return nil, badRequest(field+".call_id", "%s.call_id: missing", field)
			}
			msgs = append(msgs, chat.Message{Role: "tool", Content: chat.TextContent(text), ToolCallID: it.CallID})
		default:
			return nil, badRequest(field+".type", "%s.type: %q items are not supported by this server (message, reasoning, function_call, function_call_output, custom_tool_call and custom_tool_call_output are)", field, it.Type)
		}
	}
	flush()
	return msgs, nil
}

// hostedTools run on OpenAI's servers: the model here cannot call them,
// so they are left out of the prompt (and named in the log line).
var hostedTools = []string{"web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation", "computer_use_preview", "mcp"}

// responsesTools maps the tools; namespace tools are flattened into their
// functions.
func responsesTools(rt *responsesTurn, tools []json.RawMessage, field string) error {
	for i, raw := range tools {
		f := fmt.Sprintf("%s[%d]", field, i)
		var t struct {
			Type        string            `json:"type"`
			Name        string            `json:"name"`
			Description string            `json:"description"`
			Parameters  json.RawMessage   `json:"parameters"`
			Tools       []json.RawMessage `json:"tools"`
			Format      *struct {
				Type       string `json:"type"`
				Syntax     string `json:"syntax"`
				Definition string `json:"definition"`
			} `json:"format"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return jsonError(f, err)
		}
		switch {
		case t.Type == "function":
			params := t.Parameters
			if isNull(params) {
				params = nil
			}
			rt.turn.Tools = append(rt.turn.Tools, turn.Tool{Name: t.Name, Description: t.Description, Parameters: params})
		case t.Type == "custom":
			desc := t.Description
			if t.Format != nil && t.Format.Type == "grammar" {
				desc += fmt.Sprintf("\n\nThe input is raw text (not JSON) in this %s grammar:\n%s", t.Format.Syntax, t.Format.Definition)
			}
			rt.turn.Tools = append(rt.turn.Tools, turn.Tool{Name: t.Name, Description: desc,
				Parameters: json.RawMessage(`{"type": "object", "properties": {"` + customInput + `": {"type": "string", "description": "the tool's raw input"}}, "required": ["` + customInput + `"]}`)})
			rt.custom = append(rt.custom, t.Name)
		case t.Type == "namespace":
			if err := responsesTools(rt, t.Tools, f+".tools"); err != nil {
				return err
			}
		case slices.Contains(hostedTools, t.Type):
			rt.ignored = append(rt.ignored, f+":"+t.Type)
		default:
			return badRequest(f+".type", "%s.type: %q tools are not supported by this server (function, custom and namespace are)", f, t.Type)
		}
	}
	for i, t := range rt.turn.Tools {
		if !turn.ToolNamePattern.MatchString(t.Name) {
			return badRequest(field, "tool %d (%q): a name must be 1 to 64 letters, digits, '_', '-', '.' or ':'", i, t.Name)
		}
	}
	return nil
}

func (s *Server) responsesTurn(q *responsesRequest) (*responsesTurn, error) {
	if q.Background {
		return nil, badRequest("background", "background responses are not supported by this server")
	}
	if len(q.Conversation) > 0 && !isNull(q.Conversation) {
		return nil, badRequest("conversation", "conversations are not supported by this server: send previous_response_id or the whole input")
	}
	t := &turn.Request{ParallelToolCalls: true, Sampling: turn.Sampling{Temperature: q.Temperature, TopP: q.TopP}}
	rt := &responsesTurn{turn: t}
	if q.ParallelToolCalls != nil {
		t.ParallelToolCalls = *q.ParallelToolCalls
	}
	if q.MaxOutputTokens != nil {
		if *q.MaxOutputTokens < 1 {
			return nil, badRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *q.MaxOutputTokens)
		}
		t.MaxTokens = *q.MaxOutputTokens
	}
	if q.PreviousResponseID != "" {
		prev, ok := s.stored.get(q.PreviousResponseID)
		if !ok {
			return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found",
				Message: fmt.Sprintf("Previous response with id '%s' not found (this server keeps stored responses in memory, the most recent %d for %v).", q.PreviousResponseID, s.stored.size, s.stored.ttl)}
		}
		rt.history = append(rt.history, prev.conversation...)
	}
	in := bytes.TrimSpace(q.Input)
	switch {
	case len(in) == 0 || isNull(in):
		return nil, badRequest("input", "input: missing")
	case in[0] == '"':
		var text string
		if err := json.Unmarshal(in, &text); err != nil {
			return nil, jsonError("input", err)
		}
		rt.history = append(rt.history, chat.Message{Role: "user", Content: chat.TextContent(text)})
	default:
		var items []json.RawMessage
		if err := json.Unmarshal(in, &items); err != nil {
			return nil, badRequest("input", "input must be a string or a list of items")
		}
		msgs, err := responsesItems(items)
		if err != nil {
			return nil, err
		}
		rt.history = append(rt.history, msgs...)
	}
	if q.Instructions != nil && *q.Instructions != "" {
		t.Messages = append(t.Messages, chat.Message{Role: "system", Content: chat.TextContent(*q.Instructions)})
	}
	t.Messages = append(t.Messages, rt.history...)
	t.Messages = mergeLeadingSystem(t.Messages)
	if err := responsesTools(rt, q.Tools, "tools"); err != nil {
		return nil, err
	}
	if err := responsesToolChoice(t, q.ToolChoice); err != nil {
		return nil, err
	}
	if q.Text != nil && q.Text.Format != nil {
		switch f := q.Text.Format; f.Type {
		case "", "text":
		case "json_object":
			t.Format = &turn.Format{Kind: turn.FormatJSONObject}
		case "json_schema":
			if len(f.Schema) == 0 || isNull(f.Schema) {
				return nil, badRequest("text.format.schema", "text.format.schema: missing")
			}
			t.Format = &turn.Format{Kind: turn.FormatJSONSchema, Schema: f.Schema, Field: "text.format.schema"}
		default:
			return nil, badRequest("text.format.type", "text.format.type must be text, json_object or json_schema, got %q", f.Type)
		}
	}
	if q.Reasoning != nil && q.Reasoning.Effort != nil {
		switch e := *q.Reasoning.Effort; e {
		case "none", "minimal":
			off := false
			t.Reasoning = &off
		case "low", "medium", "high", "xhigh":
			on := true
			t.Reasoning = &on
		default:
			return nil, badRequest("reasoning.effort", "reasoning.effort must be none, minimal, low, medium, high or xhigh, got %q", e)
		}
	}
	return rt, nil
}

// mergeLeadingSystem joins the system messages the conversation starts
// with (instructions, then Codex's developer messages) into one: the
// Qwen templates take one system turn at the head.
func mergeLeadingSystem(msgs []chat.Message) []chat.Message {
	n := 0
	for n < len(msgs) && msgs[n].Role == "system" {
		n++
	}
	if n < 2 {
		return msgs
	}
	texts := make([]string, n)
	for i := range n {
		texts[i] = msgs[i].Content.String()
	}
	out := []chat.Message{{Role: "system", Content: chat.TextContent(strings.Join(texts, "\n\n"))}}
	return append(out, msgs[n:]...)
}

func responsesToolChoice(t *turn.Request, raw json.RawMessage) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
		case "none":
			t.ToolChoice.Mode = turn.ToolNone
		case "required":
			t.ToolChoice.Mode = turn.ToolRequired
		default:
			return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or a named tool, got %q", s)
		}
		return nil
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || (named.Type != "function" && named.Type != "custom") || named.Name == "" {
		return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}")
	}
	t.ToolChoice = turn.ToolChoice{Mode: turn.ToolNamed, Name: named.Name}
	return nil
}

// The response object, as far as this server fills it.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incompleteReason `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []map[string]any  `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          map[string]any    `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               map[string]any    `json:"text"`
	ToolChoice         any               `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	Truncation         string            `json:"truncation"`
	Metadata           map[string]string `json:"metadata"`
	Usage              *responsesUsage   `json:"usage"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteReason struct {
	Reason string `json:"reason"`
}

type responsesUsage struct {
	InputTokens        int            `json:"input_tokens"`
	InputTokensDetails map[string]int `json:"input_tokens_details"`
	OutputTokens       int            `json:"output_tokens"`
	OutputDetails      map[string]int `json:"output_tokens_details"`
	TotalTokens        int            `json:"total_tokens"`
}

func responsesUsageOf(u turn.Usage) *responsesUsage {
	return &responsesUsage{InputTokens: u.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": u.CachedTokens},
		OutputTokens: u.OutputTokens, OutputDetails: map[string]int{"reasoning_tokens": u.ReasoningTokens},
		TotalTokens: u.PromptTokens + u.OutputTokens}
}

// newResponseObject is the response object of q before its output.
func (s *Server) newResponseObject(id string, q *responsesRequest, created time.Time) *responseObject {
	o := &responseObject{ID: id, Object: "response", CreatedAt: created.Unix(), Status: "in_progress", Instructions: q.Instructions,
		MaxOutputTokens: q.MaxOutputTokens, Model: q.Model, Output: []map[string]any{}, ParallelToolCalls: q.ParallelToolCalls == nil || *q.ParallelToolCalls,
		Store: q.Store == nil || *q.Store, Temperature: q.Temperature, TopP: q.TopP, Truncation: "disabled",
		Text: map[string]any{"format": map[string]any{"type": "text"}}, ToolChoice: "auto", Tools: q.Tools, Metadata: q.Metadata,
		Reasoning: map[string]any{"effort": nil, "summary": nil}}
	if o.Tools == nil {
		o.Tools = []json.RawMessage{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if q.PreviousResponseID != "" {
		o.PreviousResponseID = &q.PreviousResponseID
	}
	if len(q.ToolChoice) > 0 && !isNull(q.ToolChoice) {
		o.ToolChoice = q.ToolChoice
	}
	if q.Text != nil && q.Text.Format != nil {
		o.Text = map[string]any{"format": q.Text.Format}
	}
	if q.Reasoning != nil {
		o.Reasoning["effort"] = q.Reasoning.Effort
	}
	return o
}

// finishResponse sets the status, usage and output of o.
func finishResponse(o *responseObject, res turn.Result, output []map[string]any) {
	o.Output = output
	o.Usage = responsesUsageOf(res.Usage)
	o.Status = "completed"
	if res.Finish == turn.FinishLength {
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteReason{Reason: "max_output_tokens"}
	}
}

// outputItems builds the output items of an answer: reasoning, the
// message, the calls (a call cut by the token limit is dropped).
type outputItems struct {
	includeReasoning bool // include has reasoning.encrypted_content
	custom           []string
}

func (o outputItems) reasoning(id, text string) map[string]any {
	item := map[string]any{"type": "reasoning", "id": id, "summary": []any{},
		"content": []any{map[string]any{"type": "reasoning_text", "text": text}}}
	if o.includeReasoning {
		// Not encrypted: it is the reasoning itself, read back as it is.
		item["encrypted_content"] = text
	}
	return item
}

func messageItem(id, text, status string) map[string]any {
	return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant",
		"content": []any{outputText(text)}}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// callItem is a function_call, or a custom_tool_call for a freeform tool
// (its input is the string the model wrote as the one parameter).
func (o outputItems) callItem(id string, tc chat.ToolCall, status string) map[string]any {
	if slices.Contains(o.custom, tc.Function.Name) {
		var args map[string]any
		_ = json.Unmarshal([]byte(tc.Function.Arguments), &args)
		input, _ := args[customInput].(string)
		return map[string]any{"type": "custom_tool_call", "id": id, "status": status, "call_id": tc.ID, "name": tc.Function.Name, "input": input}
	}
	return map[string]any{"type": "function_call", "id": id, "status": status, "call_id": tc.ID, "name": tc.Function.Name, "arguments": tc.Function.Arguments}
}

func (o outputItems) of(msg chat.Message) []map[string]any {
	out := []map[string]any{}
	if msg.ReasoningContent != nil {
		out = append(out, o.reasoning("rs_"+randomHex(12), *msg.ReasoningContent))
	}
	if msg.Content.Text != "" {
		out = append(out, messageItem("msg_"+randomHex(12), msg.Content.Text, "completed"))
	}
	for _, tc := range msg.ToolCalls {
		if _, ok := toolInput(tc.Function.Arguments); ok {
			out = append(out, o.callItem("fc_"+randomHex(12), tc, "completed"))
		}
	}
	return out
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(r.Context())
	body, ok := s.beginTurn(w, r, rec)
	if !ok {
		return
	}
	rec.promptParam = "input"
	var q responsesRequest
	if err := decodeJSONBody(body, &q); err != nil {
		writeError(w, r, err)
		return
	}
	rec.model, rec.stream, rec.ignored = q.Model, q.Stream, ignoredFields(body, responsesKnown)
	if !s.checkModel(w, r, q.Model) {
		return
	}
	rt, err := s.responsesTurn(&q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rec.ignored = append(rec.ignored, rt.ignored...)
	rt.turn.LateSystemAsUser = true
	plan, err := s.plan(rt.turn)
	if err != nil {
		writeError(w, r, err)
		return
	}
	rec.promptTokens = len(plan.Prompt)
	ctx, cancel := s.requestContext(r)
	defer cancel()
	r = r.WithContext(ctx)
	id := "resp_" + randomHex(16)
	obj := s.newResponseObject(id, &q, rec.start)
	items := outputItems{includeReasoning: slices.Contains(q.Include, "reasoning.encrypted_content"), custom: rt.custom}
	store := func(msg chat.Message) {
		if obj.Store {
			conv := append(append([]chat.Message(nil), rt.history...), msg)
			s.stored.put(&storedResponse{id: id, conversation: conv, object: obj, sessionKey: rec.sessionKey})
		}
	}
	if q.Stream {
		s.streamResponse(w, r, obj, plan, items, store)
		return
	}
	msg, res, err := s.runTurn(ctx, rec, plan)
	if err != nil {
		writeError(w, r, err)
		return
	}
	finishResponse(obj, res, items.of(msg))
	store(msg)
	writeJSON(w, http.StatusOK, obj)
}

// streamResponse streams the answer as the Responses API's events, each
// with its sequence_number: response.created, response.in_progress, per
// output item output_item.added, its parts and deltas, output_item.done,
// then response.completed or response.incomplete.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, obj *responseObject, plan *genPlan,
	items outputItems, store func(chat.Message)) {
	seq := 0
	ev := func(name string, data map[string]any) namedEvent {
		data["type"] = name
		data["sequence_number"] = seq
		seq++
		return namedEvent{name: name, data: data}
	}
	var deltas []chat.Delta
	var output []map[string]any
	kind := "" // the open item: reasoning, message, call
	var itemID string
	var text strings.Builder
	var call chat.ToolCall
	callIndex := -1
	closeItem := func() []any {
		if kind == "" {
			return nil
		}
		idx := len(output)
		var out []any
		var item map[string]any
		switch kind {
		case "reasoning":
			item = items.reasoning(itemID, text.String())
			out = append(out, ev("response.reasoning_text.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "text": text.String()}))
		case "message":
			item = messageItem(itemID, text.String(), "completed")
			out = append(out,
				ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "text": text.String(), "logprobs": []any{}}),
				ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "part": outputText(text.String())}))
		case "call":
			status := "completed"
			if _, ok := toolInput(call.Function.Arguments); !ok {
				status = "incomplete"
			}
			item = items.callItem(itemID, call, status)
			if item["type"] == "custom_tool_call" {
				out = append(out, ev("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": idx, "input": item["input"]}))
			} else {
				out = append(out, ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": idx,
					"name": call.Function.Name, "arguments": call.Function.Arguments}))
			}
		}
		output = append(output, item)
		kind = ""
		text.Reset()
		return append(out, ev("response.output_item.done", map[string]any{"output_index": idx, "item": item}))
	}
	open := func(k, id string, item map[string]any) []any {
		out := closeItem()
		kind, itemID = k, id
		return append(out, ev("response.output_item.added", map[string]any{"output_index": len(output), "item": item}))
	}
	s.stream(w, r, plan, streamFormat{
		noDone: true,
		first: func() any {
			return []any{ev("response.created", map[string]any{"response": obj}), ev("response.in_progress", map[string]any{"response": obj})}
		},
		delta: func(d chat.Delta) any {
			deltas = append(deltas, d)
			var out []any
			idx := len(output)
			switch {
			case d.Reasoning != "":
				if kind != "reasoning" {
					id := "rs_" + randomHex(12)
					out = open("reasoning", id, map[string]any{"type": "reasoning", "id": id, "summary": []any{}})
					idx = len(output)
				}
				text.WriteString(d.Reasoning)
				return append(out, ev("response.reasoning_text.delta", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "delta": d.Reasoning}))
			case d.ToolCall != nil:
				tc := d.ToolCall
				if tc.ID != "" || tc.Index != callIndex {
					callIndex = tc.Index
					id := "fc_" + randomHex(12)
					call = chat.ToolCall{ID: tc.ID, Type: "function", Function: chat.FunctionCall{Name: tc.Name}}
					out = open("call", id, items.callItem(id, call, "in_progress"))
					idx = len(output)
				}
				call.Function.Arguments += tc.Arguments
				if tc.Arguments != "" && !slices.Contains(items.custom, call.Function.Name) {
					out = append(out, ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": idx, "delta": tc.Arguments}))
				}
				return out
			}
			if kind != "message" {
				id := "msg_" + randomHex(12)
				out = open("message", id, map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}})
				idx = len(output)
				out = append(out, ev("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": outputText("")}))
			}
			text.WriteString(d.Content)
			return append(out, ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "delta": d.Content, "logprobs": []any{}}))
		},
		end: func(res turn.Result) (string, []any) {
			msg := chat.Assemble(deltas)
			last := closeItem()
			finishResponse(obj, res, output)
			store(msg)
			name := "response.completed"
			if obj.Status == "incomplete" {
				name = "response.incomplete"
			}
			return string(res.Finish), append(last, ev(name, map[string]any{"response": obj}))
		},
		fail: func(ae *apiError) []any {
			obj.Status = "failed"
			code := ae.Code
			if code == "" {
				code = "server_error"
			}
			obj.Error = &responseError{Code: code, Message: ae.Message}
			var param any
			if ae.Param != "" {
				param = ae.Param
			}
			return []any{
				ev("error", map[string]any{"code": code, "message": ae.Message, "param": param}),
				ev("response.failed", map[string]any{"response": obj}),
			}
		},
	})
}

func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	stored, ok := s.stored.get(id)
	if !ok {
		writeError(w, r, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "id", Code: "not_found",
			Message: fmt.Sprintf("No response with id '%s' is stored here (kept in memory: the most recent %d, for %v).", id, s.stored.size, s.stored.ttl)})
		return
	}
	writeJSON(w, http.StatusOK, stored.object)
}

func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if !s.stored.delete(id) {
		writeError(w, r, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "id", Code: "not_found",
			Message: fmt.Sprintf("No response with id '%s' is stored here.", id)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}
