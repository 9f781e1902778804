package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// answer is what the fake server streams for one request.
type answer struct {
	status   int    // non-200: an error answer
	hang     bool   // never answer (until the client gives up)
	content  string // streamed in two pieces
	command  string // a bash tool call when not empty
	prompt   int    // usage.prompt_tokens
	cached   int    // usage.prompt_tokens_details.cached_tokens
	complete int    // usage.completion_tokens
}

// seenRequest is what the fake server was sent.
type seenRequest struct {
	session string
	index   int // the request's position in its session
	body    map[string]any
	msgs    int
}

// fakeOpenAI speaks the OpenAI streaming protocol with scripted answers,
// and checks that a session never has two requests in flight.
type fakeOpenAI struct {
	t      *testing.T
	script func(session string, index int) answer
	// gate, when set, holds each session's first request until it is closed.
	gate chan struct{}

	mu       sync.Mutex
	seen     []seenRequest
	count    map[string]int
	inFlight map[string]bool
	maxBusy  int
	busy     int
}

func newFakeOpenAI(t *testing.T, script func(session string, index int) answer) (*fakeOpenAI, *httptest.Server) {
	f := &fakeOpenAI{t: t, script: script, count: map[string]int{}, inFlight: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	session := r.Header.Get("X-Session-ID")
	if key := r.Header.Get("X-Session-Key"); key != session {
		f.t.Errorf("X-Session-Key %q, want the conversation's id %q", key, session)
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	var req chat.Request
	if err := json.Unmarshal(raw, &body); err != nil || json.Unmarshal(raw, &req) != nil || session == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.inFlight[session] {
		f.t.Errorf("session %s: a request was sent before the previous one finished", session)
	}
	f.inFlight[session] = true
	f.busy++
	f.maxBusy = max(f.maxBusy, f.busy)
	index := f.count[session]
	f.count[session]++
	f.seen = append(f.seen, seenRequest{session: session, index: index, body: body, msgs: len(req.Messages)})
	f.mu.Unlock()
	// The request is over for the client once it has [DONE] (or an error):
	// mark it finished before that is written.
	finished := false
	finish := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !finished {
			finished = true
			f.inFlight[session] = false
			f.busy--
		}
	}
	defer finish()
	if f.gate != nil && index == 0 {
		select {
		case <-f.gate:
		case <-r.Context().Done():
			return
		}
	}

	a := f.script(session, index)
	if a.hang {
		<-r.Context().Done()
		return
	}
	if a.status != 0 && a.status != http.StatusOK {
		finish()
		http.Error(w, `{"error":{"message":"scripted failure"}}`, a.status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v string) {
		fmt.Fprintf(w, "data: %s\n\n", v)
		fl.Flush()
	}
	pause := func() { // pacing, so that TTFT and TPOT are not zero
		select {
		case <-time.After(2 * time.Millisecond):
		case <-r.Context().Done():
		}
	}
	send(chunkJSON(`{"role":"assistant","content":""}`))
	pause()
	if a.content != "" {
		half := len(a.content) / 2
		for _, piece := range []string{a.content[:half], a.content[half:]} {
			b, _ := json.Marshal(piece)
			send(chunkJSON(`{"content":` + string(b) + `}`))
			pause()
		}
	}
	if a.command != "" {
		args, _ := json.Marshal(map[string]string{"command": a.command})
		argsJSON, _ := json.Marshal(string(args))
		send(chunkJSON(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}`))
		pause()
		send(chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":` + string(argsJSON) + `}}]}`))
		pause()
	}
	send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	send(fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		a.prompt, a.complete, a.prompt+a.complete, a.cached))
	finish()
	send("[DONE]")
}

// recordedCommand is the first bash command of a recorded answer.
func recordedCommand(t *testing.T, m *chat.Message) string {
	t.Helper()
	var args struct {
		Command string `json:"command"`
	}
	if m == nil || len(m.ToolCalls) == 0 || json.Unmarshal([]byte(m.ToolCalls[0].Function.Arguments), &args) != nil {
		t.Fatalf("no recorded bash command in %+v", m)
	}
	return args.Command
}

