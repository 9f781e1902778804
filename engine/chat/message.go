package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Request is what a chat template is rendered from: the fields of an OpenAI
// chat completion request that reach the prompt.
type Request struct {
	Messages []Message `json:"messages"`
	// Tools are the request's tool definitions, each kept as the raw JSON the
	// client sent so that the template sees its keys in the client's order.
	Tools []json.RawMessage `json:"tools,omitempty"`
	// AddGenerationPrompt ends the prompt with the opening of an assistant
	// turn. Decoding JSON sets it true unless the body says otherwise, as
	// OpenAI-compatible servers do.
	AddGenerationPrompt bool `json:"add_generation_prompt"`
	// Kwargs are extra template variables (OpenAI-compatible servers call
	// them chat_template_kwargs), e.g. {"enable_thinking": false}. A value
	// may be a json.RawMessage (decoded keeping key order) or any value that
	// encoding/json can marshal.
	Kwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	// Now is the time strftime_now reports; the zero value means time.Now().
	Now time.Time `json:"-"`
}

// UnmarshalJSON reads the request fields of an OpenAI chat completion body
// (other fields are ignored), keeping each chat_template_kwargs value as raw
// JSON so that its objects keep their key order and its numbers their type.
func (r *Request) UnmarshalJSON(data []byte) error {
	var raw struct {
		Messages            []Message                  `json:"messages"`
		Tools               []json.RawMessage          `json:"tools"`
		AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
		Kwargs              map[string]json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*r = Request{Messages: raw.Messages, Tools: raw.Tools, AddGenerationPrompt: true}
	if raw.AddGenerationPrompt != nil {
		r.AddGenerationPrompt = *raw.AddGenerationPrompt
	}
	if raw.Kwargs != nil {
		r.Kwargs = make(map[string]any, len(raw.Kwargs))
		for k, v := range raw.Kwargs {
			r.Kwargs[k] = v
		}
	}
	return nil
}

// Message is one chat message as an OpenAI client sends it.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
	// ReasoningContent is the assistant's reasoning (the text inside
	// <think>...</think> for Qwen models); nil when the client sent none.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a "tool" message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolCall is one function call made by the assistant.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as a JSON text,
// as the OpenAI API does.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON accepts arguments as a JSON string (the OpenAI form) and,
// leniently, as a JSON object, which is kept as its raw text.
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	f.Name = raw.Name
	f.Arguments = ""
	a := bytes.TrimSpace(raw.Arguments)
	switch {
	case len(a) == 0 || string(a) == "null":
	case a[0] == '"':
		if err := json.Unmarshal(a, &f.Arguments); err != nil {
			return fmt.Errorf("arguments: %w", err)
		}
	default:
		f.Arguments = string(a)
	}
	return nil
}

// Content is a message's content: a string, null (or absent), or an array of
// typed parts of which only "text" parts are understood here.
type Content struct {
	Text  string        // the string form
	Parts []ContentPart // the array form; Text is then unused
	Null  bool          // sent as null or not sent
}

// ContentPart is one element of an array-form content.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// TextContent is a plain string content.
func TextContent(s string) Content { return Content{Text: s} }

// String is the text a template sees: the string, "" for null, or the text
// parts joined with "\n" (as vLLM and llama.cpp's server join them for
// templates that take strings).
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	texts := make([]string, 0, len(c.Parts))
	for _, p := range c.Parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// UnmarshalJSON reads a string, null or an array of parts.
func (c *Content) UnmarshalJSON(data []byte) error {
	*c = Content{}
	d := bytes.TrimSpace(data)
	switch {
	case string(d) == "null":
		c.Null = true
		return nil
	case len(d) > 0 && d[0] == '[':
		c.Parts = []ContentPart{}
		return json.Unmarshal(d, &c.Parts)
	default:
		return json.Unmarshal(d, &c.Text)
	}
}

// MarshalJSON writes the form that was read.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	case c.Null:
		return []byte("null"), nil
	}
	return json.Marshal(c.Text)
}

// Validate reports the first thing in req that a template cannot render
// faithfully, naming the field: an unknown role, a tool call whose arguments
// are not a JSON object, a tool message answering no earlier call, a tool
// definition without a function name, a content part that is not text.
func Validate(req Request) error {
	if len(req.Messages) == 0 {
		return fmt.Errorf("messages: empty")
	}
	callIDs := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return fmt.Errorf("messages[%d].role: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
		for j, p := range m.Content.Parts {
			if p.Type != "text" {
				return fmt.Errorf("messages[%d].content[%d].type: %q is not supported (only \"text\")", i, j, p.Type)
			}
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return fmt.Errorf("messages[%d].tool_calls: only assistant messages carry tool calls, not %q", i, m.Role)
		}
		for j, tc := range m.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				return fmt.Errorf("messages[%d].tool_calls[%d].type: %q (want \"function\")", i, j, tc.Type)
			}
			if tc.Function.Name == "" {
				return fmt.Errorf("messages[%d].tool_calls[%d].function.name: empty", i, j)
			}
			args, err := decodeArguments(tc.Function.Arguments)
			if err != nil {
				return fmt.Errorf("messages[%d].tool_calls[%d].function.arguments: %w", i, j, err)
			}
			if _, ok := args.(*exec.Dict); !ok {
				return fmt.Errorf("messages[%d].tool_calls[%d].function.arguments: not a JSON object", i, j)
			}
			if tc.ID != "" {
				callIDs[tc.ID] = true
			}
		}
		if m.Role == "tool" && m.ToolCallID != "" && !callIDs[m.ToolCallID] {
			return fmt.Errorf("messages[%d].tool_call_id: %q answers no tool call of an earlier assistant message", i, m.ToolCallID)
		}
	}
	for i, t := range req.Tools {
		var tool struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &tool); err != nil {
			return fmt.Errorf("tools[%d]: %w", i, err)
		}
		if tool.Type != "" && tool.Type != "function" {
			return fmt.Errorf("tools[%d].type: %q (want \"function\")", i, tool.Type)
		}
		if tool.Function == nil || tool.Function.Name == "" {
			return fmt.Errorf("tools[%d].function.name: missing", i)
		}
	}
	return nil
}

// decodeArguments decodes a tool call's arguments text into an ordered
// template value; an empty text is an empty object.
func decodeArguments(s string) (any, error) {
	if strings.TrimSpace(s) == "" {
		return decodeJSON([]byte("{}"))
	}
	return decodeJSON([]byte(s))
}
