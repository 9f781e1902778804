package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Compatibility with what clients and llama.cpp's server tests expect:
// whitespace, routes without /v1, system_fingerprint, CORS, X-Api-Key,
// model aliases, and role sequences the templates render silently.

// streamChatContent runs p streamed through openai-go's accumulator.
func streamChatContent(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) (content, finish string) {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), p, opts...)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.Choices[0].Message.Content, string(acc.Choices[0].FinishReason)
}

// TestChatContentKeepsWhitespace: issue 14's case on the bundled model. The
// greedy answer to "Once upon a time" is "\"Here?\" Asked Jack.\nThey ...";
// cut by stop "They", chat content ends with its "\n", exactly as
// /v1/completions gives the same prompt's text, streamed or not.
func TestChatContentKeepsWhitespace(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	c := ts.client()
	p := userChat("Once upon a time")
	p.Temperature = openai.Float(0)
	p.MaxTokens = openai.Int(40)
	p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String("They")}

	// The same prompt, rendered by the server's template, as a completion.
	status, _, body := post(t, ts.URL+"/apply-template", `{"messages":[{"role":"user","content":"Once upon a time"}]}`)
	if status != 200 {
		t.Fatalf("apply-template: %d %s", status, body)
	}
	var rendered struct{ Prompt string }
	if err := json.Unmarshal(body, &rendered); err != nil {
		t.Fatal(err)
	}
	cmpl, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "test-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(rendered.Prompt)},
		MaxTokens: openai.Int(40), Temperature: openai.Float(0),
		Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String("They")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := cmpl.Choices[0].Text
	if !strings.HasSuffix(want, "\n") || strings.TrimSpace(want) == want {
		t.Fatalf("the completion %q does not end with whitespace before the stop string: the case tests nothing", want)
	}

	got, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if content := got.Choices[0].Message.Content; content != want || got.Choices[0].FinishReason != "stop" {
		t.Errorf("non-streamed: content %q finish %q, want the completion's %q stop", content, got.Choices[0].FinishReason, want)
	}
	if content, finish := streamChatContent(t, c, p); content != want || finish != "stop" {
		t.Errorf("streamed: content %q finish %q, want %q stop", content, finish, want)
	}
}