func sessionIndex(tr *Trace, id string) int {
	for i, c := range tr.Conversations {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// TestReplayTwoConversations replays --conversations 2 --turns 3 against a
// server that streams scripted answers, and checks every figure against
// what the script and the trace imply, computed here independently.
func TestReplayTwoConversations(t *testing.T) {
	tr := loadTrace(t)
	c := qwenCounter(t)
	script := func(session string, index int) answer {
		conv := tr.Conversations[sessionIndex(tr, session)]
		a := answer{prompt: 1000 + index, cached: 10 * index, complete: 7}
		switch index {
		case 0: // the recorded command: IoU 1
			a.command = recordedCommand(t, conv.Requests[0].Expected)
		case 1: // a different one, with some text
			a.content, a.command = "Let me look.", "echo hi | grep h"
		case 2: // no tool call at all
			a.content = "I am done."
		}
		return a
	}
	fake, srv := newFakeOpenAI(t, script)
	client := &Client{BaseURL: srv.URL}
	models, err := client.ListModels(context.Background())
	if err != nil || len(models) != 1 || models[0] != "fake-model" {
		t.Fatalf("models %v, %v", models, err)
	}
	var progress []Progress
	off := false
	cfg := Config{
		Client: client, Trace: tr, Counter: c,
		Request:       RequestOptions{Model: models[0], Seed: 42, MaxTokens: 1024, EnableThinking: &off},
		Conversations: 2, Turns: 3,
		Progress: func(p Progress) { progress = append(progress, p) },
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	// What the server saw.
	if len(fake.seen) != 6 || len(progress) != 6 || progress[5].Done != 6 || progress[5].Total != 6 {
		t.Fatalf("%d requests seen, %d progress calls", len(fake.seen), len(progress))
	}
	for i, s := range fake.seen {
		want := tr.Conversations[i/3].Requests[i%3]
		if s.session != want.ConversationID || s.index != i%3 || s.msgs != len(want.Messages) {
			t.Errorf("request %d: session %s index %d with %d messages; want %s, %d, %d", i, s.session, s.index, s.msgs, want.ConversationID, i%3, len(want.Messages))
		}
		if s.body["model"] != "fake-model" || s.body["stream"] != true || s.body["temperature"] != 0.0 || s.body["seed"] != 42.0 || s.body["max_completion_tokens"] != 1024.0 {
			t.Errorf("request %d: body settings %v %v %v %v %v", i, s.body["model"], s.body["stream"], s.body["temperature"], s.body["seed"], s.body["max_completion_tokens"])
		}
		if _, ok := s.body["tool_choice"]; ok {
			t.Errorf("request %d: tool_choice sent", i)
		}
	}

	// The figures, recomputed here.
	var prompts [][]int32
	var wantPrompt, wantIdeal, wantOutput int64
	var iouSum float64
	iouN := 0
	for i, r := range res.Records {
		turn := tr.Conversations[i/3].Requests[i%3]
		ids, err := c.Prompt(turn.Messages, turn.Tools)
		if err != nil {
			t.Fatal(err)
		}
		ideal := 0
		for _, p := range prompts { // the naive way: every earlier prompt
			n := 0
			for n < len(p) && n < len(ids) && p[n] == ids[n] {
				n++
			}
			ideal = max(ideal, n)
		}
		prompts = append(prompts, ids)
		a := script(turn.ConversationID, i%3)
		m := chat.Message{Role: "assistant", Content: chat.TextContent(a.content)}
		if a.command != "" {
			args, _ := json.Marshal(map[string]string{"command": a.command})
			m.ToolCalls = []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "bash", Arguments: string(args)}}}
		}
		out, err := c.Answer(m)
		if err != nil {
			t.Fatal(err)
		}
		wantPrompt += int64(len(ids))
		wantIdeal += int64(ideal)
		wantOutput += int64(out)
		if r.ConversationID != turn.ConversationID || r.Turn != turn.Turn || !r.Completed || r.Error != "" {
			t.Errorf("record %d: %+v", i, r)
		}
		if r.PromptTokens != len(ids) || r.IdealCachedTokens != ideal || r.OutputTokens != out ||
			r.ServerPromptTokens != a.prompt || r.CachedTokens != a.cached || r.ServerOutputTokens != 7 {
			t.Errorf("record %d: prompt %d ideal %d output %d server %d/%d/%d; want %d %d %d %d/%d/7",
				i, r.PromptTokens, r.IdealCachedTokens, r.OutputTokens, r.ServerPromptTokens, r.CachedTokens, r.ServerOutputTokens,
				len(ids), ideal, out, a.prompt, a.cached)
		}
		if r.TTFTms <= 0 || r.TTFTms > r.LatencyMs || r.EndS < r.StartS {
			t.Errorf("record %d: TTFT %v ms, latency %v ms, start %v end %v", i, r.TTFTms, r.LatencyMs, r.StartS, r.EndS)
		}
		if want := ms(r.stream.Last.Sub(r.stream.First) / time.Duration(out-1)); r.TPOTms != want {
			t.Errorf("record %d: TPOT %v ms, want (last − first)/(output − 1) = %v", i, r.TPOTms, want)
		}
		wantActions := BashActions(turn.Expected.ToolCalls)
		if len(wantActions) > 0 {
			iou := IoU(wantActions, BashActions(m.ToolCalls))
			if r.IoU == nil || *r.IoU != iou {
				t.Errorf("record %d: IoU %v, want %v", i, r.IoU, iou)
			}
			iouSum += iou
			iouN++
		}
		if i%3 == 0 && (r.IoU == nil || *r.IoU != 1) {
			t.Errorf("record %d: answering the recorded command must score 1, got %v", i, r.IoU)
		}
	}
	s := res.Summary
	if !s.Valid || s.Turns != 6 || s.CompletedTurns != 6 || s.MissingTurns != 0 || s.Conversations != 2 || s.TokenSource != "client" {
		t.Errorf("summary %+v", s)
	}
	if s.PromptTokens != wantPrompt || s.IdealCachedPromptTokens != wantIdeal || s.OutputTokens != wantOutput {
		t.Errorf("summary prompt %d ideal %d output %d; want %d %d %d", s.PromptTokens, s.IdealCachedPromptTokens, s.OutputTokens, wantPrompt, wantIdeal, wantOutput)
	}
	if s.ServerPromptTokens != 2*(1000+1001+1002) || s.CachedPromptTokens != 2*(0+10+20) || s.ServerOutputTokens != 42 || !s.CachedReported {
		t.Errorf("summary server figures %+v", s)
	}
	if s.IoU == nil || *s.IoU != round4(iouSum/float64(iouN)) || s.IoUTurns != iouN {
		t.Errorf("summary IoU %v over %d, want %v over %d", s.IoU, s.IoUTurns, iouSum/float64(iouN), iouN)
	}
	if want := round2(float64(wantOutput) / res.Duration.Seconds()); math.Abs(s.OutputTokS-want) > 0.02 {
		t.Errorf("output tok/s %v, want %v", s.OutputTokS, want)
	}
	if s.TTFTmsP50 <= 0 || s.TTFTmsP90 < s.TTFTmsP50 || s.TPOTmsP50 <= 0 {
		t.Errorf("percentiles %+v", s)
	}

	checkReport(t, res)
}

