package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

const (
	storiesPath       = "../testdata/models/stories260K.gguf"
	qwen3TokenizerGZ  = "../engine/tokenizer/testdata/qwen3/tokenizer.json.gz"
	qwen35SmallSeed   = 10   // ../testdata/qwen35/golden-small-f16kv.jsonl was made from this model
	qwen35TestContext = 4096 // long enough to outlast cancellation and timeouts
)

// logBuffer collects the server's log lines (zerolog writes from several
// goroutines).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines so far.
func (b *logBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// requestLine waits for the log line of the request with id.
func (b *logBuffer) requestLine(t *testing.T, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range b.lines() {
			if l["request_id"] == id && l["message"] == "request" {
				return l
			}
		}
		time.Sleep(5 * time.Millisecond) // the line is written after the response ends
	}
	t.Fatalf("no log line for request %s", id)
	return nil
}

// testServer is a real server on 127.0.0.1:0 over a real engine.
type testServer struct {
	*httptest.Server
	api   *Server
	sched *engine.Scheduler
	eng   *engine.Engine
	logs  *logBuffer
}

func (ts *testServer) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
	}, opts...)...)
}

var (
	engines   sync.Map // path -> *engine.Engine, shared by the tests of one run
	synthOnce sync.Once
	synthFile string
	synthErr  error
)

// qwen35Model writes the synthetic qwen35 "small" model with the Qwen3
// tokenizer (and so Qwen3's chat template) once per test run.
func qwen35Model(t *testing.T) string {
	t.Helper()
	synthOnce.Do(func() {
		dir, err := os.MkdirTemp("", "edgellmd-web-test-")
		if err != nil {
			synthErr = err
			return
		}
		synthFile = filepath.Join(dir, "qwen35-small.gguf")
		synthErr = synth.Write(synthFile, synth.Options{Size: "small", TokenizerJSON: qwen3TokenizerGZ, Seed: qwen35SmallSeed})
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthFile
}

func TestMain(m *testing.M) {
	code := m.Run()
	engines.Range(func(_, v any) bool { v.(*engine.Engine).Close(); return true })
	if synthFile != "" {
		os.RemoveAll(filepath.Dir(synthFile))
	}
	os.Exit(code)
}

func loadEngine(t *testing.T, path string, ctxLen int) *engine.Engine {
	t.Helper()
	if e, ok := engines.Load(path); ok {
		return e.(*engine.Engine)
	}
	// One sequence at a time: the queue tests count on requests waiting
	// (TestConcurrentStreams serves several at once on its own engine).
	e, err := engine.Load(path, engine.Options{Threads: 1, KVType: tensor.F16, ContextLen: ctxLen, MaxSequences: 1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if prev, loaded := engines.LoadOrStore(path, e); loaded {
		e.Close()
		return prev.(*engine.Engine)
	}
	return e
}

// startServer runs a scheduler over eng and the API in front of it. Tests
// that share an engine must not run in parallel (one scheduler per engine
// at a time).
func startServer(t *testing.T, eng *engine.Engine, queueDepth int, opt Options) *testServer {
	t.Helper()
	sched := engine.NewScheduler(eng, queueDepth)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sched.Run(ctx) }()
	logs := &logBuffer{}
	opt.Scheduler = sched
	if opt.ModelName == "" {
		opt.ModelName = "test-model"
	}
	opt.Log = zerolog.New(logs).Level(zerolog.DebugLevel)
	api, err := New(opt)
	if err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	ts := &testServer{Server: httptest.NewServer(api), api: api, sched: sched, eng: eng, logs: logs}
	t.Cleanup(func() {
		ts.Close()
		cancel()
		wg.Wait()
	})
	return ts
}

func storiesServer(t *testing.T, queueDepth int, opt Options) *testServer {
	return startServer(t, loadEngine(t, storiesPath, 0), queueDepth, opt)
}

func qwen35Server(t *testing.T, queueDepth int, opt Options) *testServer {
	return startServer(t, loadEngine(t, qwen35Model(t), qwen35TestContext), queueDepth, opt)
}

// post sends a JSON body and returns the status, headers and body.
func post(t *testing.T, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// sseEvents splits an SSE body into its data payloads, checking the
// framing: every event is one "data: " line followed by a blank line.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		if strings.Contains(ev, "\n") || !strings.HasPrefix(ev, "data: ") {
			t.Fatalf("malformed SSE event %q", ev)
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	if !strings.HasSuffix(string(body), "\n\n") {
		t.Fatalf("SSE body does not end with a blank line: %q", body[max(0, len(body)-40):])
	}
	return out
}
