package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// VocabFromGGUF on stories260K.gguf, against two references: the
// tokenizer metadata as the test-only reader of ggufvocab_test.go dumped it
// (tokens, scores, types), and llama.cpp's own tokenization of the golden
// prompts, which holds the defaults a SentencePiece file leaves to the
// reader: BOS 1 first (add_bos) and the space prefix.
func TestVocabFromGGUFStories(t *testing.T) {
	v := storiesVocab(t)
	dump := loadVocabDump(t, "testdata/stories260K-vocab.json")
	if v.Model != "llama" || dump.Model != v.Model || !slices.Equal(v.Tokens, dump.Tokens) || !slices.Equal(v.Scores, dump.Scores) || !slices.Equal(v.Types, dump.TokenType) {
		t.Fatalf("model %q, %d tokens: not the file's tokenizer as dumped (%q, %d tokens)", v.Model, len(v.Tokens), dump.Model, len(dump.Tokens))
	}
	if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != -1 || v.EOT != -1 || !v.AddBOS || v.AddEOS || !v.AddSpacePrefix {
		t.Errorf("specials %+v", struct {
			BOS, EOS, UNK, PAD, EOT        int32
			AddBOS, AddEOS, AddSpacePrefix bool
		}{v.BOS, v.EOS, v.UNK, v.PAD, v.EOT, v.AddBOS, v.AddEOS, v.AddSpacePrefix})
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(storiesGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sc := bufio.NewScanner(g)
	n := 0
	for sc.Scan() {
		var line struct {
			Prompt       string  `json:"prompt"`
			PromptTokens []int32 `json:"prompt_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		n++
		if got := tok.Encode(line.Prompt, v.AddBOS, false); !slices.Equal(got, line.PromptTokens) {
			t.Errorf("Encode(%q) = %v, llama.cpp %v", line.Prompt, got, line.PromptTokens)
		}
	}
	if n != 10 {
		t.Errorf("read %d golden lines, want 10", n)
	}
}
