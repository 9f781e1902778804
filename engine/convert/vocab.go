package convert

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// readVocab builds the tokenizer.* metadata the way llama.cpp's converter
// does for the architecture: a SentencePiece tokenizer.model (llama,
// _set_vocab_sentencepiece) or a byte-level BPE tokenizer.json (the Qwen
// family and llama models without tokenizer.model, _set_vocab_gpt2), plus
// the special tokens and chat template of tokenizer_config.json and
// config.json (gguf-py SpecialVocab). It returns the keys and the
// vocabulary size (config.json vocab_size; the token list is padded to it).
func readVocab(dir string, hp hparams, arch string) ([]kv, int, error) {
	nVocab, err := hp.int("vocab_size")
	if err != nil {
		return nil, 0, err
	}
	spmPath := filepath.Join(dir, "tokenizer.model")
	var v tokenizer.Vocab
	var flags spmFlags
	if _, err := os.Stat(spmPath); err == nil && arch == "llama" {
		if v, err = readSentencePiece(spmPath, nVocab); err != nil {
			return nil, 0, err
		}
		if flags, err = applySPMConfig(dir, &v); err != nil {
			return nil, 0, err
		}
	} else {
		path := filepath.Join(dir, "tokenizer.json")
		if _, err := os.Stat(path); err != nil {
			if arch == "llama" {
				return nil, 0, fmt.Errorf("tokenizer: %s has no tokenizer.model (SentencePiece) and no tokenizer.json", dir)
			}
			return nil, 0, fmt.Errorf("tokenizer: %s has no tokenizer.json", dir)
		}
		if v, err = tokenizer.LoadTokenizerJSON(path); err != nil {
			return nil, 0, fmt.Errorf("tokenizer: %w", err)
		}
		if len(v.Tokens) > nVocab {
			return nil, 0, fmt.Errorf("tokenizer: %s has %d tokens, more than %s vocab_size = %d", path, len(v.Tokens), hp.path, nVocab)
		}
		// get_vocab_base pads the list to vocab_size with unused tokens.
		for i := len(v.Tokens); i < nVocab; i++ {
			v.Tokens = append(v.Tokens, fmt.Sprintf("[PAD%d]", i))
			v.Types = append(v.Types, tokenizer.TypeUnused)
		}
	}
	// config.json's *_token_id fill in what tokenizer_config.json did not set.
	for _, f := range []struct {
		key string
		dst *int32
	}{{"bos_token_id", &v.BOS}, {"eos_token_id", &v.EOS}, {"unk_token_id", &v.UNK}, {"pad_token_id", &v.PAD}} {
		if *f.dst >= 0 || !hp.has(f.key) {
			continue
		}
		id, err := hp.int(f.key)
		if err != nil {
			continue // a list (several EOS ids) or null: llama.cpp ignores it too
		}
		if id < len(v.Tokens) {
			*f.dst = int32(id)
		}
	}
	if v.ChatTemplate == "" {
		if v.ChatTemplate, err = chatTemplateFile(dir); err != nil {
			return nil, 0, err
		}
	}

	meta := []kv{{"tokenizer.ggml.model", v.Model}}
	if v.Pre != "" {
		meta = append(meta, kv{"tokenizer.ggml.pre", v.Pre})
	}
	meta = append(meta, kv{"tokenizer.ggml.tokens", v.Tokens})
	if v.Scores != nil {
		meta = append(meta, kv{"tokenizer.ggml.scores", v.Scores})
	}
	meta = append(meta, kv{"tokenizer.ggml.token_type", v.Types})
	if len(v.Merges) > 0 {
		meta = append(meta, kv{"tokenizer.ggml.merges", v.Merges})
	}
	for _, id := range []struct {
		key string
		id  int32
	}{
		{"tokenizer.ggml.bos_token_id", v.BOS}, {"tokenizer.ggml.eos_token_id", v.EOS},
		{"tokenizer.ggml.unknown_token_id", v.UNK}, {"tokenizer.ggml.padding_token_id", v.PAD},
	} {
		if id.id >= 0 {
			meta = append(meta, kv{id.key, uint32(id.id)})
		}
	}
	// A byte-level vocabulary's flags are always known (LoadTokenizerJSON
	// applied tokenizer_config.json over the gpt2 defaults); a SentencePiece
	// one's only when tokenizer_config.json says, else llama.cpp's defaults
	// (add BOS, add a space prefix) apply at load.
	if v.Model == "gpt2" || flags.addBOS != nil {
		meta = append(meta, kv{"tokenizer.ggml.add_bos_token", v.AddBOS})
	}
	if v.AddEOS || flags.addEOS != nil {
		meta = append(meta, kv{"tokenizer.ggml.add_eos_token", v.AddEOS})
	}
	if flags.addSpacePrefix != nil {
		meta = append(meta, kv{"tokenizer.ggml.add_space_prefix", *flags.addSpacePrefix})
	}
	if v.ChatTemplate != "" {
		meta = append(meta, kv{"tokenizer.chat_template", v.ChatTemplate})
	}
	return meta, nVocab, nil
}

