package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
	"github.com/edgellmd/edgellmd/engine/turn"
	"github.com/edgellmd/edgellmd/engine/turn/turntest"
)

// The tests here stream known model output through the real server: the
// text is tokenized by the real Qwen3 tokenizer and each token's bytes are
// emitted the way the engine emits them; the prompt side (template,
// tokenization) and the output side (UTF-8, stop strings, engine/chat's
// parser, SSE) are the production code; the client is openai-go.

func qwen3Tokenizer(t *testing.T) *tokenizer.Tokenizer { return turntest.Qwen3Tokenizer(t) }

// qwenTemplate is Qwen3's template (JSON tool calls) or Qwen3.5's (XML).
func qwenTemplate(t *testing.T, model string) *chat.Template { return turntest.QwenTemplate(t, model) }

// scriptedSource plays the model: call i of a request emits the tokens of
// turns[i] (the answer's text, or its continuation after forced markup),
// then the end-of-generation token, keeping Generate's contract: MaxTokens,
// ErrStop ends with "stop", a cancelled ctx ends with its error.
type scriptedSource struct {
	tok   *tokenizer.Tokenizer
	turns []string

	// pauseAt, when > 0, holds the first turn before the token that starts
	// at or after this byte offset until resume is closed (or 10 s pass,
	// which sets timedOut).
	pauseAt  int
	resume   chan struct{}
	timedOut bool

	mu    sync.Mutex
	calls []engine.Request
	res   []engine.Result
}

func (s *scriptedSource) generate(ctx context.Context, req engine.Request, emit func(engine.Token) error) (engine.Result, error) {
	s.mu.Lock()
	turn := len(s.calls)
	s.calls = append(s.calls, req)
	s.mu.Unlock()
	res := engine.Result{Prompt: req.Prompt, FinishReason: "length"}
	defer func() {
		s.mu.Lock()
		s.res = append(s.res, res)
		s.mu.Unlock()
	}()
	if req.OnPrefix != nil { // as the engine does: nothing is cached here
		req.OnPrefix(0)
	}
	ids := s.tok.Encode(s.turns[turn], false, true)
	ids = append(ids, s.tok.Vocab().EOS)
	offset := 0
	for _, id := range ids {
		if req.MaxTokens > 0 && len(res.Tokens) == req.MaxTokens {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if turn == 0 && s.pauseAt > 0 && offset >= s.pauseAt {
			s.pauseAt = 0
			select {
			case <-s.resume:
			case <-time.After(10 * time.Second):
				s.timedOut = true
			}
		}
		res.Tokens = append(res.Tokens, id)
		if s.tok.IsEOG(id) {
			res.FinishReason = "stop"
			return res, nil
		}
		piece := s.tok.Piece(id)
		offset += len(piece)
		if err := emit(engine.Token{ID: id, Piece: piece}); err != nil {
			if errors.Is(err, engine.ErrStop) {
				res.FinishReason = "stop"
				return res, nil
			}
			return res, err
		}
	}
	return res, nil
}

// scriptedServer serves the API over src with the given template.
func scriptedServer(t *testing.T, tpl *chat.Template, src *scriptedSource) *testServer {
	t.Helper()
	logs := &logBuffer{}
	api, err := newServer(Options{ModelName: "test-model", Template: tpl, Log: zerolog.New(logs)}, src.tok, 40960, src.generate)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: httptest.NewServer(api), api: api, logs: logs}
	t.Cleanup(ts.Close)
	return ts
}

// recordedCall is one line of testdata/toolcalls/*.jsonl (see its README).
type recordedCall struct {
	ID               string            `json:"id"`
	Tools            []json.RawMessage `json:"tools"`
	StartInReasoning bool              `json:"start_in_reasoning"`
	Text             string            `json:"text"`
	Want             struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCalls        []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	} `json:"want"`
}

func loadRecordedCalls(t *testing.T, model string) []recordedCall {
	t.Helper()
	f, err := os.Open("testdata/toolcalls/" + model + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordedCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r recordedCall
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no records")
	}
	return out
}

