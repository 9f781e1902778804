package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// The Anthropic Messages and OpenAI Responses adapters map their JSON to a
// turn.Request; turnParams maps that onto the chat pipeline (chatPlan,
// generate), which still lives in this package, and turnResult maps the
// outcome back to a turn.Result.

// turnParams checks t as a chat request is checked and gives the chat
// pipeline's parameters for it.
func (s *Server) turnParams(model string, stream bool, t *turn.Request) (*chatParams, error) {
	smp, seeded, err := t.Sampling.Params()
	if err != nil {
		return nil, fieldError(err)
	}
	if len(t.Stop) > maxStopStrings {
		return nil, badRequest("stop", "at most %d stop strings are accepted, got %d", maxStopStrings, len(t.Stop))
	}
	for i, st := range t.Stop {
		if st == "" {
			return nil, badRequest("stop", "stop[%d] is empty", i)
		}
	}
	p := &chatParams{
		genParams:         genParams{Model: model, Stream: stream, MaxTokens: t.MaxTokens, Sample: smp, SeedGiven: seeded, Stop: t.Stop},
		Chat:              chat.Request{Messages: t.Messages, AddGenerationPrompt: true},
		ParallelToolCalls: t.ParallelToolCalls,
		reasoningBudget:   t.ReasoningBudget,
	}
	if t.Reasoning != nil {
		p.Chat.Kwargs = map[string]any{"enable_thinking": *t.Reasoning}
	}
	if f := t.Format; f != nil {
		switch f.Kind {
		case turn.FormatJSONObject:
			p.Grammar = grammar.JSONObject()
		case turn.FormatJSONSchema:
			if p.Grammar, err = schemaGrammar(f.Field, f.Schema); err != nil {
				return nil, err
			}
		}
	}
	for _, tool := range t.Tools {
		p.Chat.Tools = append(p.Chat.Tools, tool.ChatJSON())
	}
	if err := validateMessages(p.Chat.Messages); err != nil {
		return nil, err
	}
	if p.tools, err = validateTools(p.Chat.Tools); err != nil {
		return nil, err
	}
	if err := chat.Validate(p.Chat); err != nil {
		return nil, badRequest(paramOf(err.Error()), "%v", err)
	}
	if err := turn.CheckTurnOrder(p.Chat); err != nil {
		return nil, fieldError(err)
	}
	switch t.ToolChoice.Mode {
	case turn.ToolNone:
		p.ToolChoice = toolNone
	case turn.ToolRequired:
		if len(t.Tools) == 0 {
			return nil, badRequest("tool_choice", "tool_choice asks for a tool call, but the request has no tools")
		}
		p.ToolChoice = toolRequired
	case turn.ToolNamed:
		found := false
		for _, tool := range t.Tools {
			found = found || tool.Name == t.ToolChoice.Name
		}
		if !found {
			return nil, badRequest("tool_choice", "tool_choice names tool %q, which is not among the request's tools", t.ToolChoice.Name)
		}
		p.ToolChoice, p.ToolName = toolNamed, t.ToolChoice.Name
	}
	return p, nil
}

// planTurn plans p as chatPlan does. A template that refuses a system
// message past the start of the conversation (Qwen3.5's raises "System
// message must be at the beginning") gets such messages as user messages
// instead, their text in <system-reminder> tags (the form Claude Code
// gives its own reminders in): Claude Code sends mid-conversation system
// messages, Codex developer messages after the first user turn.
func (s *Server) planTurn(p *chatParams) (*genPlan, error) {
	plan, err := s.chatPlan(p)
	if err == nil {
		return plan, nil
	}
	msgs, changed := laterSystemAsUser(p.Chat.Messages)
	if !changed {
		return nil, err
	}
	q := *p
	q.Chat.Messages = msgs
	plan, err2 := s.chatPlan(&q)
	if err2 != nil {
		return nil, err
	}
	*p = q
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

// turnResult is how a generation ended, in turn's terms; msg is its
// assembled answer.
func (s *Server) turnResult(out genOutcome, msg chat.Message) turn.Result {
	res := turn.Result{Finish: turn.Finish(finishReason(out.finish, len(msg.ToolCalls) > 0)),
		Usage: turn.Usage{PromptTokens: out.promptTokens, CachedTokens: out.cachedTokens, OutputTokens: out.outputTokens}}
	if out.stopSequence != "" && res.Finish == turn.FinishStop {
		res.Finish, res.StopSequence = turn.FinishStopSequence, out.stopSequence
	}
	if msg.ReasoningContent != nil {
		res.Usage.ReasoningTokens = min(len(s.tok.Encode(*msg.ReasoningContent, false, false)), out.outputTokens)
	}
	return res
}

// runTurn generates the answer to p whole (not streamed).
func (s *Server) runTurn(ctx context.Context, rec *record, plan *genPlan) (chat.Message, turn.Result, error) {
	var deltas []chat.Delta
	out, err := s.generate(ctx, plan, func(ds []chat.Delta) { deltas = append(deltas, ds...) })
	s.recordOutcome(rec, out)
	if err != nil {
		return chat.Message{}, turn.Result{}, err
	}
	msg := chat.Assemble(deltas)
	res := s.turnResult(out, msg)
	rec.finish = string(res.Finish)
	return msg, res, nil
}

// decodeJSONBody reads body into v, naming the field of a type mismatch.
func decodeJSONBody(body []byte, v any) error {
	if _, err := decodeObject(body); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError("", err)
	}
	return nil
}

// knownFields lists the body's fields not in known, sorted: accepted and
// ignored, for the request's log line.
func ignoredFields(body []byte, known []string) []string {
	fields, _ := decodeObject(body)
	var out []string
	for k := range fields {
		found := false
		for _, kk := range known {
			found = found || k == kk
		}
		if !found {
			out = append(out, k)
		}
	}
	return out
}

// beginTurn is beginGeneration for the adapters that decode their body
// into a turn.Request themselves.
func (s *Server) beginTurn(w http.ResponseWriter, r *http.Request, rec *record) ([]byte, bool) {
	rec.generation = true
	rec.promptParam = "messages"
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	s.tagSession(w, r, body)
	return body, true
}

// checkModel answers 404 when model is not one this server serves.
func (s *Server) checkModel(w http.ResponseWriter, r *http.Request, model string) bool {
	if !s.servesModel(model) {
		writeError(w, r, modelNotFound(model))
		return false
	}
	return true
}

// rawJSONObject is v's JSON when it is an object, else an error naming field.
func rawJSONObject(field string, v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 || isNull(v) {
		return json.RawMessage(`{}`), nil
	}
	if !isObject(v) {
		return nil, badRequest(field, "%s must be a JSON object", field)
	}
	return v, nil
}

func fieldAt(prefix string, i int, rest string) string {
	return fmt.Sprintf("%s[%d]%s", prefix, i, rest)
}
