package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// miniTokenizerJSON builds a small tokenizer.json in the Qwen shape; edit
// changes the decoded document before it is written.
func miniTokenizerJSON(t *testing.T, edit func(doc map[string]any)) string {
	t.Helper()
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["Ġt"] = 256
	vocab["he"] = 257
	doc := map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 258, "content": "<|im_end|>", "special": true},
			map[string]any{"id": 259, "content": "<think>", "special": false},
		},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{"Ġ t", []any{"h", "e"}}},
	}
	if edit != nil {
		edit(doc)
	}
	dir := t.TempDir()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeConfig(t *testing.T, tokenizerJSON, config string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(filepath.Dir(tokenizerJSON), "tokenizer_config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadTokenizerJSON(t *testing.T) {
	path := miniTokenizerJSON(t, nil)
	writeConfig(t, path, `{"bos_token": null, "eos_token": {"content": "<|im_end|>", "special": true},
		"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}], "add_bos_token": false}`)
	v, err := LoadTokenizerJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "gpt2" || v.Pre != "qwen2" || len(v.Tokens) != 260 || v.EOS != 258 || v.BOS != -1 || v.ChatTemplate != "D" {
		t.Errorf("got model %q pre %q, %d tokens, EOS %d BOS %d template %q", v.Model, v.Pre, len(v.Tokens), v.EOS, v.BOS, v.ChatTemplate)
	}
	if !slices.Equal(v.Merges, []string{"Ġ t", "h e"}) {
		t.Errorf("merges %q", v.Merges)
	}
	if v.Types[258] != TypeControl || v.Types[259] != TypeUserDefined || v.Types[256] != TypeNormal {
		t.Errorf("types %v", v.Types[256:])
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode(" the<think><|im_end|>", false, true), []int32{256, 257, 259, 258}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func TestLoadTokenizerJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(doc map[string]any)
		config string
		want   string // in the error
	}{
		{"not BPE", func(d map[string]any) { d["model"].(map[string]any)["type"] = "WordPiece" }, "", "model.type"},
		{"other regex", func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\s+`}
		}, "", "pre_tokenizer"},
		{"no normalizer", func(d map[string]any) { d["normalizer"] = nil }, "", "normalizer"},
		{"hole in ids", func(d map[string]any) { d["added_tokens"].([]any)[1].(map[string]any)["id"] = 300 }, "", "id 259"},
		{"bad merge", func(d map[string]any) { d["model"].(map[string]any)["merges"] = []any{[]any{"a"}} }, "", "model.merges[0]"},
		{"unknown eos", nil, `{"eos_token": "<|nope|>"}`, "eos_token"},
		{"bad template", nil, `{"chat_template": 3}`, "chat_template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := miniTokenizerJSON(t, tc.edit)
			if tc.config != "" {
				writeConfig(t, path, tc.config)
			}
			_, err := LoadTokenizerJSON(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	good := ByteLevelVocab()
	for _, tc := range []struct {
		name string
		edit func(v *Vocab)
		want string
	}{
		{"no tokens", func(v *Vocab) { v.Tokens = nil }, "no tokens"},
		{"unknown model", func(v *Vocab) { v.Model = "bert" }, "bert"},
		{"unknown pre", func(v *Vocab) { v.Pre = "llama3" }, "llama3"},
		{"no merges", func(v *Vocab) { v.Merges = nil }, "merges"},
		{"types length", func(v *Vocab) { v.Types = v.Types[:3] }, "types"},
		{"EOS out of range", func(v *Vocab) { v.EOS = 1 << 20 }, "EOS"},
		{"AddBOS without BOS", func(v *Vocab) { v.AddBOS = true }, "BOS"},
		{"duplicate token", func(v *Vocab) { v.Tokens = append(slices.Clone(v.Tokens[:len(v.Tokens)-1]), "a") }, "both"},
		{"bad byte token", func(v *Vocab) { v.Types = slices.Clone(v.Types); v.Types['a'] = TypeByte }, "<0xNN>"},
		{"llama without scores", func(v *Vocab) { v.Model = "llama" }, "scores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := good
			tc.edit(&v)
			_, err := New(v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