// chatTemplateFile reads chat_template.jinja or chat_template.json, where
// newer checkpoints keep the template ("" when neither exists).
func chatTemplateFile(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return string(data), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	path := filepath.Join(dir, "chat_template.json")
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var ct struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &ct); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return ct.ChatTemplate, nil
}

// readSentencePiece reads a SentencePiece ModelProto (sentencepiece_model
// .proto: field 1 = repeated SentencePiece {1: piece, 2: score, 3: type})
// into the token list llama.cpp's _create_vocab_sentencepiece writes: ids
// past the model's pieces up to nVocab are "[PAD<i>]" with score -10000 and
// type unused. The proto's type numbers are GGUF's token types.
func readSentencePiece(path string, nVocab int) (tokenizer.Vocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tokenizer.Vocab{}, fmt.Errorf("tokenizer: %w", err)
	}
	fail := func(format string, args ...any) (tokenizer.Vocab, error) {
		return tokenizer.Vocab{}, fmt.Errorf("tokenizer %s: "+format, append([]any{path}, args...)...)
	}
	v := tokenizer.Vocab{Model: "llama", Pre: "default", BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1}
	err = protoFields(data, func(field int, wire int, val uint64, b []byte) error {
		if field != 1 || wire != 2 {
			return nil
		}
		piece, score, typ := "", float32(0), int32(tokenizer.TypeNormal)
		havePiece := false
		err := protoFields(b, func(f, w int, val uint64, b []byte) error {
			switch {
			case f == 1 && w == 2:
				piece, havePiece = string(b), true
			case f == 2 && w == 5:
				score = math.Float32frombits(uint32(val))
			case f == 3 && w == 0:
				if val < 1 || val > 6 {
					return fmt.Errorf("piece %d: type %d is not a SentencePiece type (1 to 6)", len(v.Tokens), val)
				}
				typ = int32(val)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !havePiece {
			return fmt.Errorf("piece %d has no text", len(v.Tokens))
		}
		v.Tokens = append(v.Tokens, piece)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
		return nil
	})
	if err != nil {
		return fail("%v", err)
	}
	if len(v.Tokens) == 0 {
		return fail("no pieces: not a SentencePiece model")
	}
	if len(v.Tokens) > nVocab {
		return fail("%d pieces, more than vocab_size = %d", len(v.Tokens), nVocab)
	}
	for i := len(v.Tokens); i < nVocab; i++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("[PAD%d]", i))
		v.Scores = append(v.Scores, -10000)
		v.Types = append(v.Types, tokenizer.TypeUnused)
	}
	return v, nil
}