// checkReport writes the report files and reads them back.
func checkReport(t *testing.T, res *Result) {
	t.Helper()
	dir := t.TempDir()
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	var summary map[string]any
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil || json.Unmarshal(b, &summary) != nil {
		t.Fatalf("summary.json: %v", err)
	}
	for _, k := range []string{"valid", "turns", "missing_turns", "prompt_tokens", "cached_prompt_tokens", "ideal_cached_prompt_tokens",
		"output_tokens", "duration_s", "output_tok_s", "ttft_ms_p50", "ttft_ms_p90", "tpot_ms_p50", "tpot_ms_p90", "iou"} {
		if _, ok := summary[k]; !ok {
			t.Errorf("summary.json lacks %q", k)
		}
	}
	f, err := os.Open(filepath.Join(dir, PerTurnFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"conversation", "turn", "prompt_tokens", "cached_tokens", "ideal_cached_tokens", "output_tokens", "ttft_ms", "tpot_ms", "iou", "error"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("per_turn.jsonl line %d lacks %q", lines+1, k)
			}
		}
		lines++
	}
	if lines != len(res.Records) {
		t.Errorf("per_turn.jsonl has %d lines, want %d", lines, len(res.Records))
	}
	text, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	verdict := "VALID"
	if !res.Summary.Valid {
		verdict = "INVALID"
	}
	if !strings.Contains(string(text), "result       "+verdict) || !strings.Contains(string(text), res.Records[0].ConversationID) {
		t.Errorf("report.txt:\n%s", text)
	}
	for _, name := range []string{TTFTPlotFile, CachePlotFile, CumulativePlotFile} {
		pf, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(pf)
		pf.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: not a PNG plot: %v", name, err)
		}
	}
}

