package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.request.json (then make the renders with the command in testdata/render/README.md)")

const qwenDir = "../engine/tokenizer/testdata/qwen3"

// goldenTurns are the requests whose renders are checked against
// transformers' Jinja2: the first three of a conversation, the first turn of
// another (its own task text), tool rows that answer two parallel calls,
// and the last, longest request of a conversation.
var goldenTurns = []struct {
	name       string
	conv, turn int // conversation and request index
}{
	{"c00-r00", 0, 0},
	{"c00-r01", 0, 1},
	{"c00-r02", 0, 2},
	{"c01-r00", 1, 0},
	{"c06-r01", 6, 1},
	{"c09-r02", 9, 2},
	{"c09-r26", 9, 26},
}

var (
	traceOnce sync.Once
	trace     *Trace
	traceErr  error
)

func loadTrace(t testing.TB) *Trace {
	t.Helper()
	traceOnce.Do(func() { trace, traceErr = LoadTrace(tracePath) })
	if traceErr != nil {
		t.Fatal(traceErr)
	}
	return trace
}

var (
	counterOnce sync.Once
	counter     *TokenCounter
	counterErr  error
)

// qwenCounter is the Qwen3 tokenizer and template, reasoning off.
func qwenCounter(t testing.TB) *TokenCounter {
	t.Helper()
	counterOnce.Do(func() { counter, counterErr = LoadTokenCounter(filepath.Join(qwenDir, "tokenizer.json.gz"), false) })
	if counterErr != nil {
		t.Fatal(counterErr)
	}
	return counter
}

// renderRequest is render.py's input: the messages and tools of the body we
// send, and the template arguments a reasoning-off server uses.
type renderRequest struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              map[string]any  `json:"kwargs"`
}

func goldenBody(t *testing.T, turn Turn) []byte {
	t.Helper()
	off := false
	body, err := ChatBody(turn.Messages, turn.Tools, RequestOptions{Model: "m", Seed: 42, MaxTokens: 1024, EnableThinking: &off})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestRequestRendersMatchTransformers: the body the replay sends, read back
// the way a server reads it (chat.Request's JSON decoding) and rendered with
// the Qwen3 template, gives byte for byte what Hugging Face's Jinja2
// rendering (shared/tools/chatref/render.py) gives for the same messages and
// tools; and the client-side token counter renders the same text.
func TestRequestRendersMatchTransformers(t *testing.T) {
	tr := loadTrace(t)
	cfgJSON, err := os.ReadFile(filepath.Join(qwenDir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := chat.ParseTokenizerConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.NewTemplate(tc.ChatTemplate, tc.BOS, tc.EOS)
	if err != nil {
		t.Fatal(err)
	}
	c := qwenCounter(t)
	for _, g := range goldenTurns {
		t.Run(g.name, func(t *testing.T) {
			turn := tr.Conversations[g.conv].Requests[g.turn]
			body := goldenBody(t, turn)
			var sent struct {
				Messages json.RawMessage `json:"messages"`
				Tools    json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatal(err)
			}
			reqJSON, err := json.MarshalIndent(renderRequest{sent.Messages, sent.Tools, true, map[string]any{"enable_thinking": false}}, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			reqPath := filepath.Join("testdata/render", g.name+".request.json")
			if *update {
				if err := os.WriteFile(reqPath, append(reqJSON, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			onDisk, err := os.ReadFile(reqPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bytes.TrimSpace(onDisk), reqJSON) {
				t.Fatalf("%s is stale: rerun with -update and remake the renders", reqPath)
			}
			want, err := os.ReadFile(filepath.Join("testdata/render", g.name+".txt"))
			if err != nil {
				t.Fatal(err)
			}

			var req chat.Request
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(req)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("render of the sent body differs from transformers' at byte %d:\n got ...%q\nwant ...%q", diffAt(got, string(want)), around(got, diffAt(got, string(want))), around(string(want), diffAt(got, string(want))))
			}
			ids, err := c.Prompt(turn.Messages, turn.Tools)
			if err != nil {
				t.Fatal(err)
			}
			if back := c.tok.Decode(ids); back != string(want) {
				t.Fatalf("the token counter's prompt decodes to a different text (first difference at byte %d)", diffAt(back, string(want)))
			}
		})
	}
}

func diffAt(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func around(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

// TestChatBodyFields checks the wire settings of a replay request against the
// MLPerf run's: streamed with usage, temperature 0, seed 42,
// max_completion_tokens, the conversation's tools verbatim, no tool_choice,
// and the extensions only when asked.
func TestChatBodyFields(t *testing.T) {
	tr := loadTrace(t)
	turn := tr.Conversations[0].Requests[1]
	off := false
	tests := []struct {
		name string
		opts RequestOptions
		want map[string]any
		none []string
	}{
		{"mlperf", RequestOptions{Model: "qwen", Seed: 42, MaxTokens: 1024},
			map[string]any{"model": "qwen", "stream": true, "temperature": 0.0, "seed": 42.0, "max_completion_tokens": 1024.0,
				"stream_options": map[string]any{"include_usage": true}},
			[]string{"tool_choice", "ignore_eos", "chat_template_kwargs"}},
		{"from trace, reasoning off", RequestOptions{Model: "qwen", Seed: 42, MaxTokens: 37, IgnoreEOS: true, EnableThinking: &off},
			map[string]any{"max_completion_tokens": 37.0, "ignore_eos": true, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			[]string{"tool_choice"}},
		{"bfcl", RequestOptions{Model: "qwen", MaxTokens: 1024, ToolChoice: "auto"},
			map[string]any{"tool_choice": "auto"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, err := ChatBody(turn.Messages, turn.Tools, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
			for _, k := range tc.none {
				if _, ok := got[k]; ok {
					t.Errorf("%s sent, want absent", k)
				}
			}
			var raw struct {
				Tools []json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(body, &raw); err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, turn.Tools[0]); err != nil {
				t.Fatal(err)
			}
			if len(raw.Tools) != len(turn.Tools) || !bytes.Equal(raw.Tools[0], want.Bytes()) {
				t.Errorf("tools not sent as recorded (same keys in the same order): %s", raw.Tools)
			}
			if !strings.Contains(string(body), `"content":null,"reasoning_content":`) {
				t.Errorf("the recorded assistant message is not sent with content null and its reasoning")
			}
		})
	}
}

// An answer cut by max_tokens inside a tool call (finish_reason "length")
// has arguments that are not JSON: it is counted, as an empty object plus
// the text written, instead of failing the run.
func TestAnswerCutToolCall(t *testing.T) {
	c := qwenCounter(t)
	call := func(args string) chat.Message {
		return chat.Message{Role: "assistant", Content: chat.TextContent(""), ToolCalls: []chat.ToolCall{
			{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "bash", Arguments: args}}}}
	}
	empty, err := c.Answer(call("{}"))
	if err != nil {
		t.Fatal(err)
	}
	prev := empty
	for _, cut := range []string{`{"command": "ls`, `{"command": "ls -la /testbed/django/db/mod`} {
		m := call(cut)
		n, err := c.Answer(m)
		if err != nil {
			t.Fatalf("%q: %v", cut, err)
		}
		want := empty + len(c.tok.Encode(cut, false, false)) - len(c.tok.Encode("{}", false, false))
		if n != want || n <= prev {
			t.Errorf("%q: %d tokens, want %d (more than %d)", cut, n, want, prev)
		}
		if m.ToolCalls[0].Function.Arguments != cut {
			t.Errorf("the caller's message changed: %q", m.ToolCalls[0].Function.Arguments)
		}
		prev = n
	}
}