// protoFields walks the fields of a protobuf message: val holds varint and
// fixed values, b the bytes of length-delimited ones.
func protoFields(data []byte, fn func(field, wire int, val uint64, b []byte) error) error {
	for len(data) > 0 {
		key, n := binary.Uvarint(data)
		if n <= 0 {
			return fmt.Errorf("bad protobuf field key")
		}
		data = data[n:]
		field, wire := int(key>>3), int(key&7)
		var val uint64
		var b []byte
		switch wire {
		case 0:
			val, n = binary.Uvarint(data)
			if n <= 0 {
				return fmt.Errorf("field %d: bad varint", field)
			}
			data = data[n:]
		case 1:
			if len(data) < 8 {
				return fmt.Errorf("field %d: truncated", field)
			}
			val, data = binary.LittleEndian.Uint64(data), data[8:]
		case 2:
			l, n := binary.Uvarint(data)
			if n <= 0 || l > uint64(len(data)-n) {
				return fmt.Errorf("field %d: bad or truncated length", field)
			}
			b, data = data[n:n+int(l)], data[n+int(l):]
		case 5:
			if len(data) < 4 {
				return fmt.Errorf("field %d: truncated", field)
			}
			val, data = uint64(binary.LittleEndian.Uint32(data)), data[4:]
		default:
			return fmt.Errorf("field %d: wire type %d not supported", field, wire)
		}
		if err := fn(field, wire, val, b); err != nil {
			return err
		}
	}
	return nil
}

// spmFlags are the tokenizer_config.json flags that were present.
type spmFlags struct{ addBOS, addEOS, addSpacePrefix *bool }

// applySPMConfig reads tokenizer_config.json beside a SentencePiece model:
// bos/eos/unk/pad tokens by text, add_bos_token, add_eos_token,
// add_prefix_space, chat_template, and added_tokens_decoder entries (which
// llama.cpp marks control or user-defined).
func applySPMConfig(dir string, v *tokenizer.Vocab) (spmFlags, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return spmFlags{}, nil
	}
	if err != nil {
		return spmFlags{}, err
	}
	var c struct {
		AddBOS         *bool           `json:"add_bos_token"`
		AddEOS         *bool           `json:"add_eos_token"`
		AddPrefixSpace *bool           `json:"add_prefix_space"`
		ChatTemplate   json.RawMessage `json:"chat_template"`
		Added          map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return spmFlags{}, fmt.Errorf("tokenizer: %s: %v", path, err)
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(data, &raw)
	for id, a := range c.Added {
		var i int
		if _, err := fmt.Sscanf(id, "%d", &i); err != nil || i < 0 || i >= len(v.Tokens) {
			continue // out of range: llama.cpp warns and skips
		}
		v.Tokens[i], v.Scores[i] = a.Content, -1000
		v.Types[i] = tokenizer.TypeUserDefined
		if a.Special || looksSpecial(a.Content) {
			v.Types[i] = tokenizer.TypeControl
		}
	}
	for _, f := range []struct {
		key string
		dst *int32
	}{{"bos_token", &v.BOS}, {"eos_token", &v.EOS}, {"unk_token", &v.UNK}, {"pad_token", &v.PAD}} {
		text, ok := tokenFieldText(raw[f.key])
		if !ok {
			continue
		}
		for i, s := range v.Tokens {
			if s == text {
				*f.dst = int32(i)
				break
			}
		}
	}
	if c.AddBOS != nil {
		v.AddBOS = *c.AddBOS
	}
	if c.AddEOS != nil {
		v.AddEOS = *c.AddEOS
	}
	var tmpl string
	if json.Unmarshal(c.ChatTemplate, &tmpl) == nil {
		v.ChatTemplate = tmpl
	}
	return spmFlags{c.AddBOS, c.AddEOS, c.AddPrefixSpace}, nil
}

// tokenFieldText reads "text" or {"content": "text"}.
func tokenFieldText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var o struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Content != nil {
		return *o.Content, true
	}
	return "", false
}

// looksSpecial is llama.cpp's does_token_look_special for the common forms.
func looksSpecial(s string) bool {
	n := len(s)
	return (n >= 4 && s[:2] == "<|" && s[n-2:] == "|>") || s == "<pad>" || s == "<mask>"
}
