package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// ChatMLTemplate is the template used for models that ship none: ChatML, as
// transformers' former default_chat_template wrote it. It shows neither tools
// nor tool calls.
const ChatMLTemplate = "{% for message in messages %}" +
	"{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	tpl *exec.Template
	bos string
	eos string
}

// NewTemplate parses a model's chat template (the tokenizer.chat_template
// string of a GGUF file or tokenizer_config.json). bos and eos are the
// model's special tokens, given to the template as bos_token and eos_token.
// An empty src selects ChatMLTemplate.
func NewTemplate(src, bos, eos string) (t *Template, err error) {
	if src == "" {
		src = ChatMLTemplate
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat template: parse: %v", r)
		}
	}()
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat_template": lstripBlocks(src)})
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	tpl, err := exec.NewTemplate("/chat_template", jinjaConfig(), loader, environment())
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // gonja's wrapper repeats the whole source
		}
		return nil, fmt.Errorf("chat template: %w", shortError(err))
	}
	return &Template{tpl: tpl, bos: bos, eos: eos}, nil
}

// jinjaConfig matches the Jinja2 environment transformers renders with.
func jinjaConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = false // done by lstripBlocks, the way Jinja2 does it
	c.KeepTrailingNewline = false
	c.AutoEscape = false
	return c
}

// Render renders req into the prompt text, as transformers'
// apply_chat_template(messages, tools=tools, add_generation_prompt=...,
// **kwargs) does after the normalisation OpenAI-compatible servers apply:
// null content becomes "", text parts are joined, and tool-call arguments
// are decoded from their JSON text into objects.
func (t *Template) Render(req Request) (out string, err error) {
	vars, err := t.variables(req)
	if err != nil {
		return "", err
	}
	var raised *string
	vars["raise_exception"] = func(_ *exec.Evaluator, params *exec.VarArgs) (any, error) {
		msg := ""
		if len(params.Args) > 0 {
			msg = params.Args[0].String()
		}
		if raised == nil {
			raised = &msg
		}
		return nil, errors.New(msg)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: render: %v", r)
		}
	}()
	out, err = t.tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		if raised != nil {
			return "", fmt.Errorf("chat template: raise_exception: %s", *raised)
		}
		return "", fmt.Errorf("chat template: render: %w", shortError(err))
	}
	return out, nil
}

// variables builds the template's context: transformers passes the special
// tokens first and lets the kwargs override them.
func (t *Template) variables(req Request) (map[string]any, error) {
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := map[string]any{
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"add_generation_prompt": req.AddGenerationPrompt,
		"strftime_now": func(format string) string {
			return strftime(now, format)
		},
	}
	msgs := make(list, 0, len(req.Messages))
	for i, m := range req.Messages {
		v, err := messageValue(m)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].%w", i, err)
		}
		msgs = append(msgs, v)
	}
	vars["messages"] = msgs
	vars["tools"] = nil
	if req.Tools != nil {
		tools := make(list, 0, len(req.Tools))
		for i, raw := range req.Tools {
			v, err := decodeJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("tools[%d]: %w", i, err)
			}
			tools = append(tools, v)
		}
		vars["tools"] = tools
	}
	for k, v := range req.Kwargs {
		switch k {
		case "messages", "tools", "add_generation_prompt", "raise_exception", "strftime_now":
			// transformers passes these itself; a second value is an error there too.
			return nil, fmt.Errorf("chat_template_kwargs.%s: reserved name", k)
		}
		raw, ok := v.(json.RawMessage)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
			}
			raw = b
		}
		val, err := decodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		vars[k] = val
	}
	return vars, nil
}

// messageValue is the dict a template sees for one message.
func messageValue(m Message) (*exec.Dict, error) {
	d := &exec.Dict{Pairs: []*exec.Pair{}}
	d.Pairs = append(d.Pairs, pair("role", m.Role), pair("content", m.Content.String()))
	if m.ReasoningContent != nil {
		d.Pairs = append(d.Pairs, pair("reasoning_content", *m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make(list, 0, len(m.ToolCalls))
		for j, tc := range m.ToolCalls {
			args, err := decodeArguments(tc.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d].function.arguments: %w", j, err)
			}
			call := &exec.Dict{Pairs: []*exec.Pair{}}
			if tc.ID != "" {
				call.Pairs = append(call.Pairs, pair("id", tc.ID))
			}
			if tc.Type != "" {
				call.Pairs = append(call.Pairs, pair("type", tc.Type))
			}
			fn := &exec.Dict{Pairs: []*exec.Pair{pair("name", tc.Function.Name), pair("arguments", args)}}
			call.Pairs = append(call.Pairs, pair("function", fn))
			calls = append(calls, call)
		}
		d.Pairs = append(d.Pairs, pair("tool_calls", calls))
	}
	if m.ToolCallID != "" {
		d.Pairs = append(d.Pairs, pair("tool_call_id", m.ToolCallID))
	}
	if m.Name != "" {
		d.Pairs = append(d.Pairs, pair("name", m.Name))
	}
	return d, nil
}

func pair(key string, v any) *exec.Pair {
	return &exec.Pair{Key: exec.AsValue(key), Value: exec.ToValue(v)}
}

// shortError keeps gonja's error chain from repeating the whole template.
func shortError(err error) error {
	s := err.Error()
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return errors.New(s)
}

// TokenizerConfig holds what a Hugging Face tokenizer_config.json says about
// chat rendering.
type TokenizerConfig struct {
	ChatTemplate string
	BOS, EOS     string
}

// ParseTokenizerConfig reads chat_template, bos_token and eos_token from a
// tokenizer_config.json. A list of named templates yields the one named
// "default" (else the first); a token may be a string, an AddedToken object
// or null.
func ParseTokenizerConfig(data []byte) (TokenizerConfig, error) {
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return TokenizerConfig{}, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	var cfg TokenizerConfig
	if len(raw.ChatTemplate) > 0 && string(raw.ChatTemplate) != "null" {
		if err := json.Unmarshal(raw.ChatTemplate, &cfg.ChatTemplate); err != nil {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(raw.ChatTemplate, &named); err != nil || len(named) == 0 {
				return TokenizerConfig{}, fmt.Errorf("tokenizer_config.json: chat_template: want a string or a list of {name, template}")
			}
			cfg.ChatTemplate = named[0].Template
			for _, n := range named {
				if n.Name == "default" {
					cfg.ChatTemplate = n.Template
				}
			}
		}
	}
	var err error
	if cfg.BOS, err = specialToken(raw.BOS); err != nil {
		return TokenizerConfig{}, fmt.Errorf("tokenizer_config.json: bos_token: %w", err)
	}
	if cfg.EOS, err = specialToken(raw.EOS); err != nil {
		return TokenizerConfig{}, fmt.Errorf("tokenizer_config.json: eos_token: %w", err)
	}
	return cfg, nil
}

func specialToken(raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", nil
	}
	var tok string
	if err := json.Unmarshal(raw, &tok); err == nil {
		return tok, nil
	}
	var added struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &added); err != nil {
		return "", errors.New("want a string or an object with \"content\"")
	}
	return added.Content, nil
}