// TestReplayFailures: a failed turn aborts the rest of its conversation and
// marks the run invalid; a turn that hangs times out; the other
// conversation still runs; a failed turn scores IoU 0, a turn never issued is
// not scored.
func TestReplayFailures(t *testing.T) {
	tr := loadTrace(t)
	second := tr.Conversations[1].ID
	_, srv := newFakeOpenAI(t, func(session string, index int) answer {
		switch {
		case session != second && index == 1:
			return answer{status: http.StatusInternalServerError}
		case session == second && index == 2:
			return answer{hang: true}
		}
		return answer{content: "ok", prompt: 10, complete: 2}
	})
	res, err := Run(context.Background(), Config{
		Client: &Client{BaseURL: srv.URL}, Trace: tr, Request: RequestOptions{Model: "m"},
		Conversations: 2, Turns: 4, TurnTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Valid || s.Turns != 8 || s.CompletedTurns != 3 || s.MissingTurns != 5 || s.TokenSource != "server" {
		t.Fatalf("summary %+v", s)
	}
	r := res.Records
	if !r[0].Completed || !strings.Contains(r[1].Error, "500 Internal Server Error") ||
		!strings.HasPrefix(r[2].Error, "not issued: turn") || r[2].Seq != -1 || r[3].Seq != -1 {
		t.Errorf("first conversation: %q %q %q", r[0].Error, r[1].Error, r[2].Error)
	}
	if !r[4].Completed || !r[5].Completed || !strings.Contains(r[6].Error, "turn timed out after 300ms") || !strings.HasPrefix(r[7].Error, "not issued") {
		t.Errorf("second conversation: %q %q %q %q", r[4].Error, r[5].Error, r[6].Error, r[7].Error)
	}
	if r[1].IoU == nil || *r[1].IoU != 0 || r[2].IoU != nil {
		t.Errorf("IoU of a failed turn %v (want 0), of one never issued %v (want none)", r[1].IoU, r[2].IoU)
	}
	if s.PromptTokens != 30 || s.OutputTokens != 6 {
		t.Errorf("without a tokenizer the server's counts are used: %d %d", s.PromptTokens, s.OutputTokens)
	}
	checkReport(t, res)
}

// TestReplayMaxTokensFromTrace: each request asks for exactly as many tokens
// as the recorded answer has (content and tool calls, reasoning off) and
// for EOS to be ignored.
func TestReplayMaxTokensFromTrace(t *testing.T) {
	tr := loadTrace(t)
	c := qwenCounter(t)
	fake, srv := newFakeOpenAI(t, func(string, int) answer { return answer{content: "x", prompt: 1, complete: 1} })
	cfg := Config{Client: &Client{BaseURL: srv.URL}, Trace: tr, Counter: c, Request: RequestOptions{Model: "m"},
		Conversations: 1, Turns: 3, MaxTokensFromTrace: true}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for i, s := range fake.seen {
		m := *tr.Conversations[0].Requests[i].Expected
		m.ReasoningContent = nil
		want, err := c.Answer(m)
		if err != nil {
			t.Fatal(err)
		}
		if s.body["max_completion_tokens"] != float64(want) || s.body["ignore_eos"] != true {
			t.Errorf("request %d: max_completion_tokens %v ignore_eos %v, want %d and true", i, s.body["max_completion_tokens"], s.body["ignore_eos"], want)
		}
	}
	if _, err := Run(context.Background(), Config{Client: cfg.Client, Trace: tr, MaxTokensFromTrace: true}); err == nil {
		t.Error("--max-tokens-from-trace without a tokenizer must fail")
	}
}

// TestReplayConcurrency: with --concurrency 2 two conversations are in
// flight at once (the server holds both first requests until both came),
// each still one request at a time.
func TestReplayConcurrency(t *testing.T) {
	tr := loadTrace(t)
	fake, srv := newFakeOpenAI(t, func(string, int) answer { return answer{content: "ok", prompt: 1, complete: 1} })
	fake.gate = make(chan struct{})
	go func() { // open the gate once both sessions have sent their first request
		deadline := time.After(5 * time.Second)
		for {
			fake.mu.Lock()
			n := len(fake.count)
			fake.mu.Unlock()
			if n == 2 {
				close(fake.gate)
				return
			}
			select {
			case <-deadline:
				close(fake.gate)
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	res, err := Run(context.Background(), Config{Client: &Client{BaseURL: srv.URL}, Trace: tr, Request: RequestOptions{Model: "m"},
		Conversations: 2, Turns: 2, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Summary.Valid || fake.maxBusy != 2 {
		t.Fatalf("valid %v, at most %d requests in flight (want 2)", res.Summary.Valid, fake.maxBusy)
	}
}

// TestReplayInterrupted: cancelling the context stops the replay and marks
// it interrupted; what was measured is kept.
func TestReplayInterrupted(t *testing.T) {
	tr := loadTrace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, srv := newFakeOpenAI(t, func(_ string, index int) answer {
		if index == 1 {
			cancel()
			return answer{hang: true}
		}
		return answer{content: "ok", prompt: 1, complete: 1}
	})
	res, err := Run(ctx, Config{Client: &Client{BaseURL: srv.URL}, Trace: tr, Request: RequestOptions{Model: "m"}, Conversations: 2, Turns: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Valid || !s.Interrupted || s.CompletedTurns != 1 {
		t.Fatalf("summary %+v", s)
	}
}
