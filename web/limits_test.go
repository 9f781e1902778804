package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/openai/openai-go/v3"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
)

// scriptServer is a real server on 127.0.0.1:0 over a scripted model that
// answers every generation with text, under the given options, with the
// admin routes when admin is given.
func scriptServer(t *testing.T, opt Options, text string, admin ...AdminOptions) (*testServer, *scriptedSource) {
	t.Helper()
	src := &scriptedSource{tok: qwen3Tokenizer(t)}
	for range 64 {
		src.turns = append(src.turns, text)
	}
	logs := &logBuffer{}
	opt.ModelName = "test-model"
	opt.Template = qwenTemplate(t, "qwen3")
	opt.Log = zerolog.New(logs)
	api, err := newServer(opt, src.tok, 40960, src.generate)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range admin {
		RegisterAdmin(api.Router(), a)
	}
	ts := &testServer{Server: httptest.NewServer(api), api: api, logs: logs}
	t.Cleanup(ts.Close)
	return ts, src
}

// rawSend opens a connection to the server at url and writes a request's
// head and the start of its body, as a client that then stalls would.
func rawSend(t *testing.T, url, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c
}

// rawAnswer reads one response from c, failing the test if none comes
// within d, and reports whether the server then closed the connection
// (within another second).
func rawAnswer(t *testing.T, c net.Conn, d time.Duration) (resp *http.Response, body []byte, closed bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = br.ReadByte()
	return resp, body, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

// errorCode is the "code" of an OpenAI-style error body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	code, _ := checkErrorShape(t, body)["code"].(string)
	return code
}

// TestStalledBodyGets408: a client that announces a body and stops sending
// it gets a 408 when api.body_timeout runs out, and its connection is
// closed; before, the server waited for it forever.
func TestStalledBodyGets408(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts, src := scriptServer(t, Options{BodyTimeout: timeout}, "Hello.")
	for _, tc := range []struct{ name, head, body string }{
		{"content-length", "POST /v1/completions HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 1000\n", "{"},
		{"chunked", "POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked\n", "5\r\n{\"mes"},
	} {
		start := time.Now()
		c := rawSend(t, ts.URL, tc.head, tc.body)
		resp, body, closed := rawAnswer(t, c, 10*timeout)
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout || errorCode(t, body) != "request_body_timeout" {
			t.Errorf("%s: %d %s, want 408 request_body_timeout", tc.name, resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "api.body_timeout") {
			t.Errorf("%s: the message does not name the setting: %s", tc.name, body)
		}
		if took < timeout {
			t.Errorf("%s: answered after %v, before the deadline of %v", tc.name, took, timeout)
		}
		if !closed || !resp.Close { // resp.Close: the answer said "Connection: close"
			t.Errorf("%s: the connection stays open (Connection: close sent: %v)", tc.name, resp.Close)
		}
	}
	if n := len(src.calls); n != 0 {
		t.Errorf("%d generations ran", n)
	}
}

// TestRefusedBeforeTheBody: a bad key, a non-JSON media type or a missing
// admin key is answered from the headers at once, without waiting for a
// body that never comes, and the connection is closed.
func TestRefusedBeforeTheBody(t *testing.T) {
	ts, src := scriptServer(t, Options{APIKey: "s3cret", BodyTimeout: time.Minute}, "Hello.",
		AdminOptions{APIKey: "s3cret", Updater: &stateUpdater{dir: t.TempDir()}, Log: zerolog.Nop()})
	const post = "POST %s HTTP/1.1\nHost: x\nContent-Type: %s\nContent-Length: 1000\n%s"
	for _, tc := range []struct {
		name   string
		head   string
		status int
		code   string
	}{
		{"no key", fmt.Sprintf(post, "/v1/completions", "application/json", ""), 401, "invalid_api_key"},
		{"wrong key", fmt.Sprintf(post, "/v1/chat/completions", "application/json", "Authorization: Bearer nope\n"), 401, "invalid_api_key"},
		{"text/plain from another site", fmt.Sprintf(post, "/v1/completions", "text/plain", "Authorization: Bearer s3cret\nOrigin: https://evil.example\n"), 415, "unsupported_media_type"},
		{"admin, no key", fmt.Sprintf(post, "/admin/update", "application/x-tar", ""), 401, "invalid_api_key"},
	} {
		start := time.Now()
		c := rawSend(t, ts.URL, tc.head, "{")
		resp, body, closed := rawAnswer(t, c, drainGrace+2*time.Second)
		if resp.StatusCode != tc.status || errorCode(t, body) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, body, tc.status, tc.code)
		}
		if !closed || !resp.Close {
			t.Errorf("%s: the connection is held for the rest of the body (Connection: close sent: %v)", tc.name, resp.Close)
		}
		// what the client is still sending is read for drainGrace (so that
		// it sees the answer, not a reset), then the connection is closed:
		// far sooner than the minute the body could take
		if took := time.Since(start); took > drainGrace+time.Second {
			t.Errorf("%s: took %v", tc.name, took)
		}
	}
	if n := len(src.calls); n != 0 {
		t.Errorf("%d generations ran", n)
	}
}

