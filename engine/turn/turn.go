// Package turn is one assistant turn, whatever wire format asked for it:
// the request every API adapter maps its JSON to (messages with typed
// parts, tools, tool choice, an output format, sampling, limits, stop
// strings, the reasoning switch) and the result every adapter maps back
// (reasoning, content and tool-call deltas, a finish reason, usage with
// the prompt tokens served from the prefix cache).
//
// It sits beside engine/chat (templates and the output parser) rather than
// in web/, so that the OpenAI chat, OpenAI Responses and Anthropic
// Messages adapters share one set of types, one validation of the
// sampling settings, one text stage (text.go: whole UTF-8 from token
// bytes, stop strings, the reasoning/content split, the reasoning gate of
// a forced call, dropping a call cut by the token limit) and one reading
// of the template's tool-call markup (markup.go); a behaviour fixed here
// is fixed for every API.
//
// What it is not for: HTTP and JSON wire shapes (web/ has those). Still in
// web/ for now: building a turn's plan (template rendering, publish
// points, control-token spans, the tool-call and format grammars built
// from ToolMarkup) and running
// it on the engine (web/chat.go chatPlan, web/generate.go), which are
// bound to the server's tokenizer, template and scheduler.
package turn

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// Request is one turn to generate.
type Request struct {
	// Messages are the conversation in the chat template's terms: roles
	// system, user, assistant and tool; an assistant message carries its
	// reasoning and tool calls, a tool message the call it answers.
	Messages []chat.Message
	Tools    []Tool
	// ToolChoice says whether the answer may, must or must not call a tool.
	ToolChoice ToolChoice
	// ParallelToolCalls lets the answer hold several calls.
	ParallelToolCalls bool
	// Format holds the answer to JSON; nil: free text.
	Format *Format
	// Sampling is what the client asked for, validated by Sampling.Params.
	Sampling Sampling
	// MaxTokens bounds the output tokens; 0: until the end of generation or
	// the context is full.
	MaxTokens int
	// Stop are strings that end the answer (cut from it).
	Stop []string
	// Reasoning is the template's reasoning switch (enable_thinking); nil
	// leaves the template's default.
	Reasoning *bool
	// ReasoningBudget bounds the reasoning's tokens: past it the reasoning
	// is closed for the model and the answer follows; 0: no bound but
	// MaxTokens.
	ReasoningBudget int
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, kept as sent (the
	// template writes it with its keys in the client's order); nil: any
	// object.
	Parameters json.RawMessage
}

// ChatJSON is the tool in OpenAI's chat form, which the chat templates read.
func (t Tool) ChatJSON() json.RawMessage {
	name, _ := json.Marshal(t.Name)
	desc, _ := json.Marshal(t.Description)
	params := t.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type": "object", "properties": {}}`)
	}
	out := `{"type": "function", "function": {"name": ` + string(name)
	if t.Description != "" {
		out += `, "description": ` + string(desc)
	}
	return json.RawMessage(out + `, "parameters": ` + string(params) + `}}`)
}

// ToolNamePattern is OpenAI's rule for function names, widened by '.' and
// ':' which MCP tool names use. Names end up inside the model's tool-call
// markup, so nothing else is let through.
var ToolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// ToolChoiceMode is what a tool choice asks for.
type ToolChoiceMode uint8

const (
	ToolAuto     ToolChoiceMode = iota // the model decides
	ToolNone                           // no call
	ToolRequired                       // at least one call, to any tool
	ToolNamed                          // one call, to ToolChoice.Name
)

// ToolChoice is a tool choice mode and, for ToolNamed, the tool.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// FormatKind is the language a Format holds the answer to.
type FormatKind uint8

const (
	FormatJSONObject FormatKind = iota + 1 // any JSON object
	FormatJSONSchema                       // JSON valid against Schema
)

// Format is an output constraint.
type Format struct {
	Kind   FormatKind
	Schema json.RawMessage
	// Field names where the client gave the format, for errors about it.
	Field string
}

// Sampling is what a client asked of the sampler; nil fields were not sent.
type Sampling struct {
	Temperature *float64
	TopP        *float64
	TopK        *int
	Seed        *int64
}

// FieldError is a request value out of range, naming the field as the
// client sent it.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

// Params validates the settings and returns the sampler's parameters;
// seeded reports whether the client fixed the seed. The temperature
// defaults to 1 (OpenAI's and Anthropic's default); top_k -1 is vLLM's
// and llama.cpp's "no limit". Field names are the wire's: every API here
// calls them temperature, top_p, top_k and seed.
func (s Sampling) Params() (p sample.Params, seeded bool, err error) {
	p.Temperature = 1
	if s.Temperature != nil {
		t := *s.Temperature
		if math.IsNaN(t) || t < 0 || t > 2 {
			return p, false, &FieldError{"temperature", fmt.Sprintf("temperature must be in [0, 2], got %v", t)}
		}
		p.Temperature = float32(t)
	}
	if s.TopP != nil {
		tp := *s.TopP
		if math.IsNaN(tp) || tp <= 0 || tp > 1 {
			return p, false, &FieldError{"top_p", fmt.Sprintf("top_p must be in (0, 1], got %v", tp)}
		}
		p.TopP = float32(tp)
	}
	if s.TopK != nil {
		switch k := *s.TopK; {
		case k == -1:
		case k < 0:
			return p, false, &FieldError{"top_k", fmt.Sprintf("top_k must be -1 (no limit) or >= 0, got %d", k)}
		default:
			p.TopK = k
		}
	}
	if s.Seed != nil {
		p.Seed, seeded = uint64(*s.Seed), true
	}
	if err := p.Validate(); err != nil {
		return p, seeded, &FieldError{"", err.Error()}
	}
	return p, seeded, nil
}

// Delta is one piece of the answer: reasoning, content or a tool call's
// fragment (exactly one is set).
type Delta = chat.Delta

// Finish says why an answer ended.
type Finish string

const (
	FinishStop         Finish = "stop"          // the model ended its turn
	FinishLength       Finish = "length"        // MaxTokens or the context ran out
	FinishToolCalls    Finish = "tool_calls"    // the answer ends with tool calls
	FinishStopSequence Finish = "stop_sequence" // one of Request.Stop matched
)

// Usage counts a turn's tokens.
type Usage struct {
	PromptTokens int
	// CachedTokens are the prompt tokens restored from the prefix cache
	// instead of being prefilled.
	CachedTokens int
	// OutputTokens are the generated tokens, forced markup included.
	OutputTokens int
	// ReasoningTokens are the output tokens of the reasoning (counted by
	// tokenizing the reasoning text).
	ReasoningTokens int
}

// Result is how a turn ended.
type Result struct {
	Finish Finish
	// StopSequence is the stop string that matched, with FinishStopSequence.
	StopSequence string
	Usage        Usage
}
