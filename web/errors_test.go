package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/edgellmd/edgellmd/engine"
)

// checkErrorShape checks an error body is OpenAI's: an "error" object with
// message, type, param and code keys (param and code may be null).
func checkErrorShape(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var b struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Error == nil {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := b.Error[k]; !ok {
			t.Errorf("error body lacks %q: %s", k, body)
		}
	}
	if m, _ := b.Error["message"].(string); m == "" {
		t.Errorf("empty message: %s", body)
	}
	return b.Error
}

const bashTool = `{"type":"function","function":{"name":"bash","description":"run a command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}`

// TestErrorsThroughClient sends each bad request with the official client
// and checks the status, code and field it reports.
func TestErrorsThroughClient(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	long := strings.Repeat("Once upon a time there was a little dog. ", 200) // > 512 tokens of context
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		param  string
	}{
		{"malformed JSON", `{"model":"test-model","messages":[{"role":"user","content":"hi"}`, 400, "", ""},
		{"not an object", `[1,2]`, 400, "", ""},
		{"wrong type", `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400, "", "temperature"},
		{"no messages", `{"model":"test-model"}`, 400, "", "messages"},
		{"unknown role", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "", "messages[0].role"},
		{"tool without call", `{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"out"}]}`, 400, "", "messages[1].tool_call_id"},
		{"tool without id", `{"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"out"}]}`, 400, "", "messages[1].tool_call_id"},
		{"tools not a list", `{"messages":[{"role":"user","content":"hi"}],"tools":{"type":"function"}}`, 400, "", "tools"},
		{"tool schema not an object", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, 400, "", "tools[0].function.parameters"},
		{"tool schema type", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}`, 400, "", "tools[0].function.parameters"},
		{"tool name", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a b<c>"}}]}`, 400, "", "tools[0].function.name"},
		{"tool twice", `{"messages":[{"role":"user","content":"hi"}],"tools":[` + bashTool + `,` + bashTool + `]}`, 400, "", "tools[1].function.name"},
		{"tool type", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, 400, "", "tools[0].type"},
		{"tool_choice absent tool", `{"messages":[{"role":"user","content":"hi"}],"tools":[` + bashTool + `],"tool_choice":{"type":"function","function":{"name":"python"}}}`, 400, "", "tool_choice"},
		{"tool_choice required without tools", `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`, 400, "", "tool_choice"},
		{"tool_choice bad", `{"messages":[{"role":"user","content":"hi"}],"tools":[` + bashTool + `],"tool_choice":"sometimes"}`, 400, "", "tool_choice"},
		{"tool_choice required, no markup", `{"messages":[{"role":"user","content":"hi"}],"tools":[` + bashTool + `],"tool_choice":"required"}`, 400, "", "tool_choice"},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "", "messages[0].content[0].type"},
		{"bad arguments", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"[1"}}]}]}`, 400, "", "messages[1].tool_calls[0].function.arguments"},
		{"n=0", `{"messages":[{"role":"user","content":"hi"}],"n":0}`, 400, "", "n"},
		{"n=17", `{"messages":[{"role":"user","content":"hi"}],"n":17}`, 400, "", "n"},
		{"temperature", `{"messages":[{"role":"user","content":"hi"}],"temperature":2.5}`, 400, "", "temperature"},
		{"top_p", `{"messages":[{"role":"user","content":"hi"}],"top_p":0}`, 400, "", "top_p"},
		{"max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "", "max_tokens"},
		{"stop empty", `{"messages":[{"role":"user","content":"hi"}],"stop":[""]}`, 400, "", "stop"},
		{"stream_options alone", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "", "stream_options"},
		{"top_logprobs without logprobs", `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, 400, "", "top_logprobs"},
		{"logit_bias key", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"five":10}}`, 400, "", "logit_bias"},
		{"logit_bias range", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"5":101}}`, 400, "", "logit_bias"},
		{"response_format type", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"xml"}}`, 400, "", "response_format"},
		{"json_schema unsupported keyword", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","patternProperties":{}}}}}`, 400, "", "response_format.json_schema.schema"},
		{"legacy functions", `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, 400, "", "functions"},
		{"audio modality", `{"messages":[{"role":"user","content":"hi"}],"modalities":["text","audio"]}`, 400, "", "modalities"},
		{"kwargs not an object", `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":[1]}`, 400, "", "chat_template_kwargs"},
		{"context length", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "context_length_exceeded", "messages"},
		{"unknown model", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found", "model"},
	}
	c := ts.client()
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			body := tc.body
			if stream {
				if !strings.HasPrefix(body, "{") || strings.Contains(body, "stream_options") {
					continue
				}
				body = `{"stream":true,` + body[1:]
			}
			t0 := time.Now()
			var err error
			if stream {
				s := c.Chat.Completions.NewStreaming(context.Background(), userChat("x"), option.WithRequestBody("application/json", []byte(body)))
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = c.Chat.Completions.New(context.Background(), userChat("x"), option.WithRequestBody("application/json", []byte(body)))
			}
			if d := time.Since(t0); d > time.Second {
				t.Logf("%s (stream %v): %v", tc.name, stream, d)
			}
			var ae *openai.Error
			if !errors.As(err, &ae) {
				t.Errorf("%s (stream %v): want an API error, got %v", tc.name, stream, err)
				continue
			}
			if ae.StatusCode != tc.status || ae.Code != tc.code || ae.Param != tc.param {
				t.Errorf("%s (stream %v): status %d code %q param %q, want %d %q %q (%s)", tc.name, stream, ae.StatusCode, ae.Code, ae.Param, tc.status, tc.code, tc.param, ae.Message)
			}
			if !ae.JSON.Message.Valid() || !ae.JSON.Type.Valid() {
				t.Errorf("%s: error body lacks message or type: %s", tc.name, ae.RawJSON())
			}
		}
	}
	// Nothing above may have reached the engine worker, or left a 500.
	for _, l := range ts.logs.lines() {
		if s, _ := l["status"].(float64); s >= 500 {
			t.Errorf("a bad request logged status %v: %v", s, l)
		}
	}
}

