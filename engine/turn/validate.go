package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// MaxStopStrings bounds Request.Stop: every output token is matched
// against each.
const MaxStopStrings = 16

// checked is what Validate found: the sampler's parameters, the tools
// for the call grammars, the compiled format.
type checked struct {
	sample    sample.Params
	seeded    bool
	tools     []toolDef
	chatTools []json.RawMessage
	grammar   *grammar.Grammar
}

// Validate checks the request as every API's is checked: the sampling
// settings, the stop strings, the messages (their roles and order, as the
// template will render them), the tools and the tool choice, and compiles
// the output format. Its errors are FieldErrors naming the field. Plan
// validates a request it was not given validated; an adapter calls it
// first to refuse a bad request before anything else is done. What it
// finds is kept in the request for Plan: a request is complete when it is
// validated, and not changed after.
func (r *Request) Validate() error {
	if r.checked != nil {
		return nil
	}
	var c checked
	var err error
	if c.sample, c.seeded, err = r.Sampling.Params(); err != nil {
		return err
	}
	if r.MaxTokens < 0 {
		return fieldErr("max_tokens", "max_tokens must be at least 1, got %d", r.MaxTokens)
	}
	if len(r.Stop) > MaxStopStrings {
		return fieldErr("stop", "at most %d stop strings are accepted, got %d", MaxStopStrings, len(r.Stop))
	}
	for i, st := range r.Stop {
		if st == "" {
			return fieldErr("stop", "stop[%d] is empty", i)
		}
	}
	if f := r.Format; f != nil {
		switch f.Kind {
		case FormatJSONObject:
			c.grammar = grammar.JSONObject()
		case FormatJSONSchema:
			if c.grammar, err = SchemaGrammar(f.Field, f.Schema); err != nil {
				return err
			}
		case FormatGBNF:
			if c.grammar, err = grammar.ParseGBNF(f.GBNF); err != nil {
				return grammarError(f.Field, err)
			}
		default:
			return fieldErr(f.Field, "%s: unknown format", f.Field)
		}
	}
	if r.Prompt == nil {
		if err := r.checkConversation(&c); err != nil {
			return err
		}
	}
	r.checked = &c
	return nil
}

// checkConversation checks the messages, the tools and the tool choice.
func (r *Request) checkConversation(c *checked) error {
	for i, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == "" {
			return fieldErr(fmt.Sprintf("messages[%d].tool_call_id", i),
				"messages[%d].tool_call_id: missing (a tool message must name the tool call it answers)", i)
		}
	}
	var names []string
	for i, t := range r.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if !ToolNamePattern.MatchString(t.Name) {
			return fieldErr(param+".function.name", "%s.function.name must be 1 to 64 letters, digits, '_', '-', '.' or ':'", param)
		}
		if slices.Contains(names, t.Name) {
			return fieldErr(param+".function.name", "%s.function.name: %q is defined twice", param, t.Name)
		}
		names = append(names, t.Name)
		def := toolDef{name: t.Name, params: json.RawMessage(`{"type": "object"}`)}
		if raw := t.Parameters; len(raw) > 0 && !isNull(raw) {
			if err := validateSchema(raw); err != nil {
				return fieldErr(param+".function.parameters", "%s.function.parameters: %v", param, err)
			}
			if string(bytes.TrimSpace(raw)) != "{}" {
				def.params = raw
			}
		}
		c.tools = append(c.tools, def)
		c.chatTools = append(c.chatTools, t.ChatJSON())
	}
	req := r.chatRequest(r.Messages, c.chatTools)
	if err := chat.Validate(req); err != nil {
		return &FieldError{Field: paramOf(err.Error()), Message: err.Error()}
	}
	if err := CheckTurnOrder(req); err != nil {
		return err
	}
	switch r.ToolChoice.Mode {
	case ToolRequired:
		if len(r.Tools) == 0 {
			return fieldErr("tool_choice", "tool_choice asks for a tool call, but the request has no tools")
		}
	case ToolNamed:
		if !slices.Contains(names, r.ToolChoice.Name) {
			return fieldErr("tool_choice", "tool_choice names tool %q, which is not among the request's tools", r.ToolChoice.Name)
		}
	}
	return nil
}

// chatRequest is the template's request for msgs.
func (r *Request) chatRequest(msgs []chat.Message, tools []json.RawMessage) chat.Request {
	req := chat.Request{Messages: msgs, Tools: tools, AddGenerationPrompt: !r.NoGenerationPrompt, Kwargs: r.TemplateKwargs}
	if r.Reasoning != nil {
		req.Kwargs = make(map[string]any, len(r.TemplateKwargs)+1)
		for k, v := range r.TemplateKwargs {
			req.Kwargs[k] = v
		}
		req.Kwargs["enable_thinking"] = *r.Reasoning
	}
	return req
}

// ParseChatTool reads tools[i] of an OpenAI chat request: {"type":
// "function", "function": {"name", "description", "parameters"}}. The
// tool keeps its JSON, which the template is given as sent; Validate
// checks the name and the schema.
func ParseChatTool(i int, raw json.RawMessage) (Tool, error) {
	param := fmt.Sprintf("tools[%d]", i)
	var tool struct {
		Type     string                     `json:"type"`
		Function map[string]json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(raw, &tool); err != nil {
		return Tool{}, fieldErr(param, "%s must be an object with \"type\" and \"function\"", param)
	}
	if tool.Type != "function" {
		return Tool{}, fieldErr(param+".type", "%s.type must be \"function\", got %q", param, tool.Type)
	}
	if tool.Function == nil {
		return Tool{}, fieldErr(param+".function", "%s.function: missing", param)
	}
	t := Tool{Chat: raw}
	if err := json.Unmarshal(tool.Function["name"], &t.Name); err != nil || t.Name == "" {
		return Tool{}, fieldErr(param+".function.name", "%s.function.name must be 1 to 64 letters, digits, '_', '-', '.' or ':'", param)
	}
	if raw, ok := tool.Function["description"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &t.Description) != nil {
			return Tool{}, fieldErr(param+".function.description", "%s.function.description must be a string", param)
		}
	}
	if raw, ok := tool.Function["parameters"]; ok && !isNull(raw) {
		t.Parameters = raw
	}
	return t, nil
}

// validateSchema checks the parts of a JSON Schema that the prompt and the
// tool-call parser rely on: an object schema whose properties are schemas.
func validateSchema(raw json.RawMessage) error {
	var s struct {
		Type       json.RawMessage            `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if !isObject(raw) {
		return errors.New("must be a JSON Schema object")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("not a valid JSON Schema object: %v", err)
	}
	if len(s.Type) > 0 {
		var t string
		if json.Unmarshal(s.Type, &t) != nil || t != "object" {
			return fmt.Errorf("type must be \"object\", got %s", s.Type)
		}
	}
	for name, prop := range s.Properties {
		if !isObject(prop) {
			return fmt.Errorf("properties.%s must be a schema object", name)
		}
	}
	return nil
}

// paramOf is the field an engine/chat validation message names
// ("messages[2].role: ...").
func paramOf(msg string) string {
	if i := strings.Index(msg, ":"); i > 0 && !strings.Contains(msg[:i], " ") {
		return msg[:i]
	}
	return ""
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func isObject(raw json.RawMessage) bool { return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) }