// TestReasoningWhitespace: with Qwen3's template and reasoning on, the
// reasoning is trimmed and the line breaks after </think> (the template's)
// dropped; the content keeps its own indentation and trailing newlines.
func TestReasoningWhitespace(t *testing.T) {
	tok := qwen3Tokenizer(t)
	for _, stream := range []bool{false, true} {
		src := &scriptedSource{tok: tok, turns: []string{"<think>\nI should answer.\n</think>\n\n  indented answer\n\n"}}
		ts := scriptedServer(t, qwenTemplate(t, "qwen3"), src)
		c := ts.client()
		p := userChat("Hello")
		var content, reasoning string
		if !stream {
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			content = got.Choices[0].Message.Content
			var ext struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			json.Unmarshal([]byte(got.Choices[0].Message.RawJSON()), &ext)
			reasoning = ext.ReasoningContent
		} else {
			s := c.Chat.Completions.NewStreaming(context.Background(), p)
			var acc openai.ChatCompletionAccumulator
			var rb strings.Builder
			for s.Next() {
				acc.AddChunk(s.Current())
				for _, ch := range s.Current().Choices {
					rb.WriteString(reasoningOf(t, ch.Delta))
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			content, reasoning = acc.Choices[0].Message.Content, rb.String()
		}
		if content != "  indented answer\n\n" || reasoning != "I should answer." {
			t.Errorf("stream %v: content %q reasoning %q", stream, content, reasoning)
		}
	}
}

// TestRoutesWithoutV1: /chat/completions, /completions, /models and
// /models/{id} answer as their /v1 forms do, behind the same key and body
// limit.
func TestRoutesWithoutV1(t *testing.T) {
	const key = "secret-key"
	ts := storiesServer(t, 4, Options{APIKey: key, MaxBodyBytes: 4096})
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	p := userChat("Once upon a time")
	p.Temperature = openai.Float(0)
	p.MaxTokens = openai.Int(8)
	got, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	v1 := ts.client(option.WithAPIKey(key))
	want, err := v1.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != want.Choices[0].Message.Content || got.Usage.CompletionTokens != 8 {
		t.Errorf("/chat/completions %q (%d tokens), /v1/chat/completions %q", got.Choices[0].Message.Content, got.Usage.CompletionTokens, want.Choices[0].Message.Content)
	}
	if content, _ := streamChatContent(t, c, p); content != want.Choices[0].Message.Content {
		t.Errorf("/chat/completions streamed %q", content)
	}
	cmpl, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "test-model",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4)})
	if err != nil || cmpl.Object != "text_completion" || cmpl.Usage.CompletionTokens != 4 {
		t.Errorf("/completions: %+v %v", cmpl, err)
	}
	models, err := c.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "test-model" {
		t.Errorf("/models: %+v %v", models, err)
	}
	if m, err := c.Models.Get(context.Background(), "test-model"); err != nil || m.ID != "test-model" {
		t.Errorf("/models/test-model: %+v %v", m, err)
	}

	// The same key check and limits.
	for _, path := range []string{"/chat/completions", "/completions"} {
		status, _, body := post(t, ts.URL+path, `{"model":"test-model","messages":[],"prompt":"x"}`)
		if status != 401 || errorCode(t, body) != "invalid_api_key" {
			t.Errorf("%s without the key: %d %s", path, status, body)
		}
		big := `{"prompt":"` + strings.Repeat("x", 5000) + `"}`
		if status, _, body := post(t, ts.URL+path, big, "Authorization", "Bearer "+key); status != 413 {
			t.Errorf("%s with a body over the limit: %d %s", path, status, body)
		}
		if status, _, body := post(t, ts.URL+path, "{}", "Authorization", "Bearer "+key, "Content-Type", "text/plain", "Origin", "https://evil.example"); status != 415 {
			t.Errorf("%s as text/plain from another site: %d %s", path, status, body)
		}
	}
	if resp, body := fetch(t, http.MethodGet, ts.URL+"/models"); resp.StatusCode != 401 {
		t.Errorf("/models without the key: %d %s", resp.StatusCode, body)
	}
}

// TestSystemFingerprint: every completion and every chunk, usage chunk
// included, carries Options.SystemFingerprint; without one the field is
// left out.
func TestSystemFingerprint(t *testing.T) {
	const fp = "fp_0123456789abcdef"
	ts := storiesServer(t, 4, Options{SystemFingerprint: fp})
	c := ts.client()
	p := userChat("Lily")
	p.MaxTokens = openai.Int(6)
	got, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got.SystemFingerprint != fp {
		t.Errorf("chat.completion system_fingerprint %q", got.SystemFingerprint)
	}
	cmpl, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "test-model",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Lily")}, MaxTokens: openai.Int(4)})
	if err != nil {
		t.Fatal(err)
	}
	if cmpl.SystemFingerprint != fp {
		t.Errorf("text_completion system_fingerprint %q", cmpl.SystemFingerprint)
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Lily"}],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/completions", `{"prompt":"Lily","max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`},
	} {
		status, _, body := post(t, ts.URL+tc.path, tc.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.path, status, body)
		}
		events := sseEvents(t, body)
		for _, e := range events[:len(events)-1] {
			var chunk struct {
				SystemFingerprint *string `json:"system_fingerprint"`
			}
			if err := json.Unmarshal([]byte(e), &chunk); err != nil || chunk.SystemFingerprint == nil || *chunk.SystemFingerprint != fp {
				t.Errorf("%s: chunk without the fingerprint: %s", tc.path, e)
			}
		}
	}

	plain := storiesServer(t, 4, Options{})
	status, _, body := post(t, plain.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Lily"}],"max_tokens":2}`)
	if status != 200 || strings.Contains(string(body), "system_fingerprint") {
		t.Errorf("without a fingerprint: %d %s", status, body)
	}
}