func TestBodyLimit413(t *testing.T) {
	ts := storiesServer(t, 4, Options{MaxBodyBytes: 2048})
	big := strings.Repeat("a", 4096)
	c := ts.client()
	_, err := c.Chat.Completions.New(context.Background(), userChat(big))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("want 413, got %v", err)
	}
	// A chunked body (no Content-Length) hits the limit while reading.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", struct{ *strings.Reader }{strings.NewReader(`{"messages":[{"role":"user","content":"` + big + `"}]}`)})
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d", resp.StatusCode)
	}
}

func TestAPIKey401(t *testing.T) {
	ts := storiesServer(t, 4, Options{APIKey: "s3cret-key"})
	for _, key := range []string{"wrong", "s3cret-ke", "s3cret-key2", ""} {
		c := ts.client(option.WithAPIKey(key))
		_, err := c.Models.List(context.Background())
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || ae.Code != "invalid_api_key" {
			t.Errorf("key %q: want 401 invalid_api_key, got %v", key, err)
		}
		_, err = c.Chat.Completions.New(context.Background(), userChat("hi"))
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: chat: want 401, got %v", key, err)
		}
	}
	c := ts.client(option.WithAPIKey("s3cret-key"))
	models, err := c.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "test-model" {
		t.Fatalf("with the key: %v %+v", err, models)
	}
	// /health stays open for load balancers and systemd checks.
	resp, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health with a key set: %d", resp.StatusCode)
	}
}

func TestModels(t *testing.T) {
	ts := storiesServer(t, 4, Options{ModelName: "stories", ModelPath: "/models/stories260K.gguf"})
	c := ts.client()
	m, err := c.Models.Get(context.Background(), "stories")
	if err != nil || m.ID != "stories" || m.OwnedBy != "edgellmd" {
		t.Fatalf("%v %+v", err, m)
	}
	_, err = c.Models.Get(context.Background(), "gpt-4o")
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
	// The path and an empty name are accepted too.
	for _, name := range []string{"/models/stories260K.gguf", ""} {
		status, _, body := post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, name))
		if status != 200 {
			t.Errorf("model %q: %d %s", name, status, body)
		}
	}
}

func TestRoutes404And405(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	status, _, body := post(t, ts.URL+"/v1/embeddings", `{}`)
	if status != 404 {
		t.Errorf("unknown route: %d", status)
	}
	checkErrorShape(t, body)
	resp, err := http.Get(ts.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET chat: %d", resp.StatusCode)
	}
}