// toolParams builds the chat request of a record: one user message, the
// record's tools, thinking on or off as the record was rendered.
func toolParams(t *testing.T, r recordedCall) (openai.ChatCompletionNewParams, []option.RequestOption) {
	t.Helper()
	p := userChat("Please fix the failing test in this repository.")
	for _, raw := range r.Tools {
		var tool openai.ChatCompletionFunctionToolParam
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionToolUnionParam{OfFunction: &tool})
	}
	thinking := !strings.HasSuffix(r.ID, ":nothink")
	return p, []option.RequestOption{option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": thinking})}
}

// reasoningOf reads the reasoning_content extension field of a delta.
func reasoningOf(t *testing.T, d openai.ChatCompletionChunkChoiceDelta) string {
	var ext struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(d.RawJSON()), &ext); err != nil {
		t.Fatalf("delta %s: %v", d.RawJSON(), err)
	}
	return ext.ReasoningContent
}

// TestStreamedToolCallsEndToEnd: the MLPerf trace's recorded assistant
// tool calls, written as each model writes them, stream through tokenizer
// → parser → SSE → openai-go's accumulator and come out equal to the
// recorded calls; the first call's id and name reach the client before
// the generation goes past the middle of its arguments.
func TestStreamedToolCallsEndToEnd(t *testing.T) {
	tok := qwen3Tokenizer(t)
	for _, model := range []string{"qwen3", "qwen35"} {
		tpl := qwenTemplate(t, model)
		for _, r := range loadRecordedCalls(t, model) {
			name := model + "/" + r.ID
			firstArgs := strings.Index(r.Text, `"arguments"`)
			if model == "qwen35" {
				firstArgs = strings.Index(r.Text, "<parameter=")
			}
			src := &scriptedSource{tok: tok, turns: []string{r.Text}, resume: make(chan struct{}), pauseAt: firstArgs + 20}
			ts := scriptedServer(t, tpl, src)
			p, opts := toolParams(t, r)
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			c := ts.client()
			stream := c.Chat.Completions.NewStreaming(context.Background(), p, opts...)
			var acc openai.ChatCompletionAccumulator
			var reasoning strings.Builder
			seen := map[int64]int{} // tool-call chunks per call index
			resumed := false
			for stream.Next() {
				ch := stream.Current()
				if !acc.AddChunk(ch) {
					t.Fatalf("%s: the accumulator refused a chunk", name)
				}
				for _, c := range ch.Choices {
					reasoning.WriteString(reasoningOf(t, c.Delta))
					for _, tc := range c.Delta.ToolCalls {
						first := seen[tc.Index] == 0
						seen[tc.Index]++
						if first != (tc.ID != "") || first != (tc.Function.Name != "") || first != (tc.Type == "function") {
							t.Errorf("%s: call %d chunk %d: id %q type %q name %q (id, type and name come first and once)", name, tc.Index, seen[tc.Index], tc.ID, tc.Type, tc.Function.Name)
						}
						if !resumed && tc.Function.Name != "" {
							resumed = true
							close(src.resume)
						}
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if src.timedOut {
				t.Errorf("%s: the first call's name had not reached the client while its arguments were being generated", name)
			}
			msg := acc.Choices[0].Message
			if len(msg.ToolCalls) != len(r.Want.ToolCalls) {
				t.Fatalf("%s: %d calls, want %d", name, len(msg.ToolCalls), len(r.Want.ToolCalls))
			}
			ids := map[string]bool{}
			for i, want := range r.Want.ToolCalls {
				got := msg.ToolCalls[i]
				if got.Function.Name != want.Name || got.Function.Arguments != want.Arguments {
					t.Errorf("%s: call %d: %s(%s), want %s(%s)", name, i, got.Function.Name, got.Function.Arguments, want.Name, want.Arguments)
				}
				if got.ID == "" || ids[got.ID] || got.Type != "function" {
					t.Errorf("%s: call %d: id %q type %q", name, i, got.ID, got.Type)
				}
				ids[got.ID] = true
				if seen[int64(i)] < 2 {
					t.Errorf("%s: call %d arrived in %d chunk(s): its arguments were not streamed", name, i, seen[int64(i)])
				}
			}
			if msg.Content != r.Want.Content || reasoning.String() != r.Want.ReasoningContent {
				t.Errorf("%s: content %q reasoning %q, want %q %q", name, msg.Content, reasoning.String(), r.Want.Content, r.Want.ReasoningContent)
			}
			if acc.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("%s: finish %q", name, acc.Choices[0].FinishReason)
			}
			if want := int64(len(src.res[0].Tokens)); acc.Usage.CompletionTokens != want {
				t.Errorf("%s: completion tokens %d, generated %d", name, acc.Usage.CompletionTokens, want)
			}

			// The same output, not streamed.
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
			src2 := &scriptedSource{tok: tok, turns: []string{r.Text}}
			ts2 := scriptedServer(t, tpl, src2)
			c2 := ts2.client()
			whole, err := c2.Chat.Completions.New(context.Background(), p, opts...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wm := whole.Choices[0].Message
			if len(wm.ToolCalls) != len(msg.ToolCalls) || whole.Choices[0].FinishReason != "tool_calls" || wm.JSON.Content.Raw() != "null" {
				t.Errorf("%s: non-streamed: %d calls, finish %q, content %s", name, len(wm.ToolCalls), whole.Choices[0].FinishReason, wm.JSON.Content.Raw())
			}
			for i := range wm.ToolCalls {
				if f, g := wm.ToolCalls[i].Function, msg.ToolCalls[i].Function; f.Name != g.Name || f.Arguments != g.Arguments {
					t.Errorf("%s: non-streamed call %d differs: %+v", name, i, wm.ToolCalls[i].Function)
				}
			}
			var rc struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			json.Unmarshal([]byte(wm.RawJSON()), &rc)
			if rc.ReasoningContent != r.Want.ReasoningContent {
				t.Errorf("%s: non-streamed reasoning %q", name, rc.ReasoningContent)
			}
		}
	}
}

// TestStreamedUTF8 streams text whose byte-level tokens split characters:
// every chunk is whole UTF-8 and together they are the text.
func TestStreamedUTF8(t *testing.T) {
	tok := qwen3Tokenizer(t)
	text := "Voilà: 日本語のテキスト, ελληνικά, emoji 🎉🚀🧑‍🔬 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 done."
	split := false
	for _, id := range tok.Encode(text, false, true) {
		split = split || !utf8.Valid(tok.Piece(id))
	}
	if !split {
		t.Fatal("no token splits a character: the test would prove nothing")
	}
	for _, endpoint := range []string{"/v1/chat/completions", "/v1/completions"} {
		src := &scriptedSource{tok: tok, turns: []string{text}}
		ts := scriptedServer(t, qwenTemplate(t, "qwen3"), src)
		body := `{"messages":[{"role":"user","content":"hi"}],"stream":true}`
		if endpoint == "/v1/completions" {
			body = `{"prompt":"hi","stream":true,"max_tokens":500}`
		}
		status, _, raw := post(t, ts.URL+endpoint, body)
		if status != 200 {
			t.Fatalf("%s: %d %s", endpoint, status, raw)
		}
		var joined strings.Builder
		n := 0
		for _, ev := range sseEvents(t, raw) {
			if ev == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Text  string `json:"text"`
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.Choices {
				s := ch.Delta.Content + ch.Text
				if strings.ContainsRune(s, utf8.RuneError) {
					t.Errorf("%s: chunk %q holds U+FFFD: a character was split", endpoint, s)
				}
				if s != "" {
					n++
				}
				joined.WriteString(s)
			}
		}
		if joined.String() != text {
			t.Errorf("%s: joined %q, want %q", endpoint, joined.String(), text)
		}
		if n < 10 {
			t.Errorf("%s: %d chunks: not streamed", endpoint, n)
		}
	}
}

// forcedCase is one tool_choice scenario played by scripted output.
type forcedCase struct {
	name   string
	model  string
	body   map[string]any // extra request fields
	turns  []string
	prompt func(t *testing.T, src *scriptedSource) // checks the prompts the engine got

	wantReasoning string
	wantContent   string
	wantCalls     []string // "name(arguments)"
	wantFinish    string
}

func TestToolChoice(t *testing.T) {
	tok := qwen3Tokenizer(t)
	enc := func(s string) []int32 { return tok.Encode(s, false, true) }
	// continues checks that call 1's prompt is call 0's prompt, then the
	// tokens kept from call 0, then the forced markup.
	continues := func(markup string) func(*testing.T, *scriptedSource) {
		return func(t *testing.T, src *scriptedSource) {
			if len(src.calls) != 2 {
				t.Fatalf("%d engine calls, want 2", len(src.calls))
			}
			want := append(append(slices.Clone(src.calls[0].Prompt), src.res[0].Tokens...), enc(markup)...)
			if !slices.Equal(src.calls[1].Prompt, want) {
				t.Errorf("second prompt ends %q, want %q", tok.Decode(src.calls[1].Prompt[len(src.calls[0].Prompt):]), tok.Decode(want[len(src.calls[0].Prompt):]))
			}
		}
	}
	forcedFromStart := func(markup string) func(*testing.T, *scriptedSource) {
		return func(t *testing.T, src *scriptedSource) {
			last := src.calls[len(src.calls)-1].Prompt
			if m := enc(markup); !slices.Equal(last[len(last)-len(m):], m) {
				t.Errorf("the prompt does not end with the forced %q: %q", markup, tok.Decode(last[max(0, len(last)-20):]))
			}
		}
	}
	jsonCall := "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
	cases := []forcedCase{
		{name: "required, Qwen3 reasons first", model: "qwen3", body: map[string]any{"tool_choice": "required"},
			turns:  []string{"<think>\nI should list the files.\n</think>\n\nI will not call anything.", "{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
			prompt: continues("\n\n<tool_call>\n"), wantReasoning: "I should list the files.", wantCalls: []string{`bash({"command": "ls"})`}, wantFinish: "tool_calls"},
		{name: "required, Qwen3 answers without reasoning", model: "qwen3", body: map[string]any{"tool_choice": "required"},
			turns:  []string{"Sure, here is the answer.", "{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
			prompt: forcedFromStart("<tool_call>\n"), wantCalls: []string{`bash({"command": "ls"})`}, wantFinish: "tool_calls"},
		{name: "required, thinking off", model: "qwen3", body: map[string]any{"tool_choice": "required", "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:  []string{"{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"},
			prompt: forcedFromStart("<tool_call>\n"), wantCalls: []string{`bash({"command": "ls"})`}, wantFinish: "tool_calls"},
		{name: "named, Qwen3", model: "qwen3", body: map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "python"}}, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:  []string{"{\"code\": \"print(1)\"}}\n</tool_call>\n" + jsonCall},
			prompt: forcedFromStart("<tool_call>\n{\"name\": \"python\", \"arguments\": "), wantCalls: []string{`python({"code": "print(1)"})`}, wantFinish: "tool_calls"},
		{name: "named, Qwen3.5 reasons first, one call only", model: "qwen35", body: map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}},
			turns: []string{"Let me look at the files.\n</think>\n\nNo.",
				"<parameter=command>\nls -la\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=python>\n<parameter=code>\n1\n</parameter>\n</function>\n</tool_call>"},
			prompt: continues("\n\n<tool_call>\n<function=bash>\n"), wantReasoning: "Let me look at the files.", wantCalls: []string{`bash({"command": "ls -la"})`}, wantFinish: "tool_calls"},
		{name: "parallel_tool_calls false", model: "qwen3", body: map[string]any{"parallel_tool_calls": false, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:     []string{jsonCall + "\n" + strings.Replace(jsonCall, "ls", "pwd", 1)},
			wantCalls: []string{`bash({"command": "ls"})`}, wantFinish: "tool_calls"},
		{name: "parallel calls by default", model: "qwen3", body: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:     []string{jsonCall + "\n" + strings.Replace(jsonCall, "ls", "pwd", 1)},
			wantCalls: []string{`bash({"command": "ls"})`, `bash({"command": "pwd"})`}, wantFinish: "tool_calls"},
		{name: "none ends at a call", model: "qwen3", body: map[string]any{"tool_choice": "none", "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:       []string{"I would run ls.\n" + jsonCall},
			wantContent: "I would run ls.\n", wantFinish: "stop"}, // content as generated, up to the call
		{name: "no tools: markup is content", model: "qwen3", body: map[string]any{"tools": nil, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			turns:       []string{"Text " + jsonCall},
			wantContent: "Text " + jsonCall, wantFinish: "stop"},
		{name: "required, budget spent on reasoning", model: "qwen3", body: map[string]any{"tool_choice": "required", "max_tokens": 5},
			turns:         []string{"<think>\nThis reasoning is longer than five tokens.\n</think>\n\n", "unused"},
			wantReasoning: "This reasoning is", wantFinish: "length"},
	}
	tools := []any{
		json.RawMessage(bashTool),
		json.RawMessage(`{"type":"function","function":{"name":"python","parameters":{"type":"object","properties":{"code":{"type":"string"}}}}}`),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				src := &scriptedSource{tok: tok, turns: tc.turns}
				ts := scriptedServer(t, qwenTemplate(t, tc.model), src)
				body := map[string]any{"model": "test-model", "messages": []any{map[string]any{"role": "user", "content": "List the files."}}, "tools": tools, "stream": stream}
				for k, v := range tc.body {
					body[k] = v
				}
				data, _ := json.Marshal(body)
				var content, reasoning, finish string
				var calls []string
				if !stream {
					c := ts.client()
					got, err := c.Chat.Completions.New(context.Background(), userChat(""), option.WithRequestBody("application/json", data))
					if err != nil {
						t.Fatal(err)
					}
					m := got.Choices[0].Message
					content, finish = m.Content, got.Choices[0].FinishReason
					var rc struct {
						ReasoningContent string `json:"reasoning_content"`
					}
					json.Unmarshal([]byte(m.RawJSON()), &rc)
					reasoning = rc.ReasoningContent
					for _, c := range m.ToolCalls {
						calls = append(calls, c.Function.Name+"("+c.Function.Arguments+")")
					}
				} else {
					c := ts.client()
					s := c.Chat.Completions.NewStreaming(context.Background(), userChat(""), option.WithRequestBody("application/json", data))
					var acc openai.ChatCompletionAccumulator
					var rb strings.Builder
					for s.Next() {
						acc.AddChunk(s.Current())
						for _, c := range s.Current().Choices {
							rb.WriteString(reasoningOf(t, c.Delta))
						}
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
					content, reasoning, finish = acc.Choices[0].Message.Content, rb.String(), acc.Choices[0].FinishReason
					for _, c := range acc.Choices[0].Message.ToolCalls {
						calls = append(calls, c.Function.Name+"("+c.Function.Arguments+")")
					}
				}
				if content != tc.wantContent || reasoning != tc.wantReasoning || finish != tc.wantFinish || !slices.Equal(calls, tc.wantCalls) {
					t.Errorf("stream %v: content %q reasoning %q calls %q finish %q\nwant %q %q %q %q", stream, content, reasoning, calls, finish,
						tc.wantContent, tc.wantReasoning, tc.wantCalls, tc.wantFinish)
				}
				if tc.prompt != nil {
					tc.prompt(t, src)
				}
				if tc.name == "parallel_tool_calls false" || strings.HasPrefix(tc.name, "named") || tc.name == "none ends at a call" {
					last := src.res[len(src.res)-1]
					if all := len(tok.Encode(tc.turns[len(tc.turns)-1], false, true)); len(last.Tokens) >= all {
						t.Errorf("stream %v: the generation was not stopped early (%d of %d tokens)", stream, len(last.Tokens), all)
					}
				}
			}
		})
	}
}

func TestProbeToolMarkup(t *testing.T) {
	// The expected strings are the literals of the two templates' tool-call
	// branches (engine/chat/testdata/qwen35, Qwen3's tokenizer_config.json).
	cases := []struct {
		model string
		want  turn.ToolMarkup
	}{
		{"qwen3", turn.ToolMarkup{Open: "<tool_call>\n", Named: "<tool_call>\n{\"name\": \"" + turn.ProbeName + "\", \"arguments\": ", AfterReasoning: "\n\n", Reasons: true,
			Close: "}\n</tool_call>"}},
		{"qwen35", turn.ToolMarkup{Open: "<tool_call>\n", Named: "<tool_call>\n<function=" + turn.ProbeName + ">\n", AfterReasoning: "\n\n", Reasons: true,
			XML: true, ParamOpen: "<parameter=", ParamMid: ">\n", ParamClose: "\n</parameter>\n", Close: "</function>\n</tool_call>"}},
	}
	for _, tc := range cases {
		got, ok := turn.ProbeToolMarkup(qwenTemplate(t, tc.model))
		if !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.model, got, ok, tc.want)
		}
	}
	chatml, err := chat.NewTemplate("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := turn.ProbeToolMarkup(chatml); ok {
		t.Error("ChatML writes no tool calls, but the probe found markup")
	}
}