// preflight sends a browser's CORS preflight for a POST with the given
// request headers.
func preflight(t *testing.T, url, origin, headers string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func corsHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestCORS(t *testing.T) {
	const key = "secret-key"
	const app = "https://app.example.com"
	// openai-node in a browser asks for these.
	const sdkHeaders = "authorization,content-type,x-stainless-os,x-stainless-retry-count"

	t.Run("no origins configured", func(t *testing.T) {
		ts := storiesServer(t, 4, Options{APIKey: key})
		for _, path := range []string{"/v1/chat/completions", "/chat/completions", "/v1/models", "/health", "/tokenize"} {
			resp := preflight(t, ts.URL+path, app, sdkHeaders)
			if resp.StatusCode != 204 || len(corsHeaders(resp.Header)) > 0 {
				t.Errorf("OPTIONS %s: %d %v", path, resp.StatusCode, corsHeaders(resp.Header))
			}
		}
		resp, _ := fetch(t, http.MethodGet, ts.URL+"/v1/models", "Authorization", "Bearer "+key, "Origin", app)
		if resp.StatusCode != 200 || len(corsHeaders(resp.Header)) > 0 {
			t.Errorf("GET /v1/models from %s: %d %v", app, resp.StatusCode, corsHeaders(resp.Header))
		}
	})

	t.Run("an allowed origin", func(t *testing.T) {
		ts := storiesServer(t, 4, Options{APIKey: key, CORSOrigins: []string{"HTTPS://App.Example.com:443", "http://localhost:3000"}})
		resp := preflight(t, ts.URL+"/v1/chat/completions", app, sdkHeaders) // no key: browsers send none here
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != app || !strings.Contains(h.Get("Vary"), "Origin") ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || h.Get("Access-Control-Max-Age") == "" ||
			h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight: %d %v", resp.StatusCode, h)
		}
		allowed := strings.Split(h.Get("Access-Control-Allow-Headers"), ", ")
		for _, want := range []string{"Authorization", "Content-Type", "X-Api-Key", "x-stainless-os", "x-stainless-retry-count"} {
			if !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, want) }) {
				t.Errorf("Access-Control-Allow-Headers %q lacks %s", h.Get("Access-Control-Allow-Headers"), want)
			}
		}
		if resp := preflight(t, ts.URL+"/v1/chat/completions", app, "x-ok, bad header"); strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "x-ok") {
			t.Errorf("a malformed request header list was echoed: %q", resp.Header.Get("Access-Control-Allow-Headers"))
		}
		if resp := preflight(t, ts.URL+"/models", "http://localhost:3000", ""); resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
			t.Errorf("preflight on /models from the second origin: %v", resp.Header)
		}
		for _, other := range []string{"https://evil.example.com", "http://app.example.com", "null"} {
			if resp := preflight(t, ts.URL+"/v1/chat/completions", other, sdkHeaders); resp.StatusCode != 204 || len(corsHeaders(resp.Header)) > 0 {
				t.Errorf("preflight from %s: %d %v", other, resp.StatusCode, corsHeaders(resp.Header))
			}
		}
		// Answers to the allowed origin, errors included, are readable.
		resp, _ = fetch(t, http.MethodGet, ts.URL+"/v1/models", "Authorization", "Bearer "+key, "Origin", app)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != app ||
			!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-ID") {
			t.Errorf("GET /v1/models: %d %v", resp.StatusCode, resp.Header)
		}
		status, hdr, body := post(t, ts.URL+"/chat/completions", `{"messages":[{"role":"user","content":"Lily"}],"max_tokens":2}`, "Origin", app)
		if status != 401 || hdr.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("POST without the key: %d %v %s", status, hdr, body)
		}
		status, hdr, body = post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Lily"}],"max_tokens":2}`, "Origin", app, "Authorization", "Bearer "+key)
		if status != 200 || hdr.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("POST with the key: %d %v %s", status, hdr, body)
		}
		if resp, _ := fetch(t, http.MethodGet, ts.URL+"/v1/models", "Authorization", "Bearer "+key, "Origin", "https://evil.example.com"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("another origin got %q", resp.Header.Get("Access-Control-Allow-Origin"))
		}
		// The status page and /metrics are not API routes: no preflight.
		for _, path := range []string{"/", "/status.json", "/metrics"} {
			if resp := preflight(t, ts.URL+path, app, ""); resp.StatusCode != 405 || len(corsHeaders(resp.Header)) > 0 {
				t.Errorf("OPTIONS %s: %d %v", path, resp.StatusCode, corsHeaders(resp.Header))
			}
		}
	})

	t.Run("any origin", func(t *testing.T) {
		ts := storiesServer(t, 4, Options{CORSOrigins: []string{"*"}})
		if resp := preflight(t, ts.URL+"/v1/completions", "https://anywhere.example", ""); resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight: %v", resp.Header)
		}
		if resp, _ := fetch(t, http.MethodGet, ts.URL+"/health", "Origin", "https://anywhere.example"); resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET /health: %v", resp.Header)
		}
	})
}