func TestHealth503UntilReady(t *testing.T) {
	var mu sync.Mutex
	ready := false
	ts := storiesServer(t, 4, Options{Ready: func() bool { mu.Lock(); defer mu.Unlock(); return ready }})
	resp, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Status string         `json:"status"`
		Error  map[string]any `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 503 || body.Status != "unavailable" || body.Error["message"] == "" {
		t.Errorf("not ready: %d %+v", resp.StatusCode, body)
	}
	status, _, _ := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if status != 503 {
		t.Errorf("chat while not ready: %d", status)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	resp, err = http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("ready: %d", resp.StatusCode)
	}
}

// TestQueueFull429 blocks the engine worker deterministically (a request
// submitted straight to the scheduler waits inside its emit callback),
// fills the one-place queue with an API request, and checks the next one
// gets 429 with Retry-After, streamed or not.
func TestQueueFull429(t *testing.T) {
	ts := storiesServer(t, 1, Options{})
	release := make(chan struct{})
	started := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		var once sync.Once
		prompt := ts.eng.Tokenizer().Encode("Once", true, false)
		_, err := ts.sched.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 2}, func(engine.Token) error {
			once.Do(func() { close(started) })
			<-release
			return nil
		})
		blocked <- err
	}()
	<-started
	c := ts.client()
	queued := make(chan error, 1)
	go func() {
		p := userChat("queued")
		p.MaxTokens = openai.Int(3)
		_, err := c.Chat.Completions.New(context.Background(), p)
		queued <- err
	}()
	// Wait until the API request sits in the queue (the scheduler's own
	// count; there is no event to wait on).
	for deadline := time.Now().Add(10 * time.Second); ts.sched.Waiting() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never queued")
		}
	}
	for _, stream := range []bool{false, true} {
		var httpResp *http.Response
		var err error
		if stream {
			s := c.Chat.Completions.NewStreaming(context.Background(), userChat("rejected"), option.WithResponseInto(&httpResp))
			for s.Next() {
			}
			err = s.Err()
		} else {
			_, err = c.Chat.Completions.New(context.Background(), userChat("rejected"), option.WithResponseInto(&httpResp))
		}
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || ae.Code != "queue_full" {
			t.Fatalf("stream %v: want 429 queue_full, got %v", stream, err)
		}
		if ra := ae.Response.Header.Get("Retry-After"); ra == "" {
			t.Errorf("stream %v: 429 without Retry-After", stream)
		}
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("the queued request failed: %v", err)
	}
}

// TestCancelStopsGeneration: a client that goes away mid-stream stops its
// generation; the worker is free at once for the next request.
func TestCancelStopsGeneration(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	const maxTokens = 3000 // seconds of decoding on this model
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		id := fmt.Sprintf("cancel-%v", stream)
		p := userChat("Hello")
		p.MaxTokens = openai.Int(maxTokens)
		p.Temperature = openai.Float(0)
		opts := []option.RequestOption{option.WithHeader("X-Request-ID", id), option.WithJSONSet("ignore_eos", true)}
		start := time.Now()
		if stream {
			s := c.Chat.Completions.NewStreaming(ctx, p, opts...)
			for n := 0; s.Next(); n++ {
				if n == 3 { // a few chunks in: the generation runs
					cancel()
				}
			}
		} else {
			go func() {
				for ts.sched.Running() == 0 { // the engine started on it
					time.Sleep(time.Millisecond)
				}
				time.Sleep(300 * time.Millisecond) // likely some tokens decoded
				cancel()
			}()
			_, err := c.Chat.Completions.New(ctx, p, opts...)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("non-streamed: %v", err)
			}
		}
		cancel()
		line := ts.logs.requestLine(t, id)
		out, _ := line["output_tokens"].(float64)
		if line["status"] != float64(499) && line["status"] != float64(200) {
			t.Errorf("stream %v: status %v", stream, line["status"])
		}
		if (stream && out <= 0) || out >= maxTokens/2 { // non-streamed, the cancel may land before the first token
			t.Errorf("stream %v: %v output tokens after cancellation (max %d)", stream, out, maxTokens)
		}
		if ts.sched.Running() != 0 {
			t.Errorf("stream %v: the worker still runs after the request ended", stream)
		}
		t.Logf("stream %v: cancelled after %v, %v tokens", stream, time.Since(start), out)
	}
	// The worker is free: a short request completes.
	p := userChat("Hi")
	p.MaxTokens = openai.Int(2)
	if _, err := c.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func TestRequestTimeout504(t *testing.T) {
	ts := qwen35Server(t, 4, Options{RequestTimeout: 300 * time.Millisecond})
	c := ts.client()
	p := userChat("Hello")
	p.MaxTokens = openai.Int(3000)
	start := time.Now()
	_, err := c.Chat.Completions.New(context.Background(), p, option.WithJSONSet("ignore_eos", true))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("want 504, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	// Streamed: the deadline ends the stream with an error event and
	// [DONE] (or, if it comes before the first token, a plain 504).
	status, _, body := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"stream":true,"max_tokens":3000,"ignore_eos":true}`)
	if status == http.StatusGatewayTimeout {
		checkErrorShape(t, body)
		t.Log("the deadline came before the first token")
		return
	}
	if status != 200 {
		t.Fatalf("streamed: %d", status)
	}
	ev := sseEvents(t, body)
	if ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("last event %q", ev[len(ev)-1])
	}
	e := checkErrorShape(t, []byte(ev[len(ev)-2]))
	if e["code"] != "request_timeout" {
		t.Errorf("error event %v", e)
	}
}

