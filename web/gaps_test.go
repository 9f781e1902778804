package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
)

// The chat contract's gaps found by trying the server as a new user
// (issue 32), on the trained qwen35-agent model.

const agentModelPath = "../testdata/qwen35-agent/qwen35-agent-f16.gguf"

func agentServer(t *testing.T) *testServer {
	return startServer(t, loadEngine(t, agentModelPath, 0), 4, Options{})
}

// Gap 2: a forced call cut by max_tokens never leaves its markup in the
// content (the cut call is dropped), streamed or not.
func TestCutCallLeavesNoMarkup(t *testing.T) {
	ts := agentServer(t)
	c := ts.client()
	var params map[string]any
	json.Unmarshal([]byte(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`), &params)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: params})}
	for _, maxTokens := range []int64{6, 16, 40} {
		for seed := range int64(10) {
			p := userChat("What is the weather in Paris?")
			p.Tools = tools
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
			p.MaxTokens = openai.Int(maxTokens)
			p.Temperature = openai.Float(0.8)
			p.Seed = openai.Int(seed)
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			content, finish := streamChatContent(t, c, p)
			for _, text := range []string{got.Choices[0].Message.Content, content} {
				if strings.Contains(text, "<tool_call>") || strings.Contains(text, `{"name"`) {
					t.Errorf("max_tokens %d seed %d: content %q holds call markup (finish %s / %s)", maxTokens, seed, text, got.Choices[0].FinishReason, finish)
				}
			}
		}
	}
}

// Gap 1: while a forced call is pending the turn cannot end: a model that
// ends its turn inside its reasoning (never closing </think>) still gets
// its reasoning closed and the call forced after it; only the token limit
// ends such a turn without a call ("length").
func TestForcedCallAfterUnclosedReasoning(t *testing.T) {
	ts := agentServer(t)
	c := ts.client()
	var params map[string]any
	json.Unmarshal([]byte(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`), &params)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "bash",
		Description: openai.String("Run a shell command"), Parameters: params})}
	choices := []openai.ChatCompletionToolChoiceOptionUnionParam{
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "bash"}),
		{OfAuto: openai.String("required")},
	}
	for i, choice := range choices {
		for seed := range int64(12) {
			p := openai.ChatCompletionNewParams{Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("You are a coding agent. Use the bash tool to inspect the repository."),
				openai.UserMessage("Find the failing test in this repository and fix it."),
			}}
			p.Tools = tools
			p.ToolChoice = choice
			p.MaxTokens = openai.Int(300)
			p.Temperature = openai.Float(0.8)
			p.Seed = openai.Int(seed)
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			ch := got.Choices[0]
			if ch.FinishReason == "length" {
				continue
			}
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 {
				t.Errorf("choice %d seed %d: finish %q with %d calls; content %q", i, seed, ch.FinishReason, len(ch.Message.ToolCalls), ch.Message.Content)
			}
		}
	}
}

// Gap 7, from a hostile-client probe: the bearer scheme is
// case-insensitive; a refused request that asked "Expect: 100-continue"
// is answered without "100 Continue" (its body is never asked for); a
// 504 names the setting that fired.
func TestHostileClientProbe(t *testing.T) {
	ts, _ := scriptServer(t, Options{APIKey: "s3cret", MaxBodyBytes: 1 << 10}, "Hello.")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		if status, _, data := post(t, ts.URL+"/v1/completions", `{"prompt": "hi", "max_tokens": 2}`, "Authorization", scheme+" s3cret"); status != 200 {
			t.Errorf("%s: %d %s", scheme, status, data)
		}
	}
	const head = "POST /v1/completions HTTP/1.1\nHost: x\nContent-Type: application/json\nExpect: 100-continue\nContent-Length: %d\n%s"
	for _, tc := range []struct {
		name   string
		head   string
		status int
	}{
		{"no key", fmt.Sprintf(head, 100, ""), 401},
		{"too large", fmt.Sprintf(head, 1<<20, "Authorization: Bearer s3cret\n"), 413},
	} {
		c := rawSend(t, ts.URL, tc.head, "")
		resp, body, _ := rawAnswer(t, c, 3*time.Second)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: first answer %d %s, want %d without 100 Continue", tc.name, resp.StatusCode, body, tc.status)
		}
	}
	ts2 := qwen35Server(t, 4, Options{RequestTimeout: 300 * time.Millisecond})
	status, _, data := post(t, ts2.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":3000,"ignore_eos":true}`)
	if status != 504 || !strings.Contains(string(data), "api.request_timeout") || !strings.Contains(string(data), "300ms") {
		t.Errorf("timeout: %d %s, want 504 naming api.request_timeout and its value", status, data)
	}
}

