package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Pre-tokenizer patterns of tokenizer.json that nextWord implements.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

type hfTokenizer struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   *hfComponent `json:"normalizer"`
	PreTokenizer *hfComponent `json:"pre_tokenizer"`
	Decoder      *hfComponent `json:"decoder"`
	Model        struct {
		Type          string            `json:"type"`
		Vocab         map[string]int    `json:"vocab"`
		Merges        []json.RawMessage `json:"merges"`
		ByteFallback  bool              `json:"byte_fallback"`
		IgnoreMerges  bool              `json:"ignore_merges"`
		ContSubword   string            `json:"continuing_subword_prefix"`
		EndOfWordSufx string            `json:"end_of_word_suffix"`
	} `json:"model"`
}

type hfComponent struct {
	Type           string                           `json:"type"`
	Pretokenizers  []hfComponent                    `json:"pretokenizers"`
	Normalizers    []hfComponent                    `json:"normalizers"`
	Pattern        *struct{ Regex, String *string } `json:"pattern"`
	Behavior       string                           `json:"behavior"`
	Invert         bool                             `json:"invert"`
	AddPrefixSpace bool                             `json:"add_prefix_space"`
	UseRegex       *bool                            `json:"use_regex"`
}

type hfConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PADToken     json.RawMessage `json:"pad_token"`
	UNKToken     json.RawMessage `json:"unk_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
}

// LoadTokenizerJSON reads a Hugging Face tokenizer.json of a byte-level BPE
// model (the Qwen family) and, if present, the tokenizer_config.json beside it
// (chat_template, bos_token, eos_token, pad_token, unk_token, add_bos_token,
// add_eos_token). Added tokens that are special become TypeControl, the other
// added tokens TypeUserDefined, every other token TypeNormal. A path ending
// in .gz is read through gzip.
func LoadTokenizerJSON(tokenizerJSON string) (Vocab, error) {
	data, err := os.ReadFile(tokenizerJSON)
	if err != nil {
		return Vocab{}, fmt.Errorf("load tokenizer: %w", err)
	}
	if strings.HasSuffix(tokenizerJSON, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err == nil {
			data, err = io.ReadAll(zr)
		}
		if err != nil {
			return Vocab{}, fmt.Errorf("load %s: %w", tokenizerJSON, err)
		}
	}
	v, err := parseTokenizerJSON(data)
	if err != nil {
		return Vocab{}, fmt.Errorf("load %s: %w", tokenizerJSON, err)
	}
	cfgPath := filepath.Join(filepath.Dir(tokenizerJSON), "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return Vocab{}, fmt.Errorf("load tokenizer config: %w", err)
	}
	if err := applyTokenizerConfig(&v, cfg); err != nil {
		return Vocab{}, fmt.Errorf("load %s: %w", cfgPath, err)
	}
	return v, nil
}

func parseTokenizerJSON(data []byte) (Vocab, error) {
	var tj hfTokenizer
	if err := json.Unmarshal(data, &tj); err != nil {
		return Vocab{}, err
	}
	m := &tj.Model
	if m.Type != "BPE" {
		return Vocab{}, fmt.Errorf("model.type is %q, want BPE", m.Type)
	}
	if m.ByteFallback || m.IgnoreMerges || m.ContSubword != "" || m.EndOfWordSufx != "" {
		return Vocab{}, fmt.Errorf("model: byte_fallback, ignore_merges, continuing_subword_prefix and end_of_word_suffix are not supported")
	}
	if tj.Normalizer == nil || tj.Normalizer.Type != "NFC" {
		return Vocab{}, fmt.Errorf("normalizer: want NFC (the byte-level tokenizer always applies it)")
	}
	pre, err := qwenPreTokenizer(tj.PreTokenizer)
	if err != nil {
		return Vocab{}, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if tj.Decoder == nil || tj.Decoder.Type != "ByteLevel" {
		return Vocab{}, fmt.Errorf("decoder: want ByteLevel")
	}

	n := 0
	for _, id := range m.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	v := Vocab{
		Model: "gpt2", Pre: pre,
		Tokens: make([]string, n),
		Types:  make([]int32, n),
		BOS:    -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1,
	}
	set := make([]bool, n)
	for s, id := range m.Vocab {
		if id < 0 {
			return Vocab{}, fmt.Errorf("model.vocab[%q] = %d: negative id", s, id)
		}
		if set[id] {
			return Vocab{}, fmt.Errorf("model.vocab: id %d used by %q and %q", id, v.Tokens[id], s)
		}
		v.Tokens[id], v.Types[id], set[id] = s, TypeNormal, true
	}
	for i, a := range tj.AddedTokens {
		if a.ID < 0 {
			return Vocab{}, fmt.Errorf("added_tokens[%d]: negative id %d", i, a.ID)
		}
		if set[a.ID] && v.Tokens[a.ID] != a.Content {
			return Vocab{}, fmt.Errorf("added_tokens[%d]: id %d is %q in model.vocab but %q here", i, a.ID, v.Tokens[a.ID], a.Content)
		}
		v.Tokens[a.ID], set[a.ID] = a.Content, true
		v.Types[a.ID] = TypeUserDefined
		if a.Special {
			v.Types[a.ID] = TypeControl
		}
	}
	for id, ok := range set {
		if !ok {
			return Vocab{}, fmt.Errorf("no token has id %d (ids must be dense)", id)
		}
	}

	v.Merges = make([]string, len(m.Merges))
	for i, raw := range m.Merges {
		var s string
		var pair []string
		var err error
		if len(raw) > 0 && raw[0] == '"' {
			err = json.Unmarshal(raw, &s)
		} else if err = json.Unmarshal(raw, &pair); err == nil && len(pair) == 2 {
			s = pair[0] + " " + pair[1]
		}
		if err != nil || s == "" {
			return Vocab{}, fmt.Errorf("model.merges[%d] = %s: want \"a b\" or [\"a\", \"b\"]", i, raw)
		}
		v.Merges[i] = s
	}
	return v, nil
}

// qwenPreTokenizer accepts the Qwen pre-tokenizer (Split with the Qwen regex,
// then ByteLevel without prefix space or regex) and names it as llama.cpp does.
func qwenPreTokenizer(p *hfComponent) (string, error) {
	if p == nil || p.Type != "Sequence" || len(p.Pretokenizers) != 2 {
		return "", fmt.Errorf("want a Sequence of Split and ByteLevel")
	}
	split, bl := p.Pretokenizers[0], p.Pretokenizers[1]
	if split.Type != "Split" || split.Pattern == nil || split.Pattern.Regex == nil || split.Behavior != "Isolated" || split.Invert {
		return "", fmt.Errorf("want an isolating Split on a regex first")
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || (bl.UseRegex != nil && *bl.UseRegex) {
		return "", fmt.Errorf("want ByteLevel without add_prefix_space and use_regex second")
	}
	switch *split.Pattern.Regex {
	case qwen2Pattern:
		return "qwen2", nil
	case qwen35Pattern:
		return "qwen35", nil
	}
	return "", fmt.Errorf("split regex %q is not one this package implements", *split.Pattern.Regex)
}

func applyTokenizerConfig(v *Vocab, data []byte) error {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	tmpl, err := chatTemplate(c.ChatTemplate)
	if err != nil {
		return fmt.Errorf("chat_template: %w", err)
	}
	v.ChatTemplate = tmpl
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *int32
	}{{"bos_token", c.BOSToken, &v.BOS}, {"eos_token", c.EOSToken, &v.EOS}, {"pad_token", c.PADToken, &v.PAD}, {"unk_token", c.UNKToken, &v.UNK}} {
		text, ok, err := tokenText(f.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if !ok {
			continue
		}
		id := -1
		for i, s := range v.Tokens {
			if s == text {
				id = i
				break
			}
		}
		if id < 0 {
			return fmt.Errorf("%s %q is not in the vocab", f.name, text)
		}
		*f.dst = int32(id)
	}
	if c.AddBOSToken != nil {
		v.AddBOS = *c.AddBOSToken
	}
	if c.AddEOSToken != nil {
		v.AddEOS = *c.AddEOSToken
	}
	return nil
}

// tokenText reads a token field: null, "text" or {"content": "text", ...}.
func tokenText(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, fmt.Errorf("want a string or an object with content, got %s", raw)
	}
	return *obj.Content, true, nil
}

// chatTemplate reads chat_template: a string, or a list of {name, template}
// of which the one named "default" is taken.
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("want a string or a list of {name, template}")
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", fmt.Errorf("no template named default")
}