// TestRequestLogLine: one JSON line per request with the fields operators
// and gateways rely on.
func TestRequestLogLine(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	c := ts.client()
	p := userChat("Once upon a time")
	p.MaxTokens = openai.Int(6)
	p.Temperature = openai.Float(0)
	var resp *http.Response
	_, err := c.Chat.Completions.New(context.Background(), p,
		option.WithHeader("X-Request-ID", "req-abc-1"), option.WithHeader("X-Session-ID", "conv-7"),
		option.WithJSONSet("reasoning_effort", "low"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Request-ID") != "req-abc-1" {
		t.Errorf("X-Request-ID not echoed: %q", resp.Header.Get("X-Request-ID"))
	}
	l := ts.logs.requestLine(t, "req-abc-1")
	want := map[string]any{"session_id": "conv-7", "status": float64(200), "output_tokens": float64(6), "finish_reason": "length",
		"cached_prompt_tokens": float64(0), "path": "/v1/chat/completions"}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("log %s = %v, want %v", k, l[k], v)
		}
	}
	for _, k := range []string{"prompt_tokens", "ttft_ms", "tpot_ms", "duration_ms"} {
		if v, ok := l[k].(float64); !ok || v <= 0 {
			t.Errorf("log %s = %v", k, l[k])
		}
	}
	if ig, _ := l["ignored_fields"].([]any); len(ig) != 1 || ig[0] != "reasoning_effort" {
		t.Errorf("ignored_fields %v", l["ignored_fields"])
	}
	// A generated id when none is sent.
	_, err = c.Chat.Completions.New(context.Background(), p, option.WithResponseInto(&resp))
	if err != nil || len(resp.Header.Get("X-Request-ID")) < 16 {
		t.Errorf("generated request id %q (%v)", resp.Header.Get("X-Request-ID"), err)
	}
}

// TestStoppedRequestsSayTheServerStopped: a request cancelled because the
// server stops without waiting (the daemon cancels with ErrServerStopping)
// is a 503 server_stopping, not a client that closed the request; a plain
// cancellation still is one.
func TestStoppedRequestsSayTheServerStopped(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrServerStopping)
	child, stop := context.WithCancel(ctx)
	defer stop()
	if ae := toAPIError(child, context.Canceled); ae.Status != http.StatusServiceUnavailable || ae.Code != "server_stopping" {
		t.Errorf("stopped by the server: %d %s %s", ae.Status, ae.Type, ae.Code)
	}
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if ae := toAPIError(gone, context.Canceled); ae.Status != 499 || ae.Type != "client_closed_request" {
		t.Errorf("client gone: %d %s", ae.Status, ae.Type)
	}
}

// TestLongPromptsRefusedBeforeTokenizing: a prompt longer than the
// context times the longest token is refused at once, without
// tokenizing it; prompts are tokenized at most as many at once as the
// engine's queue holds, the excess refused like a full queue.
func TestLongPromptsRefusedBeforeTokenizing(t *testing.T) {
	ts := storiesServer(t, 1, Options{})
	maxTokenBytes := 0
	for i, tok := range ts.api.tok.Vocab().Tokens {
		maxTokenBytes = max(maxTokenBytes, len(tok), len(ts.api.tok.Piece(int32(i))))
	}
	limit := ts.api.ctxLen * maxTokenBytes
	if maxTokenBytes <= 0 || maxTokenBytes > 64 {
		t.Fatalf("stories260K's longest token: %d bytes", maxTokenBytes)
	}
	word := strings.Repeat("a", limit+1)
	for _, route := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt":"` + word + `","max_tokens":1}`, "prompt"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + word + `"}],"max_tokens":1}`, "messages"},
	} {
		status, _, data := post(t, ts.URL+route.path, route.body)
		var e struct {
			Error struct{ Code, Param, Message string }
		}
		json.Unmarshal(data, &e)
		if status != 400 || e.Error.Code != "context_length_exceeded" || e.Error.Param != route.param || !strings.Contains(e.Error.Message, "at least") {
			t.Errorf("%s with %d bytes: %d %s", route.path, len(word), status, data)
		}
	}
	// every tokenizing slot taken: the next prompt is refused, not queued
	for i := 0; i < cap(ts.api.tokenizing); i++ {
		ts.api.tokenizing <- struct{}{}
	}
	status, _, data := post(t, ts.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":1}`)
	for i := 0; i < cap(ts.api.tokenizing); i++ {
		<-ts.api.tokenizing
	}
	if status != 429 || !strings.Contains(string(data), "queue_full") {
		t.Errorf("with every tokenizing slot taken: %d %s, want 429 queue_full", status, data)
	}
	if status, _, data := post(t, ts.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":1}`); status != 200 {
		t.Errorf("after the slots came back: %d %s", status, data)
	}
}