// Gap 6: n choices, for chat and completions: at temperature 0 each is
// the engine's own greedy output; usage counts the prompt once and every
// choice's tokens; with a seed, choice i is what seed+i gives alone.
func TestNChoices(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	c := ts.client()
	p := userChat("Once upon a time")
	p.Temperature = openai.Float(0)
	p.MaxTokens = openai.Int(12)
	p.N = openai.Int(3)
	got, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	res, text := referenceGenerate(t, ts, []chat.Message{{Role: "user", Content: chat.TextContent("Once upon a time")}}, engine.Request{MaxTokens: 12})
	if len(got.Choices) != 3 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	for i, ch := range got.Choices {
		if ch.Index != int64(i) || ch.Message.Content != text {
			t.Errorf("choice %d: index %d content %q, engine %q", i, ch.Index, ch.Message.Content, text)
		}
	}
	if got.Usage.PromptTokens != int64(len(res.Prompt)) || got.Usage.CompletionTokens != 3*int64(len(res.Tokens)) {
		t.Errorf("usage %s, want prompt %d completion %d", got.Usage.RawJSON(), len(res.Prompt), 3*len(res.Tokens))
	}
	// Streamed: each choice's chunks carry its index, each ends with its
	// finish chunk, and the usage chunk adds them up.
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatal("the accumulator refused a chunk")
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 3 {
		t.Fatalf("%d streamed choices", len(acc.Choices))
	}
	for i, ch := range acc.Choices {
		if ch.Message.Content != text || ch.FinishReason != got.Choices[i].FinishReason {
			t.Errorf("streamed choice %d: %q %q, want %q %q", i, ch.Message.Content, ch.FinishReason, text, got.Choices[i].FinishReason)
		}
	}
	if acc.Usage.CompletionTokens != got.Usage.CompletionTokens || acc.Usage.PromptTokens != got.Usage.PromptTokens {
		t.Errorf("streamed usage %+v, whole %+v", acc.Usage, got.Usage)
	}
	cp := openai.CompletionNewParams{Model: "test-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The dog")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(1), Seed: openai.Int(7), N: openai.Int(2)}
	many, err := c.Completions.New(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(many.Choices) != 2 {
		t.Fatalf("%d completion choices", len(many.Choices))
	}
	cs := c.Completions.NewStreaming(context.Background(), cp)
	streamed := map[int64]string{}
	for cs.Next() {
		for _, ch := range cs.Current().Choices {
			streamed[ch.Index] += ch.Text
		}
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if streamed[int64(i)] != many.Choices[i].Text {
			t.Errorf("streamed completion choice %d %q, whole %q", i, streamed[int64(i)], many.Choices[i].Text)
		}
	}
	cp.N = openai.Int(1)
	for i := range 2 {
		cp.Seed = openai.Int(int64(7 + i))
		one, err := c.Completions.New(context.Background(), cp)
		if err != nil {
			t.Fatal(err)
		}
		if many.Choices[i].Text != one.Choices[0].Text || many.Choices[i].Index != int64(i) {
			t.Errorf("choice %d %q, seed %d alone %q", i, many.Choices[i].Text, 7+i, one.Choices[0].Text)
		}
	}
}

// Gap 7: a connection refused with 503 for too many connections leaves a
// log line naming the caps and counts in /metrics.
func TestRefusedConnectionsLoggedAndCounted(t *testing.T) {
	limit := NewConnLimit(1, 1)
	logs := &logBuffer{}
	limit.SetLog(zerolog.New(logs))
	ts, _ := scriptServer(t, Options{ConnLimit: limit}, "Hello.")
	plain := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	plain.Listener = limit.Listener(plain.Listener)
	plain.Start()
	t.Cleanup(plain.Close)
	first, err := net.Dial("tcp", plain.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	io.WriteString(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(first), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first connection: %v %v", resp, err)
	}
	second := rawSend(t, plain.URL, "GET / HTTP/1.1\nHost: x\n", "")
	if resp, _, _ := rawAnswer(t, second, 2*time.Second); resp.StatusCode != 503 {
		t.Fatalf("second connection: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(2 * time.Second)
	for limit.Refused() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // counted after the 503 is written
	}
	var line map[string]any
	for _, l := range logs.lines() {
		if strings.Contains(fmt.Sprint(l["message"]), "api.max_connections") {
			line = l
		}
	}
	if line == nil || line["level"] != "warn" || line["max_connections"] != float64(1) {
		t.Errorf("no warning naming the cap: %v", logs.lines())
	}
	resp, body := fetch(t, http.MethodGet, ts.URL+"/metrics")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `edgellmd_connections_refused_total{model_name="test-model"} 1`) {
		t.Errorf("/metrics: %d, no refused connection counted", resp.StatusCode)
	}
}

// Gap 2 in Qwen3.5's XML call form: a forced call whose parameter the token
// limit cuts leaves no "<parameter=" markup in the content, streamed or not.
func TestCutXMLCallLeavesNoMarkup(t *testing.T) {
	ts := qwen35Server(t, 4, Options{Template: qwenTemplate(t, "qwen35")})
	c := ts.client()
	var params map[string]any
	json.Unmarshal([]byte(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`), &params)
	for _, maxTokens := range []int64{12, 30, 32} { // 32: the closing tag cut short ("</tool_call")
		p := userChat("Weather in Oslo?")
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: params})}
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
		p.MaxTokens = openai.Int(maxTokens)
		p.Temperature = openai.Float(0)
		got, err := c.Chat.Completions.New(context.Background(), p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		if err != nil {
			t.Fatal(err)
		}
		content, _ := streamChatContent(t, c, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		for _, text := range []string{got.Choices[0].Message.Content, content} {
			if strings.Contains(text, "<parameter") || strings.Contains(text, "<function") || strings.Contains(text, "tool_call") {
				t.Errorf("max_tokens %d: content %q holds call markup (finish %s)", maxTokens, text, got.Choices[0].FinishReason)
			}
		}
	}
}
