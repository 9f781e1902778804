package web

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/bench"
	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

const agentTrace = "../bench/testdata/agentic_coding_2.5h.jsonl"

func loadTrace(t *testing.T) *bench.Trace {
	t.Helper()
	tr, err := bench.LoadTrace(agentTrace)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCachedTokensAgentConversation replays the first turns of a recorded
// agent conversation through a server whose engine has the prefix cache,
// and through one without: usage.prompt_tokens_details.cached_tokens is
// the previous turn's stable boundary from the second turn on (and the log
// line says so), and the answers are the same as cold.
func TestCachedTokensAgentConversation(t *testing.T) {
	path := qwen35Model(t)
	warmEng, err := engine.Load(path, engine.Options{Threads: 1, KVType: tensor.F16, ContextLen: 16384, CacheMaxBytes: 1 << 30, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { warmEng.Close() })
	coldEng, err := engine.Load(path, engine.Options{Threads: 1, KVType: tensor.F16, ContextLen: 16384, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coldEng.Close() })
	warm := startServer(t, warmEng, 1, Options{})
	cold := startServer(t, coldEng, 1, Options{})
	tr := loadTrace(t)
	off := false
	opts := bench.RequestOptions{Temperature: 0, Seed: 1, MaxTokens: 4, IgnoreEOS: true, EnableThinking: &off}
	type answer struct {
		text   string
		usage  usage
		logged float64
	}
	ask := func(ts *testServer, tn bench.Turn, id string) answer {
		body, err := bench.ChatBody(tn.Messages, tn.Tools, opts)
		if err != nil {
			t.Fatal(err)
		}
		status, _, data := post(t, ts.URL+"/v1/chat/completions", string(body), "X-Request-ID", id)
		if status != 200 {
			t.Fatalf("status %d: %s", status, data)
		}
		var a answer
		for _, ev := range sseEvents(t, data) {
			if ev == "[DONE]" {
				continue
			}
			var c chatChunk
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.Choices {
				if ch.Delta.Content != nil {
					a.text += *ch.Delta.Content
				}
				if ch.Delta.ReasoningContent != nil {
					a.text += *ch.Delta.ReasoningContent
				}
				for _, tc := range ch.Delta.ToolCalls {
					a.text += tc.Function.Name + tc.Function.Arguments
				}
			}
			if c.Usage != nil {
				a.usage = *c.Usage
			}
		}
		a.logged, _ = ts.logs.requestLine(t, id)["cached_prompt_tokens"].(float64)
		return a
	}
	conv := tr.Conversations[0].Requests
	prevStable := 0
	for i := 0; i < min(3, len(conv)); i++ {
		w := ask(warm, conv[i], fmt.Sprintf("warm-%d", i))
		c := ask(cold, conv[i], fmt.Sprintf("cold-%d", i))
		if w.text != c.text {
			t.Errorf("turn %d: warm answer %q, cold %q", i, w.text, c.text)
		}
		if c.usage.PromptTokensDetails.CachedTokens != 0 {
			t.Errorf("turn %d: the cache-less server reports %d cached tokens", i, c.usage.PromptTokensDetails.CachedTokens)
		}
		got := w.usage.PromptTokensDetails.CachedTokens
		if got != prevStable {
			t.Errorf("turn %d: %d cached tokens of %d, want the previous turn's stable boundary %d", i, got, w.usage.PromptTokens, prevStable)
		}
		if int(w.logged) != got {
			t.Errorf("turn %d: log line says %v cached tokens, usage %d", i, w.logged, got)
		}
		if i > 0 && got == 0 {
			t.Errorf("turn %d: nothing cached", i)
		}
		t.Logf("turn %d: %d prompt tokens, %d cached", i, w.usage.PromptTokens, got)
		req := bench.TemplateRequest(conv[i].Messages, conv[i].Tools, false)
		text, _ := warm.api.tpl.Render(req)
		ids := warm.api.pipe.EncodePrompt(text, nil)
		prevStable = warm.api.pipe.PublishPoints(req, text, ids)[0]
	}
}

// TestIdenticalRepeatHitsTheCache: the same chat request twice reuses at
// least 95% of its prompt from the prefix cache the second time, on
// stories260K (no chat template: the ChatML fallback) and on the qwen35
// model with the Qwen3 template (recurrent state: a snapshot must exist at
// the very position).
func TestIdenticalRepeatHitsTheCache(t *testing.T) {
	for _, path := range []string{storiesPath, qwen35Model(t)} {
		eng, err := engine.Load(path, engine.Options{Threads: 1, KVType: tensor.F16, ContextLen: 4096, CacheMaxBytes: 1 << 30, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, eng, 1, Options{})
		body := `{"messages":[{"role":"system","content":"You are a careful assistant who answers in one line."},` +
			`{"role":"user","content":"Once upon a time there was a little fox who lived by the river. What did the fox do?"}],` +
			`"max_tokens":4,"temperature":0}`
		var cached, prompt [2]int
		for i := range cached {
			status, _, data := post(t, ts.URL+"/v1/chat/completions", body)
			if status != 200 {
				t.Fatalf("%s: status %d: %s", path, status, data)
			}
			var r struct{ Usage usage }
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			cached[i], prompt[i] = r.Usage.PromptTokensDetails.CachedTokens, r.Usage.PromptTokens
		}
		if cached[0] != 0 || cached[1]*100 < prompt[1]*95 {
			t.Errorf("%s: cached tokens %v of %v, want 0 then at least 95%%", path, cached, prompt)
		}
		eng.Close()
	}
}
