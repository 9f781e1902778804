package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

var qwen = sync.OnceValues(func() (*Tokenizer, error) {
	v, err := LoadTokenizerJSON("testdata/qwen3/tokenizer.json.gz")
	if err != nil {
		return nil, err
	}
	return New(v)
})

func qwenTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := qwen()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type refCase struct {
	Source string  `json:"source"`
	Text   string  `json:"text"`
	IDs    []int32 `json:"ids"`
}

// qwenReference reads testdata/qwen3/reference.jsonl.gz (see make_reference.mjs).
func qwenReference(t testing.TB) []refCase {
	t.Helper()
	f, err := os.Open("testdata/qwen3/reference.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	var header struct{ Texts, Tokens int }
	var cases []refCase
	for sc.Scan() {
		if header.Texts == 0 {
			if err := json.Unmarshal(sc.Bytes(), &header); err != nil || header.Texts == 0 {
				t.Fatalf("reference header: %v %s", err, sc.Bytes())
			}
			continue
		}
		var c refCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) != header.Texts {
		t.Fatalf("reference has %d texts, header says %d", len(cases), header.Texts)
	}
	return cases
}

func TestQwenVocab(t *testing.T) {
	tok := qwenTokenizer(t)
	v := tok.Vocab()
	if len(v.Tokens) != 151669 || v.Model != "gpt2" || v.Pre != "qwen2" {
		t.Errorf("got %d tokens, model %q, pre %q; want 151669, gpt2, qwen2", len(v.Tokens), v.Model, v.Pre)
	}
	if v.BOS != -1 || v.AddBOS || v.AddEOS || v.Tokens[v.EOS] != "<|im_end|>" || v.Tokens[v.PAD] != "<|endoftext|>" {
		t.Errorf("BOS %d AddBOS %v AddEOS %v EOS %d PAD %d", v.BOS, v.AddBOS, v.AddEOS, v.EOS, v.PAD)
	}
	if !strings.Contains(v.ChatTemplate, "<|im_start|>") {
		t.Errorf("chat template not loaded")
	}
	for _, tc := range []struct {
		text string
		typ  int32
		eog  bool
	}{
		{"<|im_end|>", TypeControl, true},
		{"<|endoftext|>", TypeControl, true},
		{"<|im_start|>", TypeControl, false},
		{"<think>", TypeUserDefined, false},
		{"<tool_call>", TypeUserDefined, false},
		{"<|file_sep|>", TypeControl, true}, // user-defined in tokenizer.json; llama.cpp makes it control and EOG
		{"Hello", TypeNormal, false},
	} {
		id := tok.toID[tc.text]
		if tok.types[id] != tc.typ || tok.IsEOG(id) != tc.eog {
			t.Errorf("%s: type %d IsEOG %v, want %d %v", tc.text, tok.types[id], tok.IsEOG(id), tc.typ, tc.eog)
		}
	}
}

// TestQwenReference requires the ids of the npm reference tokenizer on every
// text of the trace, the hard cases and the random strings.
func TestQwenReference(t *testing.T) {
	tok := qwenTokenizer(t)
	cases := qwenReference(t)
	tokens, bad := 0, 0
	for _, c := range cases {
		tokens += len(c.IDs)
		got := tok.Encode(c.Text, true, true)
		if !slices.Equal(got, c.IDs) {
			bad++
			if bad <= 10 {
				i := 0
				for i < len(got) && i < len(c.IDs) && got[i] == c.IDs[i] {
					i++
				}
				t.Errorf("%s: %q\nfirst difference at token %d: got %v, want %v", c.Source, abbrev(c.Text, 200),
					i, got[i:min(i+8, len(got))], c.IDs[i:min(i+8, len(c.IDs))])
			}
			continue
		}
		// The way back gives the text again when it is in NFC.
		if got := tok.Decode(c.IDs); norm.NFC.IsNormalString(c.Text) && got != c.Text {
			t.Errorf("%s: Decode(Encode(%q)) = %q", c.Source, abbrev(c.Text, 200), abbrev(got, 200))
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ", bad, len(cases))
	}
	t.Logf("%d texts, %d tokens identical to the reference", len(cases)-bad, tokens)
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