// TestBodyDeadlineLiftedAfterTheBody: the body deadline covers the body
// only. A generation that outlasts it, after the body has arrived, is not
// cut (net/http reads the connection in the background while a handler
// runs; a deadline left in place would cancel the request), and the
// connection stays usable for the next request.
func TestBodyDeadlineLiftedAfterTheBody(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ts, src := scriptServer(t, Options{BodyTimeout: timeout}, "Once upon a time there was a cat.")
	src.pauseAt, src.resume = 5, make(chan struct{})
	start := time.Now() // before the timer: the generation cannot end before start+3*timeout
	time.AfterFunc(3*timeout, func() { close(src.resume) })
	c := ts.client()
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "test-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 3*timeout {
		t.Fatalf("the generation took %v: it did not outlast the body deadline", took)
	}
	if res.Choices[0].Text != "Once upon a time there was a cat." || src.timedOut {
		t.Fatalf("text %q (timed out %v)", res.Choices[0].Text, src.timedOut)
	}
	// The same connection, idle past the deadline, serves the next request.
	time.Sleep(2 * timeout)
	if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "test-model", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}}); err != nil {
		t.Fatal(err)
	}
}

// TestJSONRoutesNeedJSON: a body that does not say it is JSON gets 415 on
// every JSON route (a browser page could send text/plain without a CORS
// preflight); application/json with parameters, in any case, and the
// official client pass.
func TestJSONRoutesNeedJSON(t *testing.T) {
	ts, src := scriptServer(t, Options{CORSOrigins: []string{"https://app.example"}}, "Hello.")
	bodies := map[string]string{
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/completions":      `{"prompt":"hi"}`,
		"/tokenize":            `{"content":"hi"}`,
		"/detokenize":          `{"tokens":[1]}`,
		"/apply-template":      `{"messages":[{"role":"user","content":"hi"}]}`,
	}
	send := func(path, body, ct string, header ...string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, data
	}
	nonJSON := []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/jsonx", "application/json;;"}
	for path, body := range bodies {
		// A browser page of another origin (a cross-site simple request)
		// must send JSON as JSON.
		for _, ct := range nonJSON {
			for _, h := range [][]string{{"Origin", "https://evil.example"}, {"Origin", "null"}, {"Sec-Fetch-Site", "cross-site"}} {
				status, data := send(path, body, ct, h...)
				if status != http.StatusUnsupportedMediaType || errorCode(t, data) != "unsupported_media_type" ||
					!strings.Contains(string(data), "application/json") {
					t.Errorf("%s with %q and %s: %d %s, want 415", path, ct, h, status, data)
				}
			}
		}
		// Other clients (curl -d, requests.post(data=...)) and pages of
		// the allowed origins get their body read as JSON, as llama-server does.
		for _, ct := range append([]string{"application/json", "application/json; charset=utf-8", "Application/JSON"}, nonJSON...) {
			if status, data := send(path, body, ct); status != http.StatusOK {
				t.Errorf("%s with %q: %d %s", path, ct, status, data)
			}
		}
		if status, data := send(path, body, "text/plain", "Origin", "https://app.example"); status != http.StatusOK {
			t.Errorf("%s from an allowed origin: %d %s", path, status, data)
		}
	}
	if got, want := len(src.calls), 2*(3+len(nonJSON)+1); got != want { // chat and completions, each accepted
		t.Errorf("%d generations ran, want %d", got, want)
	}
	c := ts.client()
	if _, err := c.Chat.Completions.New(context.Background(), userChat("hi")); err != nil {
		t.Errorf("official client: %v", err)
	}
}

