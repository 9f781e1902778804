package web

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type tokenGolden struct {
	Prompt       string  `json:"prompt"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
	Text         string  `json:"text"`
}

func firstGolden(t *testing.T, path string) tokenGolden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	sc.Scan()
	var g tokenGolden
	if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTokenizeDetokenize checks llama.cpp's /tokenize and /detokenize
// against llama.cpp's own ids and text.
func TestTokenizeDetokenize(t *testing.T) {
	cases := []struct {
		name   string
		server func(*testing.T, int, Options) *testServer
		golden string
		bos    bool
	}{
		{"stories260K", storiesServer, storiesGolden, true},
		{"qwen35-small", qwen35Server, qwen35SmallGolden, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.server(t, 2, Options{})
			g := firstGolden(t, tc.golden)
			body, _ := json.Marshal(map[string]any{"content": g.Prompt, "add_special": tc.bos})
			status, _, raw := post(t, ts.URL+"/tokenize", string(body))
			var tok struct {
				Tokens []int32 `json:"tokens"`
			}
			if status != 200 || json.Unmarshal(raw, &tok) != nil {
				t.Fatalf("%d %s", status, raw)
			}
			if !equalIDs(tok.Tokens, g.PromptTokens) {
				t.Errorf("tokens %v, llama.cpp %v", tok.Tokens, g.PromptTokens)
			}
			body, _ = json.Marshal(map[string]any{"content": g.Prompt, "with_pieces": true})
			status, _, raw = post(t, ts.URL+"/tokenize", string(body))
			var pieces struct {
				Tokens []struct {
					ID    int32 `json:"id"`
					Piece any   `json:"piece"`
				} `json:"tokens"`
			}
			if status != 200 || json.Unmarshal(raw, &pieces) != nil || len(pieces.Tokens) == 0 {
				t.Fatalf("with_pieces: %d %s", status, raw)
			}
			body, _ = json.Marshal(map[string]any{"tokens": g.Tokens})
			status, _, raw = post(t, ts.URL+"/detokenize", string(body))
			var detok struct {
				Content string `json:"content"`
			}
			if status != 200 || json.Unmarshal(raw, &detok) != nil {
				t.Fatalf("%d %s", status, raw)
			}
			if detok.Content != g.Text {
				t.Errorf("detokenize %q, llama.cpp %q", detok.Content, g.Text)
			}
			status, _, raw = post(t, ts.URL+"/detokenize", `{"tokens":[1,-5]}`)
			if status != 400 {
				t.Errorf("bad id: %d %s", status, raw)
			}
			checkErrorShape(t, raw)
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestApplyTemplateGoldens: /apply-template on the Qwen3-tokenizer model
// gives, byte for byte, what Hugging Face's apply_chat_template gave for
// MLPerf conversations (engine/chat/testdata/render, made by its reference).
func TestApplyTemplateGoldens(t *testing.T) {
	ts := qwen35Server(t, 2, Options{})
	reqs, _ := filepath.Glob(chatRenderGoldens)
	if len(reqs) == 0 {
		t.Fatal("no requests")
	}
	for _, path := range reqs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(path, ".request.json") + ".qwen3.txt")
		if err != nil {
			t.Fatal(err)
		}
		// render.py's format names the template variables "kwargs".
		var req map[string]json.RawMessage
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		if kw, ok := req["kwargs"]; ok {
			req["chat_template_kwargs"] = kw
			delete(req, "kwargs")
		}
		body, _ := json.Marshal(req)
		status, _, raw := post(t, ts.URL+"/apply-template", string(body))
		var got struct {
			Prompt string `json:"prompt"`
		}
		if status != 200 || json.Unmarshal(raw, &got) != nil {
			t.Fatalf("%s: %d %s", path, status, raw)
		}
		if got.Prompt != string(want) {
			t.Errorf("%s: rendered prompt differs from Hugging Face's (%d vs %d bytes)", path, len(got.Prompt), len(want))
		}
	}
	status, _, raw := post(t, ts.URL+"/apply-template", `{"messages":[{"role":"bogus","content":"x"}]}`)
	if status != 400 {
		t.Errorf("bad role: %d %s", status, raw)
	}
}
