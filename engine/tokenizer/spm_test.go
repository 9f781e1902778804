package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
)

// The stories260K model and llama.cpp's goldens for it, kept once for the
// whole repository.
const (
	storiesGGUF   = "../../testdata/models/stories260K.gguf"
	storiesGolden = "../../testdata/golden/stories260K-greedy64.jsonl"
)

// storiesVocab is stories260K's tokenizer as VocabFromGGUF reads it.
func storiesVocab(t testing.TB) Vocab {
	t.Helper()
	f, err := gguf.Open(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func storiesTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := New(storiesVocab(t))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestStoriesGolden checks the prompt tokens llama.cpp produced for the ten
// prompts of the stories260K goldens, and the way back.
func TestStoriesGolden(t *testing.T) {
	tok := storiesTokenizer(t)
	f, err := os.Open(storiesGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var g struct {
			Prompt       string  `json:"prompt"`
			PromptTokens []int32 `json:"prompt_tokens"`
			Tokens       []int32 `json:"tokens"`
			Text         string  `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		n++
		if got := tok.Encode(g.Prompt, true, false); !slices.Equal(got, g.PromptTokens) {
			t.Errorf("Encode(%q) = %v, want %v", g.Prompt, got, g.PromptTokens)
		}
		if got := tok.Encode(g.Prompt, true, true); !slices.Equal(got, g.PromptTokens) {
			t.Errorf("Encode(%q, parseSpecial) = %v, want %v", g.Prompt, got, g.PromptTokens)
		}
		if got := tok.Decode(g.PromptTokens[1:]); got != g.Prompt {
			t.Errorf("Decode(%v) = %q, want %q", g.PromptTokens[1:], got, g.Prompt)
		}
		// The golden text is llama.cpp's detokenization of the continuation
		// alone, which drops the first token's leading space as Decode does.
		if got := tok.Decode(g.Tokens); got != g.Text {
			t.Errorf("Decode(%v) = %q, want %q", g.Tokens, got, g.Text)
		}
		// Streaming the pieces gives the same text, less that rule.
		var text []byte
		for _, id := range g.Tokens {
			text = append(text, tok.Piece(id)...)
		}
		if got := string(text); got != g.Text && got != " "+g.Text {
			t.Errorf("pieces of %v = %q, want %q", g.Tokens, got, g.Text)
		}
	}
	if n != 10 {
		t.Errorf("read %d golden lines, want 10", n)
	}
}

func TestStoriesEncode(t *testing.T) {
	tok := storiesTokenizer(t)
	for _, tc := range []struct {
		name                     string
		text                     string
		addSpecial, parseSpecial bool
		check                    func(t *testing.T, ids []int32)
	}{
		{"empty", "", false, false, func(t *testing.T, ids []int32) {
			if len(ids) != 0 {
				t.Errorf("got %v, want nothing", ids)
			}
		}},
		{"empty with BOS", "", true, false, func(t *testing.T, ids []int32) {
			if !slices.Equal(ids, []int32{1}) {
				t.Errorf("got %v, want [1]", ids)
			}
		}},
		{"byte fallback", "日", false, false, func(t *testing.T, ids []int32) {
			// "▁" is a token; 日 (E6 97 A5) is not, so it becomes byte tokens.
			if _, ok := tok.toID["日"]; ok {
				t.Fatal("日 is a token; pick another character")
			}
			want := []int32{tok.toID["▁"], tok.toID["<0xE6>"], tok.toID["<0x97>"], tok.toID["<0xA5>"]}
			if !slices.Equal(ids, want) {
				t.Errorf("got %v, want %v", ids, want)
			}
		}},
		{"special not parsed", "<s>", false, false, func(t *testing.T, ids []int32) {
			if slices.Contains(ids, 1) {
				t.Errorf("got %v: <s> became BOS without parseSpecial", ids)
			}
		}},
		{"special parsed", "a</s>b", false, true, func(t *testing.T, ids []int32) {
			// The fragment after a special token gets its own space prefix.
			want := append(append(tok.Encode("a", false, false), 2), tok.Encode("b", false, false)...)
			if !slices.Equal(ids, want) {
				t.Errorf("got %v, want %v", ids, want)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, tok.Encode(tc.text, tc.addSpecial, tc.parseSpecial))
		})
	}
}

func TestStoriesRoundTrip(t *testing.T) {
	tok := storiesTokenizer(t)
	for _, s := range []string{
		"Once upon a time", "  two leading spaces", "tabs\tand\nnewlines\n", "ünïcödé 日本語 🙂",
		"trailing space ", "x", "Lily's mom said, \"Let's go!\"",
	} {
		if got := tok.Decode(tok.Encode(s, false, false)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
	if !tok.IsEOG(2) || tok.IsEOG(1) || tok.IsEOG(0) {
		t.Errorf("IsEOG: want only </s> (2)")
	}
	for id, want := range map[int32]string{1: "<s>", 2: "</s>", 0: "<unk>", 3 + 'A': "A"} {
		if got := string(tok.Piece(id)); got != want {
			t.Errorf("Piece(%d) = %q, want %q", id, got, want)
		}
	}
}