// TestStalledUploadFreesTheUpdateLock: an authenticated upload that stops
// sending holds the update lock (others get 409) only until
// api.upload_timeout: then it gets a 408, its connection is closed and the
// next upload installs.
func TestStalledUploadFreesTheUpdateLock(t *testing.T) {
	f := newAdminFixture(t, "s3cret")
	const timeout = 500 * time.Millisecond
	var once sync.Once
	reading := make(chan struct{})
	f.upd.read = func(r io.Reader) io.Reader {
		return readerFunc(func(p []byte) (int, error) {
			n, err := r.Read(p)
			if n > 0 {
				once.Do(func() { close(reading) }) // update.Apply holds the lock by now
			}
			return n, err
		})
	}
	r := mux.NewRouter()
	RegisterAdmin(r, AdminOptions{APIKey: "s3cret", Updater: f.upd, UploadTimeout: timeout, Log: zerolog.Nop()})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close) // after rawSend's connection is closed
	bundle := f.pack("1.0.0", "ok")
	start := time.Now()
	c := rawSend(t, srv.URL, fmt.Sprintf("POST /admin/update HTTP/1.1\nHost: x\nAuthorization: Bearer s3cret\nContent-Type: application/x-tar\nContent-Length: %d\n", len(bundle)),
		string(bundle[:2000]))
	select {
	case <-reading:
	case <-time.After(5 * time.Second):
		t.Fatal("the updater never read the upload")
	}
	if a := postBundle(t, srv.URL+"/admin/update", "s3cret", bytes.NewReader(bundle)); a.Status != http.StatusConflict {
		t.Fatalf("while the first upload stalls: %d %s, want 409", a.Status, a.Raw)
	}
	resp, body, closed := rawAnswer(t, c, 10*timeout)
	var ans struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(body, &ans)
	if resp.StatusCode != http.StatusRequestTimeout || ans.Error.Code != "request_body_timeout" || !strings.Contains(ans.Error.Message, "api.upload_timeout") {
		t.Fatalf("stalled upload: %d %s, want 408 request_body_timeout", resp.StatusCode, body)
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("answered after %v, before the deadline of %v", took, timeout)
	}
	if !closed {
		t.Error("the stalled upload's connection stays open")
	}
	if a := postBundle(t, srv.URL+"/admin/update", "s3cret", bytes.NewReader(bundle)); a.Status != http.StatusOK || !a.Body.Committed {
		t.Fatalf("after the stalled upload: %d %s", a.Status, a.Raw)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestConnLimit: connections past the total or the per-client cap get a
// 503 at once and are closed; closing one makes room.
func TestConnLimit(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts.Listener = NewConnLimit(3, 2).Listener(ts.Listener)
	ts.Start()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Skipf("dial from %s: %v (needs the 127/8 loopback)", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// served reports whether a request on c is answered 200; a refused
	// connection answers 503 or is gone.
	served := func(c net.Conn) bool {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	if !served(a1) || !served(a2) {
		t.Fatal("the first two connections are refused")
	}
	// Past the per-client cap: the 503 comes unasked, then the close.
	a3 := dial("127.0.0.1")
	start := time.Now()
	a3.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(a3)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("third connection from one client: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, body) != "too_many_connections" {
		t.Fatalf("third connection from one client: %d %s", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("the refused connection stays open: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refused after %v", took)
	}
	// Another client fits under the total; a fourth connection does not.
	if b1 := dial("127.0.0.2"); !served(b1) {
		t.Fatal("a second client is refused under the total cap")
	}
	if c1 := dial("127.0.0.3"); served(c1) {
		t.Fatal("a fourth connection is served past the total cap of 3")
	}
	// Closing one makes room (once the server has seen the close).
	a1.Close()
	deadline := time.Now().Add(3 * time.Second)
	for !served(dial("127.0.0.1")) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection still counts")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestContextLengthNamesThePromptField: completions' context error names
// "prompt", chat's "messages", whether the server or the engine finds it.
func TestContextLengthNamesThePromptField(t *testing.T) {
	tok := qwen3Tokenizer(t)
	full := func(context.Context, engine.Request, func(engine.Token) error) (engine.Result, error) {
		return engine.Result{}, fmt.Errorf("%w: 9 prompt tokens, context 8", engine.ErrContextFull)
	}
	for _, ctxLen := range []int{8, 40960} { // the prompt is over 8 tokens: 8 is the server's check, 40960 the engine's
		api, err := newServer(Options{ModelName: "m", Template: qwenTemplate(t, "qwen3"), Log: zerolog.Nop()}, tok, ctxLen, full)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(api)
		long := strings.Repeat("word ", 20)
		for _, tc := range []struct{ path, body, param string }{
			{"/v1/completions", `{"prompt":"` + long + `"}`, "prompt"},
			{"/v1/completions", `{"prompt":"` + long + `","stream":true}`, "prompt"},
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, "messages"},
		} {
			status, _, data := post(t, ts.URL+tc.path, tc.body)
			e := checkErrorShape(t, data)
			if status != http.StatusBadRequest || e["code"] != "context_length_exceeded" || e["param"] != tc.param {
				t.Errorf("context %d, %s %s: %d %s, want 400 naming %s", ctxLen, tc.path, tc.body[:20], status, data, tc.param)
			}
		}
		ts.Close()
	}
}
