package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestSessionKeyPerConversation sends two turns of two conversations to a
// real server for each source of the key, streamed and not, and checks
// that X-Session-Key is the same across a conversation's turns and
// different across the conversations.
func TestSessionKeyPerConversation(t *testing.T) {
	ts, src := scriptServer(t, Options{}, "ok")
	for range 128 { // the scripted model answers 64 turns; this sends 96
		src.turns = append(src.turns, "ok")
	}
	type conv struct {
		header http.Header
		turns  [2]string // the first turn's body and the second's
	}
	chatTurns := func(system, first string, extra string) [2]string {
		return [2]string{
			`{"model":"test-model","max_tokens":4,` + extra + `"messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"` + first + `"}]}`,
			`{"model":"test-model","max_tokens":4,` + extra + `"messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"` + first + `"},` +
				`{"role":"assistant","content":"ok"},{"role":"user","content":"and then?"}]}`,
		}
	}
	anthropicTurns := func(first, extra string) [2]string {
		return [2]string{
			`{"model":"test-model","max_tokens":4,` + extra + `"system":[{"type":"text","text":"You are terse."}],` +
				`"messages":[{"role":"user","content":[{"type":"text","text":"` + first + `","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"test-model","max_tokens":4,` + extra + `"system":[{"type":"text","text":"You are terse."}],` +
				`"messages":[{"role":"user","content":[{"type":"text","text":"` + first + `"}]},{"role":"assistant","content":"ok"},` +
				`{"role":"user","content":[{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]}]}`,
		}
	}
	responsesTurns := func(first, extra string) [2]string {
		return [2]string{
			`{"model":"test-model","max_output_tokens":16,` + extra + `"instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + first + `"}]}]}`,
			`{"model":"test-model","max_output_tokens":16,` + extra + `"instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + first + `"}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}]}`,
		}
	}
	hdr := func(k, v string) http.Header { return http.Header{http.CanonicalHeaderKey(k): {v}} }
	cases := []struct {
		name, path, source string
		convs              [2]conv
	}{
		{"X-Session-Key", "/v1/chat/completions", "X-Session-Key", [2]conv{
			{hdr("X-Session-Key", "k-1"), chatTurns("s", "hi", "")}, {hdr("X-Session-Key", "k-2"), chatTurns("s", "hi", "")}}},
		{"Claude Code", "/v1/messages?beta=true", "X-Claude-Code-Session-Id", [2]conv{
			{hdr("X-Claude-Code-Session-Id", "5f0c-a"), anthropicTurns("hi", "")}, {hdr("X-Claude-Code-Session-Id", "5f0c-b"), anthropicTurns("hi", "")}}},
		{"Codex", "/v1/responses", "Session-Id", [2]conv{
			{hdr("session-id", "019a-1"), responsesTurns("hi", `"prompt_cache_key":"019a-1",`)},
			{hdr("session-id", "019a-2"), responsesTurns("hi", `"prompt_cache_key":"019a-2",`)}}},
		{"OpenCode", "/v1/chat/completions", "X-Session-Id", [2]conv{
			{hdr("x-session-id", "ses_1"), chatTurns("s", "hi", "")}, {hdr("x-session-id", "ses_2"), chatTurns("s", "hi", "")}}},
		{"prompt_cache_key responses", "/v1/responses", "prompt_cache_key", [2]conv{
			{nil, responsesTurns("hi", `"prompt_cache_key":"pck-1",`)}, {nil, responsesTurns("hi", `"prompt_cache_key":"pck-2",`)}}},
		{"prompt_cache_key chat", "/v1/chat/completions", "prompt_cache_key", [2]conv{
			{nil, chatTurns("s", "hi", `"prompt_cache_key":"pck-1",`)}, {nil, chatTurns("s", "hi", `"prompt_cache_key":"pck-2",`)}}},
		{"metadata.user_id", "/v1/messages", "metadata.user_id", [2]conv{
			{nil, anthropicTurns("hi", `"metadata":{"user_id":"user_1_session_a"},`)},
			{nil, anthropicTurns("hi", `"metadata":{"user_id":"user_1_session_b"},`)}}},
		{"hash chat", "/v1/chat/completions", "hash", [2]conv{
			{nil, chatTurns("s", "fix the bug", "")}, {nil, chatTurns("s", "write a test", "")}}},
		{"hash chat system", "/v1/chat/completions", "hash", [2]conv{
			{nil, chatTurns("agent A", "hi", "")}, {nil, chatTurns("agent B", "hi", "")}}},
		{"hash anthropic", "/v1/messages", "hash", [2]conv{
			{nil, anthropicTurns("fix the bug", "")}, {nil, anthropicTurns("write a test", "")}}},
		{"hash responses", "/v1/responses", "hash", [2]conv{
			{nil, responsesTurns("fix the bug", "")}, {nil, responsesTurns("write a test", "")}}},
	}
	post := func(t *testing.T, path string, h http.Header, body string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return resp.Header.Get(sessionKeyHeader)
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				var keys [2]string
				for ci, c := range tc.convs {
					for ti, body := range c.turns {
						if stream {
							body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
						}
						k := post(t, tc.path, c.header, body)
						if k == "" {
							t.Fatalf("conversation %d turn %d: no %s", ci, ti, sessionKeyHeader)
						}
						if ti == 0 {
							keys[ci] = k
						} else if k != keys[ci] {
							t.Errorf("conversation %d: turn 1 key %q, turn 2 key %q", ci, keys[ci], k)
						}
					}
					// The source is the one the case is about.
					if _, src := sessionKey(c.header, []byte(c.turns[0])); src != tc.source {
						t.Errorf("conversation %d: key from %s, want %s", ci, src, tc.source)
					}
				}
				if keys[0] == keys[1] {
					t.Errorf("both conversations got key %q", keys[0])
				}
			})
		}
	}
	// A header-less client that sends back the key it was given stays on it.
	first := chatTurns("s", "sent back", "")
	k := post(t, "/v1/chat/completions", nil, first[0])
	if got := post(t, "/v1/chat/completions", hdr(sessionKeyHeader, k), first[1]); got != k {
		t.Errorf("key sent back: got %q, want %q", got, k)
	}
	// A Responses turn chained with previous_response_id carries only its
	// new input, and keeps the key of the response it follows.
	respond := func(body string) (key, id string) {
		t.Helper()
		resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/responses: %d %v", resp.StatusCode, err)
		}
		return resp.Header.Get(sessionKeyHeader), out.ID
	}
	var chainKeys []string
	for _, first := range []string{"chain one", "chain two"} {
		k1, id := respond(`{"model":"test-model","max_output_tokens":16,"instructions":"Be brief.","input":"` + first + `"}`)
		k2, _ := respond(`{"model":"test-model","max_output_tokens":16,"previous_response_id":"` + id + `","input":"and then?"}`)
		if k1 != k2 || !strings.HasPrefix(k1, "h-") {
			t.Errorf("%s: key %q, then %q after previous_response_id", first, k1, k2)
		}
		chainKeys = append(chainKeys, k1)
	}
	if chainKeys[0] == chainKeys[1] {
		t.Errorf("two chained conversations got key %q", chainKeys[0])
	}
	// /metrics counts the distinct keys: 2 per case and one more.
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "edgellmd_session_keys_total{") {
		t.Fatalf("/metrics has no edgellmd_session_keys_total")
	}
	// Keys repeat across cases (the hash of chatTurns("s","hi")
	// is never sent bare), so only a lower bound is exact.
	if n := ts.api.sessionKeys.count(); n < 2*uint64(len(cases))-4 {
		t.Errorf("distinct keys %d, want at least %d", n, 2*len(cases)-4)
	}
}

// TestSessionKeyPassOrHash: a key a header can carry passes as it is;
// a long one or one with control bytes is hashed.
func TestSessionKeyPassOrHash(t *testing.T) {
	if got := passKey("abc-123"); got != "abc-123" {
		t.Errorf("passKey(abc-123) = %q", got)
	}
	long := strings.Repeat("x", maxSessionKeyBytes+1)
	for _, v := range []string{long, "a\nb", "é"} {
		if got := passKey(v); !strings.HasPrefix(got, "h-") || len(got) != 26 {
			t.Errorf("passKey(%q) = %q, want h- and 24 hex digits", v, got)
		}
	}
}

// TestSessionKeySetBounded: the set empties itself at its cap.
func TestSessionKeySetBounded(t *testing.T) {
	var k sessionKeySet
	for i := range maxSessionKeysTracked + 10 {
		k.add("k" + strconv.Itoa(i))
	}
	if len(k.seen) > maxSessionKeysTracked {
		t.Errorf("set holds %d keys, cap %d", len(k.seen), maxSessionKeysTracked)
	}
	k.add("again")
	k.add("again")
	if k.count() != maxSessionKeysTracked+11 {
		t.Errorf("count %d, want %d", k.count(), maxSessionKeysTracked+11)
	}
}