func TestCORSOriginsChecked(t *testing.T) {
	for _, o := range []string{"*", "https://app.example.com", "http://localhost:3000", "http://[::1]:8080", "tauri://localhost"} {
		if err := CheckCORSOrigin(o); err != nil {
			t.Errorf("%q: %v", o, err)
		}
	}
	for _, o := range []string{"", "app.example.com", "https://app.example.com/", "https://app.example.com/x", "https://app.example.com?q",
		"https://user@app.example.com", "https://", "https://app.example.com:", "null", "https://app.example.com#"} {
		if err := CheckCORSOrigin(o); err == nil {
			t.Errorf("%q accepted", o)
		}
	}
	if _, err := newServer(Options{ModelName: "m", CORSOrigins: []string{"https://ok.example", "bad"}}, qwen3Tokenizer(t), 64, nil); err == nil ||
		!strings.Contains(err.Error(), "CORSOrigins[1]") {
		t.Errorf("a bad origin: %v", err)
	}
}

// TestXAPIKey: "X-Api-Key: KEY" opens what "Authorization: Bearer KEY" opens.
func TestXAPIKey(t *testing.T) {
	const key = "secret-key"
	ts := storiesServer(t, 4, Options{APIKey: key})
	for _, tc := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/v1/models", []string{"X-Api-Key", key}, 200},
		{"/models", []string{"X-Api-Key", key}, 200},
		{"/v1/models", []string{"X-Api-Key", "wrong"}, 401},
		{"/v1/models", []string{"X-Api-Key", ""}, 401},
		{"/v1/models", []string{"Authorization", "Bearer wrong", "X-Api-Key", key}, 200},
		{"/metrics", []string{"X-Api-Key", key}, 200},
		{"/status.json", []string{"X-Api-Key", key}, 200},
		{"/metrics", nil, 401},
	} {
		resp, body := fetch(t, http.MethodGet, ts.URL+tc.path, tc.header...)
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s %q: %d %s, want %d", tc.path, tc.header, resp.StatusCode, body, tc.want)
		}
	}
	status, _, body := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Lily"}],"max_tokens":2}`, "X-Api-Key", key)
	if status != 200 {
		t.Errorf("chat with X-Api-Key: %d %s", status, body)
	}
	status, _, body = post(t, ts.URL+"/v1/chat/completions", `{}`)
	if status != 401 || !strings.Contains(string(body), "X-Api-Key") {
		t.Errorf("the 401 does not name X-Api-Key: %d %s", status, body)
	}
}

// TestModelAliases: a request naming an alias is served (the answer names
// the served model, as vLLM's does); /v1/models lists the name then the
// aliases.
func TestModelAliases(t *testing.T) {
	ts := storiesServer(t, 4, Options{ModelAliases: []string{"gpt-4o-mini", "test-model", "Qwen/Qwen3-8B", "gpt-4o-mini"}})
	c := ts.client()
	models, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if want := []string{"test-model", "gpt-4o-mini", "Qwen/Qwen3-8B"}; !slices.Equal(ids, want) {
		t.Errorf("/v1/models lists %q, want %q", ids, want)
	}
	if m, err := c.Models.Get(context.Background(), "gpt-4o-mini"); err != nil || m.ID != "gpt-4o-mini" {
		t.Errorf("/v1/models/gpt-4o-mini: %+v %v", m, err)
	}
	for _, name := range []string{"gpt-4o-mini", "Qwen/Qwen3-8B", "test-model"} {
		p := userChat("Lily")
		p.Model = name
		p.MaxTokens = openai.Int(2)
		got, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Errorf("model %q: %v", name, err)
			continue
		}
		if got.Model != "test-model" {
			t.Errorf("model %q answered as %q", name, got.Model)
		}
		cmpl, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(name),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Lily")}, MaxTokens: openai.Int(2)})
		if err != nil || cmpl.Model != "test-model" {
			t.Errorf("completions, model %q: %+v %v", name, cmpl, err)
		}
	}
	p := userChat("Lily")
	p.Model = "gpt-4o"
	_, err = c.Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("an unknown model: %v", err)
	}
	if _, err := newServer(Options{ModelName: "m", ModelAliases: []string{"a", ""}}, qwen3Tokenizer(t), 64, nil); err == nil ||
		!strings.Contains(err.Error(), "ModelAliases[1]") {
		t.Errorf("an empty alias: %v", err)
	}
}

