package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

func splitWords(p preTokenizer, s string) []string {
	words := []string{}
	for pos := 0; pos < len(s); {
		end := p.nextWord(s, pos)
		if end <= pos {
			panic("nextWord made no progress")
		}
		words = append(words, s[pos:end])
		pos = end
	}
	return words
}

// TestPreTokenizerRegex compares nextWord with the Qwen2 and Qwen3.5
// pre-tokenizer regexes as Python's regex module runs them
// (testdata/pretok/make_pretok.py).
func TestPreTokenizerRegex(t *testing.T) {
	f, err := os.Open("testdata/pretok/pretok.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Scan() // header
	n, bad := 0, 0
	for sc.Scan() {
		var c struct {
			Pre   string   `json:"pre"`
			Text  string   `json:"text"`
			Words []string `json:"words"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		p := preTokenizer{marksAreLetters: c.Pre == "qwen35"}
		if got := splitWords(p, c.Text); !slices.Equal(got, c.Words) {
			if bad++; bad <= 10 {
				t.Errorf("%s %q: got %q, want %q", c.Pre, c.Text, got, c.Words)
			}
		}
	}
	if n < 4000 || bad > 0 {
		t.Errorf("%d of %d splits differ", bad, n)
	}
}

func TestPreTokenizerCases(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"contraction", "it's", []string{"it", "'s"}},
		{"letters take one leading non-letter", " hello\tworld", []string{" hello", "\tworld"}},
		{"digits one by one", "x 123", []string{"x", " ", "1", "2", "3"}},
		{"space run before a word leaves one space", "a   b", []string{"a", "  ", " b"}},
		{"trailing spaces stay together", "a   ", []string{"a", "   "}},
		{"newlines end a whitespace run", "a \n\n b", []string{"a", " \n\n", " b"}},
		{"punctuation takes trailing newlines", "x.\n\ny", []string{"x", ".\n\n", "y"}},
		{"invalid UTF-8 is punctuation", "a\xff\xfeb \xffc", []string{"a", "\xff\xfe", "b", " \xff", "c"}},
		{"invalid UTF-8 leads a word", "\xffc", []string{"\xffc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitWords(preTokenizer{}, tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
