package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// genParams are the generation settings shared by chat and text completions.
type genParams struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	MaxTokens    int // 0: until end of generation or the context is full
	Sample       sample.Params
	SeedGiven    bool
	Stop         []string
	IgnoreEOS    bool
	Ignored      []string // top-level fields that were accepted and ignored
	// N is the number of choices to generate (n), one after another: they
	// share the prompt's prefill through the prefix cache.
	N int

	Penalties   sample.Penalties
	Logprobs    bool // each output token's log-probability
	TopLogprobs int  // with this many alternatives
	// Grammar constrains the output (response_format, grammar,
	// json_schema); nil: free.
	Grammar *grammar.Grammar
}

// gen gives the parameters every generation request has.
func (g *genParams) gen() *genParams { return g }

// maxChoices bounds n: the choices run one after another.
const maxChoices = 16

// maxStopStrings bounds the work per token of stop matching.
const maxStopStrings = 16

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
	p := genParams{MaxTokens: defaultMax}
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
		p.MaxTokens = *m.v
	}
	// The sampler's settings are validated where every API's are (engine/turn).
	smp, seeded, err := turn.Sampling{Temperature: f.Temperature, TopP: f.TopP, TopK: f.TopK, Seed: f.Seed}.Params()
	if err != nil {
		return p, fieldError(err)
	}
	p.Sample, p.SeedGiven = smp, seeded
	if f.IgnoreEOS != nil {
		p.IgnoreEOS = *f.IgnoreEOS
	}
	stop, err := decodeStop(f.Stop)
	if err != nil {
		return p, err
	}
	p.Stop = stop
	p.N = 1
	if f.N != nil {
		switch n := *f.N; {
		case n < 1 || n > maxChoices:
			return p, badRequest("n", "n must be between 1 and %d, got %d", maxChoices, n)
		}
		p.N = *f.N
	}
	if err := decodeShaping(f, &p); err != nil {
		return p, err
	}
	if p.Grammar, err = decodeConstraint(fields); err != nil {
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

// fieldError is the 400 of a turn.FieldError, naming its field.
func fieldError(err error) error {
	var fe *turn.FieldError
	if errors.As(err, &fe) {
		return badRequest(fe.Field, "%s", fe.Message)
	}
	return badRequest("", "%v", err)
}

// decodeShaping reads the penalties, logit_bias and logprobs. logprobs is
// a boolean on chat (with top_logprobs) and a count of alternatives on
// completions.
func decodeShaping(f genFields, p *genParams) error {
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
	if len(list) > maxStopStrings {
		return nil, badRequest("stop", "at most %d stop strings are accepted, got %d", maxStopStrings, len(list))
	}
	for i, st := range list {
		if st == "" {
			return nil, badRequest("stop", "stop[%d] is empty", i)
		}
	}
	return list, nil
}

// toolChoiceMode is what tool_choice asks for.
type toolChoiceMode uint8

const (
	toolAuto toolChoiceMode = iota
	toolNone
	toolRequired
	toolNamed
)

// chatParams is a decoded chat completion request.
type chatParams struct {
	genParams
	Chat              chat.Request
	ToolChoice        toolChoiceMode
	ToolName          string // for toolNamed
	ParallelToolCalls bool
	tools             []toolDef // the validated tools, for the call grammars
	callIDPrefix      string    // starts the ids of the answer's calls; "" is "call_"
	reasoningBudget   int       // turn.Request.ReasoningBudget
}

// chatKnown are the chat fields read besides genKnown. user and metadata
// are accepted and ignored by design (listed in README's table).
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
	p := &chatParams{genParams: gen, ParallelToolCalls: true}
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
	if err := validateMessages(p.Chat.Messages); err != nil {
		return err
	}
	defs, err := validateTools(p.Chat.Tools)
	if err != nil {
		return err
	}
	p.tools = defs
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	if err := chat.Validate(p.Chat); err != nil {
		return badRequest(paramOf(err.Error()), "%v", err)
	}
	if err := turn.CheckTurnOrder(p.Chat); err != nil {
		return fieldError(err)
	}
	if raw, ok := fields["parallel_tool_calls"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &p.ParallelToolCalls); err != nil {
			return jsonError("parallel_tool_calls", err)
		}
	}
	return decodeToolChoice(fields["tool_choice"], names, p)
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