// TestAssistantTurnsInARow: the Qwen templates render two assistant
// messages in a row as two closed assistant turns, and a final assistant
// message followed by the generation prompt as two more; both are a 400
// naming the message. A template that checks alternation itself refuses
// to render, which is a 400 on messages.
func TestAssistantTurnsInARow(t *testing.T) {
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
		"function": map[string]any{"name": "bash", "arguments": `{"command":"ls"}`}}}}
	tool := map[string]any{"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
	cases := []struct {
		name      string
		messages  []any
		extra     map[string]any
		wantParam string // "" : accepted
	}{
		{"two in a row", []any{msg("user", "Hi"), msg("assistant", "First."), msg("assistant", "Second."), msg("user", "And?")}, nil, "messages[2]"},
		{"text then a call", []any{msg("user", "Hi"), msg("assistant", "Let me look."), call, tool}, nil, "messages[2]"},
		{"ends with the assistant", []any{msg("user", "Hi"), msg("assistant", "Hello")}, nil, "messages[1]"},
		{"ends with the assistant, no generation prompt", []any{msg("user", "Hi"), msg("assistant", "Hello")}, map[string]any{"add_generation_prompt": false}, ""},
		{"agent turns", []any{msg("system", "Be brief."), msg("user", "Hi"), call, tool, msg("assistant", "Done."), msg("user", "Thanks"), msg("user", "Bye")}, nil, ""},
	}
	tok := qwen3Tokenizer(t)
	for _, model := range []string{"qwen3", "qwen35"} {
		ts := scriptedServer(t, qwenTemplate(t, model), &scriptedSource{tok: tok, turns: []string{"OK.", "OK."}})
		for _, tc := range cases {
			body := map[string]any{"model": "test-model", "messages": tc.messages, "max_tokens": 4,
				"tools": []any{json.RawMessage(bashTool)}}
			for k, v := range tc.extra {
				body[k] = v
			}
			data, _ := json.Marshal(body)
			paths := []string{"/apply-template"}
			if tc.extra == nil { // a generation needs the generation prompt
				paths = append(paths, "/v1/chat/completions")
			}
			for _, path := range paths {
				status, _, resp := post(t, ts.URL+path, string(data))
				if tc.wantParam == "" {
					if status != 200 {
						t.Errorf("%s %s %s: %d %s", model, tc.name, path, status, resp)
					}
					continue
				}
				if status != 400 {
					t.Errorf("%s %s %s: %d %s, want 400 on %s", model, tc.name, path, status, resp, tc.wantParam)
					continue
				}
				if e := checkErrorShape(t, resp); e["param"] != tc.wantParam {
					t.Errorf("%s %s %s: %d %s, want 400 on %s", model, tc.name, path, status, resp, tc.wantParam)
				}
			}
		}
	}

	// A template that raises on bad alternation, as many Hugging Face
	// templates do: its own message, on messages.
	strict, err := chat.NewTemplate("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"+
		"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"+
		"{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ts := scriptedServer(t, strict, &scriptedSource{tok: tok, turns: []string{"OK."}})
	status, _, resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`)
	if e := checkErrorShape(t, resp); status != 400 || e["param"] != "messages" || !strings.Contains(e["message"].(string), "must alternate") {
		t.Errorf("a template's own refusal: %d %s", status, resp)
	}
}
