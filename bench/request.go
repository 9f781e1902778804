package bench

import (
	"encoding/json"
	"fmt"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// RequestOptions are the generation settings of every request of a run.
// The defaults of the MLPerf Edge Agentic run are temperature 0, seed 42,
// 1,024 completion tokens, streamed.
type RequestOptions struct {
	Model       string
	Temperature float64
	Seed        int64
	MaxTokens   int // max_completion_tokens
	// IgnoreEOS asks the server to generate MaxTokens tokens whatever it
	// samples (ignore_eos, an extension llama.cpp, vLLM and edgellmd accept):
	// a random-weight model never stops by itself.
	IgnoreEOS bool
	// EnableThinking, when set, is sent as chat_template_kwargs.enable_thinking,
	// so that the server renders the prompt as the client counts it. nil sends
	// nothing (the server's own default applies).
	EnableThinking *bool
	// ToolChoice is sent when not empty ("auto" for BFCL; the agentic replay
	// sends none).
	ToolChoice string
}

// chatBody is a POST /v1/chat/completions body; its field order is the
// order on the wire.
type chatBody struct {
	Model               string            `json:"model,omitempty"`
	Messages            []chat.Message    `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	ToolChoice          string            `json:"tool_choice,omitempty"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options,omitempty"`
	Temperature         float64           `json:"temperature"`
	Seed                int64             `json:"seed"`
	MaxCompletionTokens int               `json:"max_completion_tokens,omitempty"`
	IgnoreEOS           bool              `json:"ignore_eos,omitempty"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatBody is the streamed chat completion request for messages and tools:
// stream with usage (stream_options.include_usage, so that the last chunk
// carries prompt, completion and cached token counts), the options'
// sampling settings, and no tool_choice unless asked.
func ChatBody(msgs []chat.Message, tools []json.RawMessage, o RequestOptions) ([]byte, error) {
	b := chatBody{
		Model:               o.Model,
		Messages:            msgs,
		Tools:               tools,
		ToolChoice:          o.ToolChoice,
		Stream:              true,
		StreamOptions:       &streamOptions{IncludeUsage: true},
		Temperature:         o.Temperature,
		Seed:                o.Seed,
		MaxCompletionTokens: o.MaxTokens,
		IgnoreEOS:           o.IgnoreEOS,
	}
	if o.EnableThinking != nil {
		b.ChatTemplateKwargs = map[string]any{"enable_thinking": *o.EnableThinking}
	}
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	return out, nil
}

// TemplateRequest is what a server renders from the same messages and tools:
// the generation prompt added and enable_thinking as given.
func TemplateRequest(msgs []chat.Message, tools []json.RawMessage, enableThinking bool) chat.Request {
	return chat.Request{
		Messages:            msgs,
		Tools:               tools,
		AddGenerationPrompt: true,
		Kwargs:              map[string]any{"enable_thinking": enableThinking},
	}
}
