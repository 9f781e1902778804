package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// TokenCounter counts tokens on the client side as the harness does: a
// prompt is the model's chat template applied to the request (generation
// prompt added) and tokenized; an answer is the template's rendering of the
// assistant message alone, without the framing every assistant turn has.
// It is safe for concurrent use.
type TokenCounter struct {
	tok            *tokenizer.Tokenizer
	tpl            *chat.Template
	enableThinking bool
	// Answer framing, measured once (token_metrics.py's _prefix_len and
	// _baseline): tokens of [user ""] and of an empty assistant turn after it.
	prefixLen, baseline int
}

// NewTokenCounter builds a counter from a tokenizer and a chat template.
// enableThinking is the template's enable_thinking variable (false: the
// reasoning-off prompts of the MLPerf run).
func NewTokenCounter(tok *tokenizer.Tokenizer, tpl *chat.Template, enableThinking bool) (*TokenCounter, error) {
	c := &TokenCounter{tok: tok, tpl: tpl, enableThinking: enableThinking}
	user := chat.Message{Role: "user", Content: chat.TextContent("")}
	prefix, err := c.render([]chat.Message{user}, false)
	if err != nil {
		return nil, err
	}
	frame, err := c.render([]chat.Message{user, {Role: "assistant", Content: chat.TextContent("")}}, false)
	if err != nil {
		return nil, err
	}
	c.prefixLen = len(prefix)
	c.baseline = len(frame) - len(prefix)
	return c, nil
}

// LoadTokenCounter reads the model's tokenizer and chat template from a GGUF
// file (tokenizer.ggml.* and tokenizer.chat_template), or from a Hugging
// Face tokenizer.json (optionally .gz) with its tokenizer_config.json beside it.
func LoadTokenCounter(path string, enableThinking bool) (*TokenCounter, error) {
	var v tokenizer.Vocab
	if isGGUF(path) {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		v, err = tokenizer.VocabFromGGUF(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	} else {
		var err error
		if v, err = tokenizer.LoadTokenizerJSON(path); err != nil {
			return nil, err
		}
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	special := func(id int32) string {
		if id < 0 {
			return ""
		}
		return v.Tokens[id]
	}
	if v.ChatTemplate == "" {
		return nil, fmt.Errorf("%s: no chat template (GGUF key tokenizer.chat_template, or chat_template in tokenizer_config.json beside tokenizer.json)", path)
	}
	tpl, err := chat.NewTemplate(v.ChatTemplate, special(v.BOS), special(v.EOS))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return NewTokenCounter(tok, tpl, enableThinking)
}

// isGGUF tells a GGUF file by its magic, whatever its name.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return strings.HasSuffix(path, ".gguf") // let gguf.Open report the error
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil {
		return false
	}
	return bytes.Equal(magic, []byte("GGUF"))
}

func (c *TokenCounter) render(msgs []chat.Message, addGenerationPrompt bool) ([]int32, error) {
	text, err := c.tpl.Render(chat.Request{
		Messages:            msgs,
		AddGenerationPrompt: addGenerationPrompt,
		Kwargs:              map[string]any{"enable_thinking": c.enableThinking},
	})
	if err != nil {
		return nil, err
	}
	return c.tok.Encode(text, true, true), nil
}

// Prompt renders a request as the server does and tokenizes it (special
// tokens in the rendered text are parsed, BOS added where the model asks).
func (c *TokenCounter) Prompt(msgs []chat.Message, tools []json.RawMessage) ([]int32, error) {
	text, err := c.tpl.Render(TemplateRequest(msgs, tools, c.enableThinking))
	if err != nil {
		return nil, err
	}
	return c.tok.Encode(text, true, true), nil
}

// Answer counts the tokens of an assistant message: its content, reasoning
// and tool calls as the template writes them, less the empty assistant turn's
// framing (the way the harness counts output for OSL and TPOT).
func (c *TokenCounter) Answer(m chat.Message) (int, error) {
	m.Role = "assistant"
	if m.Content.Null {
		m.Content = chat.TextContent("")
	}
	// A tool call cut short by max_tokens (finish_reason "length") carries
	// the arguments written so far, which are not JSON and which no
	// template renders: it is counted as an empty object plus the tokens
	// of the text written.
	cut, cloned := 0, false
	for i, tc := range m.ToolCalls {
		a := strings.TrimSpace(tc.Function.Arguments)
		if a == "" || json.Valid([]byte(a)) {
			continue
		}
		if !cloned {
			m.ToolCalls, cloned = slices.Clone(m.ToolCalls), true
		}
		cut += len(c.tok.Encode(tc.Function.Arguments, false, false)) - len(c.tok.Encode("{}", false, false))
		m.ToolCalls[i].Function.Arguments = "{}"
	}
	ids, err := c.render([]chat.Message{{Role: "user", Content: chat.TextContent("")}, m}, false)
	if err != nil {
		return 0, err
	}
	return max(0, len(ids)-c.prefixLen-c.baseline+cut), nil
}
