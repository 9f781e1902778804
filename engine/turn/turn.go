// Package turn is one assistant turn, whatever wire format asked for it:
// the request every API adapter maps its JSON to (messages with typed
// parts, tools, tool choice, an output format, sampling, limits, stop
// strings, the reasoning switch), the pipeline that runs it, and the
// result every adapter maps back (reasoning, content and tool-call
// deltas, a finish reason, usage with the prompt tokens served from the
// prefix cache).
//
// A Pipeline is built once per model from the tokenizer, the chat
// template and a Source (engine.Scheduler.Submit). Pipeline.Plan
// validates a Request (Request.Validate: one validation of the sampling
// settings, stop strings, messages, tools and tool choice for every API),
// renders it with the template, tokenizes it keeping control-token text
// inside messages as text (special.go), finds where the prefix cache
// publishes it (boundary.go), and builds the output's constraints: a
// format's grammar, the tool calls' grammar in the template's own markup
// (constrain.go, schemarelax.go, markup.go), the markup a forced call
// begins with. Pipeline.Run runs the plan on the engine (run.go): a forced
// call or a format after free reasoning, a reasoning budget, the text
// stage (text.go: whole UTF-8 from token bytes, stop strings, the
// reasoning/content/tool-call split, dropping a call cut by the token
// limit), and says how the turn ended. A behaviour fixed here is fixed
// for the OpenAI chat and completions, OpenAI Responses and Anthropic
// Messages adapters at once.
//
// It is one package beside engine/chat (templates and the output parser)
// rather than several: the request, the plan and the run share the
// template's markup and the validated settings, and an adapter needs only
// this package's names.
//
// What it is not for: HTTP and JSON wire shapes, errors' bodies, auth,
// limits, SSE, logs and metrics (web/ has those; a FieldError names the
// field at fault and web answers it as a 400 in each API's shape).
package turn

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
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
	// TemplateKwargs are more template variables (chat's
	// chat_template_kwargs); Reasoning, when set, overrides their
	// enable_thinking.
	TemplateKwargs map[string]any
	// NoGenerationPrompt leaves the assistant turn's opening out of the
	// prompt (chat's add_generation_prompt false).
	NoGenerationPrompt bool
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
	// CallIDPrefix starts the ids of the answer's tool calls ("toolu_",
	// "call_"); "" is "call_".
	CallIDPrefix string
	// LateSystemAsUser lets a template that refuses a system message past
	// the start of the conversation (Qwen3.5's "System message must be at
	// the beginning") get such messages as user messages, their text in
	// <system-reminder> tags (the form Claude Code gives its own
	// reminders in): Claude Code sends mid-conversation system messages,
	// Codex developer messages after the first user turn.
	LateSystemAsUser bool
	// Prompt, when set, is a completion's prompt, given as is: Messages,
	// Tools and the template are not used.
	Prompt *Prompt

	checked *checked // what Validate found, for Plan
}

// Prompt is a prompt without a template: text (its control-token text
// becomes control tokens) or token ids.
type Prompt struct {
	Text   string
	Tokens []int32 // when set, Text is not used
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, kept as sent (the
	// template writes it with its keys in the client's order); nil: any
	// object.
	Parameters json.RawMessage
	// Chat, when set, is the tool in OpenAI's chat form as the client sent
	// it (ParseChatTool), which the template is given verbatim.
	Chat json.RawMessage
}

// ChatJSON is the tool in OpenAI's chat form, which the chat templates read.
func (t Tool) ChatJSON() json.RawMessage {
	if len(t.Chat) > 0 {
		return t.Chat
	}
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
	FormatGBNF                             // the language of the grammar GBNF (llama.cpp's "grammar")
)

// Format is an output constraint.
type Format struct {
	Kind   FormatKind
	Schema json.RawMessage
	GBNF   string
	// Field names where the client gave the format, for errors about it.
	Field string
}

// Sampling is what a client asked of the sampler; nil fields were not sent.
type Sampling struct {
	Temperature *float64
	TopP        *float64
	TopK        *int
	Seed        *int64
	// Penalties shape the logits by what the answer holds (OpenAI chat's
	// presence, frequency and logit_bias, llama.cpp's repetition penalty),
	// checked by the adapter that reads them; the logit bias's token ids
	// are checked against the vocabulary by Plan.
	Penalties sample.Penalties
	// Logprobs asks for each output token's log-probability (Plan.OnToken
	// gets them), with TopLogprobs alternatives.
	Logprobs    bool
	TopLogprobs int
}

// FieldError is a request value out of range, naming the field as the
// client sent it.
type FieldError struct {
	Field   string
	Message string
	// Code is a machine-readable code ("context_length_exceeded"); "" for
	// none.
	Code string
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
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
			return p, false, fieldErr("temperature", "temperature must be in [0, 2], got %v", t)
		}
		p.Temperature = float32(t)
	}
	if s.TopP != nil {
		tp := *s.TopP
		if math.IsNaN(tp) || tp <= 0 || tp > 1 {
			return p, false, fieldErr("top_p", "top_p must be in (0, 1], got %v", tp)
		}
		p.TopP = float32(tp)
	}
	if s.TopK != nil {
		switch k := *s.TopK; {
		case k == -1:
		case k < 0:
			return p, false, fieldErr("top_k", "top_k must be -1 (no limit) or >= 0, got %d", k)
		default:
			p.TopK = k
		}
	}
	if s.Seed != nil {
		p.Seed, seeded = uint64(*s.Seed), true
	}
	if err := p.Validate(); err != nil {
		return p, seeded, &FieldError{Message: err.Error()}
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
	// Engine is what the engine did, for the log line and the metrics.
	Engine EngineStats
}

// EngineStats are a run's timings and speculative decoding figures.
type EngineStats struct {
	// FirstToken and LastToken are when the first and the last of
	// TimedTokens output tokens arrived.
	FirstToken, LastToken time.Time
	TimedTokens           int
	// Draft names the speculative decoding used; Spec counts the target
	// model's forward passes while decoding and the drafting's figures.
	Draft string
	Spec  speculative.Stats
}

// TPOT is the mean time per output token after the first.
func (e EngineStats) TPOT() time.Duration {
	if e.TimedTokens < 2 {
		return 0
	}
	return e.LastToken.Sub(e.FirstToken) / time.Duration(e.TimedTokens-1)
}

// Add adds a later run's figures (another choice of the same prompt).
func (e *EngineStats) Add(o EngineStats) {
	e.Spec.Add(o.Spec)
	if o.TimedTokens > 0 {
		if e.TimedTokens == 0 {
			e.FirstToken = o.FirstToken
		}
		e.LastToken = o.LastToken
		e.TimedTokens += o.TimedTokens
	}
	if o.Draft != "" {
		e.Draft = o.Draft
	}
}
