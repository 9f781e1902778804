package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// genParams are what every generation request has: the wire's own
// settings, and the turn's settings (limits, sampling, stop strings, the
// output format) that decodeGen reads into Turn.
type genParams struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	Ignored      []string // top-level fields that were accepted and ignored
	// N is the number of choices to generate (n), one after another: they
	// share the prompt's prefill through the prefix cache.
	N    int
	Turn turn.Request
}

// gen gives the parameters every generation request has.
func (g *genParams) gen() *genParams { return g }

// maxChoices bounds n: the choices run one after another.
const maxChoices = 16

// genFields are the JSON fields behind genParams, plus those that are
// refused unless they ask for the default (answering them silently without
// their effect would be wrong).
type genFields struct {
	Model               *string         `json:"model"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	IgnoreEOS           *bool           `json:"ignore_eos"`

	Logprobs         json.RawMessage    `json:"logprobs"` // chat: bool; completions: int
	TopLogprobs      *int               `json:"top_logprobs"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	// llama.cpp's and vLLM's names for the repetition penalty
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	RepeatPenalty     *float64 `json:"repeat_penalty"`
	RepeatLastN       *int     `json:"repeat_last_n"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// genKnown are the top-level fields genFields reads.
var genKnown = []string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens",
	"temperature", "top_p", "top_k", "seed", "stop", "n", "ignore_eos",
	"logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "response_format",
	"repetition_penalty", "repeat_penalty", "repeat_last_n", "grammar", "json_schema"}

// decodeObject checks that body is one JSON object and returns its fields.
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return nil, jsonError("", err)
	}
	if dec.More() {
		return nil, badRequest("", "malformed JSON: more than one value in the body")
	}
	if fields == nil {
		return nil, badRequest("", "the request body must be a JSON object")
	}
	return fields, nil
}

// jsonError turns a decoding error into a 400 naming the field.
func jsonError(param string, err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = param
		}
		return badRequest(field, "%s: expected %s, got JSON %s", nonEmpty(field, "body"), jsonTypeName(te.Type.String()), te.Value)
	case errors.As(err, &se):
		return badRequest(param, "malformed JSON at byte %d: %v", se.Offset, se)
	case param == "":
		return badRequest("", "malformed JSON: %v", err)
	}
	return badRequest(param, "%s: %v", param, err)
}

func jsonTypeName(goType string) string {
	switch {
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "a number"
	case goType == "string" || goType == "*string":
		return "a string"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

func nonEmpty(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// decodeGen reads and checks the generation settings. defaultMax applies
// when neither max_tokens nor max_completion_tokens is given.
func decodeGen(body []byte, fields map[string]json.RawMessage, known []string, defaultMax int) (genParams, error) {
	var f genFields
	if err := json.Unmarshal(body, &f); err != nil {
		return genParams{}, jsonError("", err)
	}
	p := genParams{Turn: turn.Request{MaxTokens: defaultMax}}
	if f.Model != nil {
		p.Model = *f.Model
	}
	if f.Stream != nil {
		p.Stream = *f.Stream
	}
	if f.StreamOptions != nil {
		if !p.Stream {
			return p, badRequest("stream_options", "stream_options is only allowed when stream is true")
		}
		p.IncludeUsage = f.StreamOptions.IncludeUsage
	}
	// max_completion_tokens replaced max_tokens in OpenAI's API; when both
	// are given it wins, as in vLLM.
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", f.MaxTokens}, {"max_completion_tokens", f.MaxCompletionTokens}} {
		if m.v == nil {
			continue
		}
		if *m.v < 1 {
			return p, badRequest(m.name, "%s must be at least 1, got %d", m.name, *m.v)
		}
		p.Turn.MaxTokens = *m.v
	}
	// The sampler's settings are validated where every API's are
	// (engine/turn: Request.Validate, when the request is complete).
	p.Turn.Sampling = turn.Sampling{Temperature: f.Temperature, TopP: f.TopP, TopK: f.TopK, Seed: f.Seed}
	if f.IgnoreEOS != nil {
		p.Turn.IgnoreEOS = *f.IgnoreEOS
	}
	stop, err := decodeStop(f.Stop)
	if err != nil {
		return p, err
	}
	p.Turn.Stop = stop
	p.N = 1
	if f.N != nil {
		switch n := *f.N; {
		case n < 1 || n > maxChoices:
			return p, badRequest("n", "n must be between 1 and %d, got %d", maxChoices, n)
		}
		p.N = *f.N
	}
	if err := decodeShaping(f, &p.Turn.Sampling); err != nil {
		return p, err
	}
	if p.Turn.Format, err = decodeConstraint(fields); err != nil {
		return p, err
	}
	for k := range fields {
		if !slices.Contains(genKnown, k) && !slices.Contains(known, k) {
			p.Ignored = append(p.Ignored, k)
		}
	}
	slices.Sort(p.Ignored)
	return p, nil
}

// decodeShaping reads the penalties, logit_bias and logprobs. logprobs is
// a boolean on chat (with top_logprobs) and a count of alternatives on
// completions.
func decodeShaping(f genFields, p *turn.Sampling) error {
	num := func(name string, v *float64) (float32, error) {
		if v == nil {
			return 0, nil
		}
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			return 0, badRequest(name, "%s must be a number", name)
		}
		return float32(*v), nil
	}
	var err error
	pen := &p.Penalties
	if pen.Presence, err = num("presence_penalty", f.PresencePenalty); err != nil {
		return err
	}
	if pen.Frequency, err = num("frequency_penalty", f.FrequencyPenalty); err != nil {
		return err
	}
	if pen.Presence < -2 || pen.Presence > 2 {
		return badRequest("presence_penalty", "presence_penalty must be in [-2, 2], got %v", pen.Presence)
	}
	if pen.Frequency < -2 || pen.Frequency > 2 {
		return badRequest("frequency_penalty", "frequency_penalty must be in [-2, 2], got %v", pen.Frequency)
	}
	for _, r := range []struct {
		name string
		v    *float64
	}{{"repetition_penalty", f.RepetitionPenalty}, {"repeat_penalty", f.RepeatPenalty}} {
		if r.v == nil {
			continue
		}
		v, err := num(r.name, r.v)
		if err != nil {
			return err
		}
		if v <= 0 {
			return badRequest(r.name, "%s must be > 0 (1 is off), got %v", r.name, v)
		}
		pen.Repetition = v
	}
	if f.RepeatLastN != nil {
		switch n := *f.RepeatLastN; {
		case n < -1:
			return badRequest("repeat_last_n", "repeat_last_n must be -1 (the whole context), 0 (off) or > 0, got %d", n)
		case n == 0:
			pen.Repetition = 0
		case n == -1:
			pen.RepeatLastN = math.MaxInt32
		default:
			pen.RepeatLastN = n
		}
	}
	for k, v := range f.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return badRequest("logit_bias", "logit_bias keys must be token ids, got %q", k)
		}
		if math.IsNaN(v) || v < -100 || v > 100 {
			return badRequest("logit_bias", "logit_bias: the bias of token %d must be in [-100, 100], got %v", id, v)
		}
		if pen.Bias == nil {
			pen.Bias = map[int32]float32{}
		}
		pen.Bias[int32(id)] = float32(v)
	}
	lp := strings.TrimSpace(string(f.Logprobs))
	switch {
	case lp == "" || lp == "null" || lp == "false":
	case lp == "true":
		p.Logprobs = true
	default:
		n, err := strconv.Atoi(lp)
		if err != nil || n < 0 || n > engine.MaxTopLogprobs {
			return badRequest("logprobs", "logprobs must be true/false (chat) or a number of alternatives in [0, %d] (completions), got %s", engine.MaxTopLogprobs, lp)
		}
		p.Logprobs, p.TopLogprobs = true, n
	}
	if f.TopLogprobs != nil {
		n := *f.TopLogprobs
		if n < 0 || n > engine.MaxTopLogprobs {
			return badRequest("top_logprobs", "top_logprobs must be in [0, %d], got %d", engine.MaxTopLogprobs, n)
		}
		if n > 0 && !p.Logprobs {
			return badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		p.TopLogprobs = n
	}
	return nil
}

// decodeStop reads stop: null, a string or a list of strings.
func decodeStop(raw json.RawMessage) ([]string, error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return nil, nil
	}
	var list []string
	if s[0] == '"' {
		var one string
		if err := json.Unmarshal(s, &one); err != nil {
			return nil, jsonError("stop", err)
		}
		list = []string{one}
	} else if err := json.Unmarshal(s, &list); err != nil {
		return nil, badRequest("stop", "stop must be a string or a list of strings")
	}
	return list, nil // (checked by turn.Request.Validate)
}

// chatParams is a decoded chat completion request: Chat as the template
// reads it (/apply-template renders it), Turn what the pipeline runs.
type chatParams struct {
	genParams
	Chat chat.Request
}

// chatKnown are the chat fields read besides genKnown. user and metadata
// are accepted and ignored by design (docs/api.md, Request fields).
var chatKnown = []string{"messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
	"add_generation_prompt", "user", "metadata", "functions", "function_call", "audio", "modalities"}

// decodeChatRequest reads and validates a chat completion body.
func decodeChatRequest(body []byte) (*chatParams, error) {
	fields, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	if _, ok := fields["messages"]; !ok {
		return nil, badRequest("messages", "messages: missing")
	}
	gen, err := decodeGen(body, fields, chatKnown, 0)
	if err != nil {
		return nil, err
	}
	if err := refuseChatUnsupported(fields); err != nil {
		return nil, err
	}
	p := &chatParams{genParams: gen}
	if err := decodeChatFields(body, fields, p); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeChatFields reads the template's part of a chat body (also used by
// /apply-template) and the tool settings, and validates them.
func decodeChatFields(body []byte, fields map[string]json.RawMessage, p *chatParams) error {
	if raw, ok := fields["chat_template_kwargs"]; ok && !isNull(raw) && !isObject(raw) {
		return badRequest("chat_template_kwargs", "chat_template_kwargs must be an object")
	}
	if raw, ok := fields["tools"]; ok && !isNull(raw) && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		return badRequest("tools", "tools must be a list")
	}
	if err := json.Unmarshal(body, &p.Chat); err != nil {
		return jsonError("messages", err)
	}
	// llama.cpp maps the developer role to system for every template that
	// is not gpt-oss's; the Qwen templates know only system.
	for i := range p.Chat.Messages {
		if p.Chat.Messages[i].Role == "developer" {
			p.Chat.Messages[i].Role = "system"
		}
	}
	t := &p.Turn
	t.Messages = p.Chat.Messages
	t.TemplateKwargs = p.Chat.Kwargs
	t.NoGenerationPrompt = !p.Chat.AddGenerationPrompt
	t.ParallelToolCalls = true
	t.Tools = nil
	for i, raw := range p.Chat.Tools {
		tool, err := turn.ParseChatTool(i, raw)
		if err != nil {
			return err
		}
		t.Tools = append(t.Tools, tool)
	}
	if raw, ok := fields["parallel_tool_calls"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &t.ParallelToolCalls); err != nil {
			return jsonError("parallel_tool_calls", err)
		}
	}
	names := make([]string, len(t.Tools))
	for i, tool := range t.Tools {
		names[i] = tool.Name
	}
	if err := decodeToolChoice(fields["tool_choice"], names, t); err != nil {
		return err
	}
	return t.Validate()
}

// refuseChatUnsupported rejects chat fields whose effect this server
// cannot give: the legacy function-calling fields (the model would never
// see the functions) and audio output.
func refuseChatUnsupported(fields map[string]json.RawMessage) error {
	for _, k := range []string{"functions", "function_call", "audio"} {
		if raw, ok := fields[k]; ok && !isNull(raw) {
			if k == "audio" {
				return badRequest(k, "audio output is not supported by this server")
			}
			return badRequest(k, "%s is the deprecated function-calling API; send tools and tool_choice instead", k)
		}
	}
	if raw, ok := fields["modalities"]; ok && !isNull(raw) {
		var m []string
		if json.Unmarshal(raw, &m) != nil || slices.ContainsFunc(m, func(x string) bool { return x != "text" }) {
			return badRequest("modalities", "only the \"text\" modality is supported by this server")
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func isObject(raw json.RawMessage) bool { return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) }

// decodeToolChoice reads tool_choice: "auto", "none", "required" or
// {"type": "function", "function": {"name": NAME}}.
func decodeToolChoice(raw json.RawMessage, tools []string, t *turn.Request) error {
	t.ToolChoice = turn.ToolChoice{Mode: turn.ToolAuto}
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return nil
		case "none":
			t.ToolChoice.Mode = turn.ToolNone
			return nil
		case "required":
			if len(tools) == 0 {
				return badRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			t.ToolChoice.Mode = turn.ToolRequired
			return nil
		}
		return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or a named function, got %q", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
		return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	if !slices.Contains(tools, named.Function.Name) {
		return badRequest("tool_choice", "tool_choice names function %q, which is not among the request's tools", named.Function.Name)
	}
	t.ToolChoice = turn.ToolChoice{Mode: turn.ToolNamed, Name: named.Function.Name}
	return nil
}

// completionParams is a decoded text completion request.
type completionParams struct {
	genParams
}

var completionKnown = []string{"prompt", "echo", "suffix", "best_of", "user", "metadata"}

// defaultCompletionMaxTokens is OpenAI's default max_tokens for
// /v1/completions.
const defaultCompletionMaxTokens = 16

// decodeCompletionRequest reads and validates a text completion body.
func decodeCompletionRequest(body []byte) (*completionParams, error) {
	fields, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	gen, err := decodeGen(body, fields, completionKnown, defaultCompletionMaxTokens)
	if err != nil {
		return nil, err
	}
	p := &completionParams{genParams: gen}
	var f struct {
		Echo   *bool           `json:"echo"`
		Suffix *string         `json:"suffix"`
		BestOf *int            `json:"best_of"`
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, jsonError("", err)
	}
	if f.Echo != nil && *f.Echo {
		return nil, badRequest("echo", "echo is not supported by this server")
	}
	if f.Suffix != nil && *f.Suffix != "" {
		return nil, badRequest("suffix", "suffix is not supported by this server")
	}
	if f.BestOf != nil && *f.BestOf != 1 {
		return nil, badRequest("best_of", "best_of must be 1, got %d", *f.BestOf)
	}
	if err := p.decodePrompt(f.Prompt); err != nil {
		return nil, err
	}
	if err := p.Turn.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// decodePrompt reads prompt: a string, a list of one string, a list of
// token ids, or a list of one list of token ids.
func (p *completionParams) decodePrompt(raw json.RawMessage) error {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || isNull(s) {
		return badRequest("prompt", "prompt: missing")
	}
	var text string
	if json.Unmarshal(s, &text) == nil {
		p.Turn.Prompt = &turn.Prompt{Text: text}
		return nil
	}
	var texts []string
	if json.Unmarshal(s, &texts) == nil {
		if len(texts) != 1 {
			return badRequest("prompt", "prompt: one prompt per request, got %d", len(texts))
		}
		p.Turn.Prompt = &turn.Prompt{Text: texts[0]}
		return nil
	}
	var ids []int32
	if json.Unmarshal(s, &ids) == nil {
		p.Turn.Prompt = &turn.Prompt{Tokens: ids}
		return nil
	}
	var idLists [][]int32
	if json.Unmarshal(s, &idLists) == nil {
		if len(idLists) != 1 {
			return badRequest("prompt", "prompt: one prompt per request, got %d", len(idLists))
		}
		p.Turn.Prompt = &turn.Prompt{Tokens: idLists[0]}
		return nil
	}
	return badRequest("prompt", "prompt must be a string or a list of token ids")
}