// paramOf is the field an engine/chat validation message names
// ("messages[2].role: ...").
func paramOf(msg string) string {
	if i := strings.Index(msg, ":"); i > 0 && !strings.Contains(msg[:i], " ") {
		return msg[:i]
	}
	return ""
}

// validateMessages checks what engine/chat's Validate leaves to the caller:
// a tool message must say which call it answers.
func validateMessages(msgs []chat.Message) error {
	for i, m := range msgs {
		if m.Role == "tool" && m.ToolCallID == "" {
			return badRequest(fmt.Sprintf("messages[%d].tool_call_id", i),
				"messages[%d].tool_call_id: missing (a tool message must name the tool call it answers)", i)
		}
	}
	return nil
}

// toolNamePattern is OpenAI's rule for function names, widened by '.' and
// ':' which MCP tool names use. Names end up inside the model's tool-call
// markup, so nothing else is let through.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// validateTools checks each tool definition and returns the names.
func validateTools(tools []json.RawMessage) ([]toolDef, error) {
	var defs []toolDef
	var names []string
	for i, raw := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		var tool struct {
			Type     string                     `json:"type"`
			Function map[string]json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			return nil, badRequest(param, "%s must be an object with \"type\" and \"function\"", param)
		}
		if tool.Type != "function" {
			return nil, badRequest(param+".type", "%s.type must be \"function\", got %q", param, tool.Type)
		}
		if tool.Function == nil {
			return nil, badRequest(param+".function", "%s.function: missing", param)
		}
		var name string
		if err := json.Unmarshal(tool.Function["name"], &name); err != nil || !toolNamePattern.MatchString(name) {
			return nil, badRequest(param+".function.name", "%s.function.name must be 1 to 64 letters, digits, '_', '-', '.' or ':'", param)
		}
		if slices.Contains(names, name) {
			return nil, badRequest(param+".function.name", "%s.function.name: %q is defined twice", param, name)
		}
		names = append(names, name)
		def := toolDef{name: name, params: json.RawMessage(`{"type": "object"}`)}
		if raw, ok := tool.Function["description"]; ok && !isNull(raw) {
			var d string
			if json.Unmarshal(raw, &d) != nil {
				return nil, badRequest(param+".function.description", "%s.function.description must be a string", param)
			}
		}
		if raw, ok := tool.Function["parameters"]; ok && !isNull(raw) {
			if err := validateSchema(raw); err != nil {
				return nil, badRequest(param+".function.parameters", "%s.function.parameters: %v", param, err)
			}
			if string(bytes.TrimSpace(raw)) != "{}" {
				def.params = raw
			}
		}
		defs = append(defs, def)
	}
	return defs, nil
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

// decodeToolChoice reads tool_choice: "auto", "none", "required" or
// {"type": "function", "function": {"name": NAME}}.
func decodeToolChoice(raw json.RawMessage, tools []string, p *chatParams) error {
	p.ToolChoice = toolAuto
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return nil
		case "none":
			p.ToolChoice = toolNone
			return nil
		case "required":
			if len(tools) == 0 {
				return badRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			p.ToolChoice = toolRequired
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
	p.ToolChoice = toolNamed
	p.ToolName = named.Function.Name
	return nil
}

// completionParams is a decoded text completion request.
type completionParams struct {
	genParams
	PromptText   string
	PromptTokens []int32 // set when the prompt was a token array
	IsTokens     bool
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
		p.PromptText = text
		return nil
	}
	var texts []string
	if json.Unmarshal(s, &texts) == nil {
		if len(texts) != 1 {
			return badRequest("prompt", "prompt: one prompt per request, got %d", len(texts))
		}
		p.PromptText = texts[0]
		return nil
	}
	var ids []int32
	if json.Unmarshal(s, &ids) == nil {
		p.PromptTokens, p.IsTokens = ids, true
		return nil
	}
	var idLists [][]int32
	if json.Unmarshal(s, &idLists) == nil {
		if len(idLists) != 1 {
			return badRequest("prompt", "prompt: one prompt per request, got %d", len(idLists))
		}
		p.PromptTokens, p.IsTokens = idLists[0], true
		return nil
	}
	return badRequest("prompt", "prompt must be a string or a list of token ids")
}
