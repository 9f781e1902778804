package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseEvent is one scripted server event: wait, then write data.
type sseEvent struct {
	wait time.Duration
	data string // written as "data: <data>\n\n"; raw when it starts with "RAW:"
	// output marks an event that carries content, reasoning or tool calls.
	output bool
}

// scriptedServer streams events and records when it sent each one.
type scriptedServer struct {
	*httptest.Server
	mu    sync.Mutex
	sent  []time.Time
	begin time.Time
}

func newScriptedServer(t *testing.T, status int, events []sseEvent) *scriptedServer {
	s := &scriptedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		s.mu.Lock()
		s.begin = time.Now()
		s.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, `{"error":{"message":"model is loading"}}`, status)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		for _, e := range events {
			// Pacing the scripted stream (not synchronisation); a client
			// that went away ends the handler.
			select {
			case <-time.After(e.wait):
			case <-r.Context().Done():
				return
			}
			// Noted before writing, so that the client cannot see it earlier.
			s.mu.Lock()
			s.sent = append(s.sent, time.Now())
			s.mu.Unlock()
			if raw, ok := strings.CutPrefix(e.data, "RAW:"); ok {
				io.WriteString(w, raw)
			} else {
				fmt.Fprintf(w, "data: %s\n\n", e.data)
			}
			fl.Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func chunkJSON(delta string) string {
	return `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

// TestStreamTimings: TTFT runs from sending to the first delta that carries
// output — the role-only and empty-content chunks before it do not count —
// and TPOT spreads the time from that delta to the last output delta over
// the tokens after the first. The server paces its chunks and notes when it
// sent each; the client's clock must agree.
func TestStreamTimings(t *testing.T) {
	const (
		firstOutput = 150 * time.Millisecond
		gap         = 25 * time.Millisecond
	)
	events := []sseEvent{
		{wait: 30 * time.Millisecond, data: chunkJSON(`{"role":"assistant","content":""}`)},
		{wait: 10 * time.Millisecond, data: chunkJSON(`{"content":""}`)},
		{wait: firstOutput - 40*time.Millisecond, data: chunkJSON(`{"content":"I will "}`), output: true},
		{wait: gap, data: chunkJSON(`{"reasoning_content":"look"}`), output: true},
		{wait: gap, data: chunkJSON(`{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"bash","arguments":""}}]}`), output: true},
		{wait: gap, data: chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\": "}}]}`), output: true},
		{wait: gap, data: chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`), output: true},
		{wait: gap, data: `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`},
		{data: `{"id":"x","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":5,"total_tokens":125,"prompt_tokens_details":{"cached_tokens":96}}}`},
		{data: "[DONE]"},
	}
	srv := newScriptedServer(t, http.StatusOK, events)
	c := &Client{BaseURL: srv.URL}
	s, err := c.StreamChat(context.Background(), []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}

	// The arithmetic.
	if s.TTFT() != s.First.Sub(s.Sent) {
		t.Fatalf("TTFT %v != first output %v − sent", s.TTFT(), s.First.Sub(s.Sent))
	}
	const tokens = 5
	if want := s.Last.Sub(s.First) / (tokens - 1); s.TPOT(tokens) != want {
		t.Fatalf("TPOT %v, want (last − first)/(n − 1) = %v", s.TPOT(tokens), want)
	}
	if s.TPOT(1) != 0 || s.TPOT(0) != 0 {
		t.Fatal("TPOT of fewer than two tokens must be 0")
	}

	// The clock: output events are the 3rd..7th the server sent.
	srv.mu.Lock()
	firstSent, lastSent, begin := srv.sent[2], srv.sent[6], srv.begin
	srv.mu.Unlock()
	const slack = 100 * time.Millisecond // scheduling on a loaded machine
	if s.First.Before(firstSent) || s.First.Sub(firstSent) > slack {
		t.Errorf("first output seen at +%v, sent at +%v", s.First.Sub(s.Sent), firstSent.Sub(s.Sent))
	}
	if s.Last.Before(lastSent) || s.Last.Sub(lastSent) > slack {
		t.Errorf("last output seen at +%v, sent at +%v", s.Last.Sub(s.Sent), lastSent.Sub(s.Sent))
	}
	if s.Sent.After(begin) {
		t.Errorf("sent after the server began answering")
	}
	if s.TTFT() < firstOutput {
		t.Errorf("TTFT %v shorter than the server's %v to first output: a role-only chunk was counted", s.TTFT(), firstOutput)
	}
	if s.TPOT(tokens) < gap {
		t.Errorf("TPOT %v shorter than the %v between output chunks", s.TPOT(tokens), gap)
	}

	// What was said.
	if s.OutputChunks != 5 || s.Content != "I will " || s.Reasoning != "look" || s.FinishReason != "tool_calls" {
		t.Errorf("stream %+v", s)
	}
	if len(s.ToolCalls) != 1 || s.ToolCalls[0].ID != "call_0" || s.ToolCalls[0].Function.Name != "bash" || s.ToolCalls[0].Function.Arguments != `{"command": "ls"}` {
		t.Errorf("tool calls %+v", s.ToolCalls)
	}
	if s.Usage == nil || s.Usage.PromptTokens != 120 || s.Usage.CompletionTokens != 5 || s.Usage.CachedTokens() != 96 {
		t.Errorf("usage %+v", s.Usage)
	}
	if s.Done.Before(s.Last) {
		t.Errorf("done before the last chunk")
	}
}

func TestStreamParsing(t *testing.T) {
	events := []sseEvent{
		{data: "RAW:: keep-alive comment\r\n\r\n"},
		{data: "RAW:event: message\r\ndata:" + chunkJSON(`{"reasoning":"vllm "}`) + "\r\n\r\n", output: true},
		// One event split over two data lines (joined with a newline: JSON whitespace).
		{data: "RAW:data: {\"choices\":[{\"index\":0,\"delta\":\ndata: {\"content\":\"ok\"}}]}\n\n", output: true},
		{data: chunkJSON(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"pwd\"}"}}]}`), output: true},
		{data: chunkJSON(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"ba","arguments":"{}"}}]}`), output: true},
		{data: chunkJSON(`{"tool_calls":[{"index":0,"function":{"name":"sh"}}]}`), output: true},
		{data: `{"choices":[{"index":1,"delta":{"content":"other choice"}}]}`},
		{data: "RAW:data: [DONE]"}, // no trailing blank line
	}
	srv := newScriptedServer(t, http.StatusOK, events)
	s, err := (&Client{BaseURL: srv.URL + "/v1/"}).StreamChat(context.Background(), []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reasoning != "vllm " || s.Content != "ok" || s.OutputChunks != 5 {
		t.Errorf("reasoning %q content %q chunks %d", s.Reasoning, s.Content, s.OutputChunks)
	}
	if len(s.ToolCalls) != 2 || s.ToolCalls[0].Function.Name != "bash" || s.ToolCalls[0].ID != "a" ||
		s.ToolCalls[1].Function.Arguments != `{"command":"pwd"}` {
		t.Errorf("tool calls %+v", s.ToolCalls)
	}
	if s.Usage.CachedTokens() != -1 {
		t.Errorf("no usage must read as unknown cached tokens")
	}
	m := s.Message()
	if m.Content.String() != "ok" || m.ReasoningContent == nil || len(m.ToolCalls) != 2 {
		t.Errorf("message %+v", m)
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		events []sseEvent
		want   string
	}{
		{"http status", http.StatusServiceUnavailable, nil, "503 Service Unavailable: {\"error\":{\"message\":\"model is loading\"}}"},
		{"error event", http.StatusOK, []sseEvent{{data: chunkJSON(`{"content":"a"}`)}, {data: `{"error":{"message":"context full"}}`}}, "server error in stream: context full"},
		{"cut short", http.StatusOK, []sseEvent{{data: chunkJSON(`{"content":"a"}`)}}, "stream ended before data: [DONE]"},
		{"bad chunk", http.StatusOK, []sseEvent{{data: `{"choices":`}}, "bad SSE chunk"},
		{"tool index", http.StatusOK, []sseEvent{{data: chunkJSON(`{"tool_calls":[{"index":100000}]}`)}}, "tool_calls index 100000 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptedServer(t, tc.status, tc.events)
			s, err := (&Client{BaseURL: srv.URL}).StreamChat(context.Background(), []byte(`{}`), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if s == nil {
				t.Fatal("no partial stream returned")
			}
		})
	}
}

func TestStreamTimeout(t *testing.T) {
	srv := newScriptedServer(t, http.StatusOK, []sseEvent{{wait: 2 * time.Second, data: "[DONE]"}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&Client{BaseURL: srv.URL}).StreamChat(ctx, []byte(`{}`), nil)
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("error %v after %v, want a deadline error at once", err, time.Since(start))
	}
}

// FuzzStreamRead: any SSE body is read to an error or [DONE], never a panic.
func FuzzStreamRead(f *testing.F) {
	f.Add("data: " + chunkJSON(`{"content":"a"}`) + "\n\ndata: [DONE]\n\n")
	f.Add("data: " + chunkJSON(`{"tool_calls":[{"index":1,"function":{"name":"x","arguments":"{"}}]}`) + "\r\n\r\n: c\n\ndata: [DONE]")
	f.Fuzz(func(t *testing.T, body string) {
		s := &Stream{Sent: time.Now()}
		_ = s.read(strings.NewReader(body))
		if len(s.ToolCalls) > maxToolCalls {
			t.Fatalf("%d tool calls", len(s.ToolCalls))
		}
	})
}
