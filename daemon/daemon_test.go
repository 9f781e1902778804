package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
)

const storiesModel = "../testdata/models/stories260K.gguf"

// notifySocket opens a unixgram socket as systemd's $NOTIFY_SOCKET and
// returns the messages it receives.
func notifySocket(t *testing.T) <-chan string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	ch := make(chan string, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return ch
}

// await returns the first message for which match is true, skipping
// others (watchdog pings arrive all along).
func await(t *testing.T, ch <-chan string, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-ch:
			if match(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s notification within 20s", what)
		}
	}
}

func has(line string) func(string) bool {
	return func(m string) bool { return slices.Contains(strings.Split(m, "\n"), line) }
}

func field(m, key string) string {
	for l := range strings.SplitSeq(m, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return ""
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeConfig(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func monotonicUsec(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano() / 1000
}

// The daemon's whole life in-process under a real NOTIFY_SOCKET: /health
// 503 while loading, READY=1 with STATUS, watchdog pings, a good and a bad
// SIGHUP reload, and a SIGTERM during a request that still completes.
func TestServeLifecycle(t *testing.T) {
	notes := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + storiesModel + "\n  threads: 1\ncache:\n  dir: " + dir + "\napi:\n  drain_timeout: 20s\n"
	writeConfig(t, cfgPath, base)
	var logs syncBuffer
	// The watcher off: this test drives reloads by SIGHUP alone.
	d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	release := make(chan struct{})
	d.beforeLoad = func() { <-release }
	held, proceed := make(chan struct{}), make(chan struct{})
	// handled closes once the held request's handler has returned, on the
	// server's side: the client may read the answer only after the stop
	// hooks ran, so what the client saw cannot tell the hook anything.
	handled := make(chan struct{})
	d.wrap = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Test-Hold") != "" {
				close(held)
				<-proceed
				defer close(handled)
			}
			h.ServeHTTP(w, r)
		})
	}
	var hookRan atomic.Bool
	d.OnStop("test-flush", func(context.Context) error {
		select {
		case <-handled:
		default:
			t.Error("stop hook ran before the in-flight request finished")
		}
		hookRan.Store(true)
		return nil
	})

	sigs := make(chan os.Signal, 1)
	runErr := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	go func() { runErr <- d.Run(ctx, sigs) }()
	var releaseOnce, proceedOnce sync.Once
	t.Cleanup(func() { // on failure, stop the daemon before the next test
		stop()
		releaseOnce.Do(func() { close(release) })
		proceedOnce.Do(func() { close(proceed) })
		select {
		case <-runErr:
		case <-time.After(30 * time.Second):
		}
	})

	// Listening, model not loaded yet: /health says so.
	m := await(t, notes, "loading STATUS", func(m string) bool { return strings.Contains(m, "STATUS=loading model stories260K") })
	_, addr, ok := strings.Cut(m, "listening at ")
	if !ok {
		t.Fatalf("no address in %q", m)
	}
	health := func() (int, string) {
		resp, err := http.Get(addr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := health(); code != 503 || !strings.Contains(body, "loading model") {
		t.Fatalf("health while loading: %d %s", code, body)
	}
	if resp, err := http.Post(addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`)); err != nil || resp.StatusCode != 503 {
		t.Fatalf("completion while loading: %v %v", resp, err)
	}

	releaseOnce.Do(func() { close(release) })
	m = await(t, notes, "READY=1", has("READY=1"))
	if st := field(m, "STATUS"); !strings.Contains(st, "serving stories260K") || !strings.Contains(st, addr) ||
		!(strings.Contains(st, " on the CPU at ") || strings.Contains(st, " on GPU ")) {
		t.Fatalf("STATUS %q", st)
	}
	if code, body := health(); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("health when ready: %d %s", code, body)
	}
	// The start's log says what the model runs on (model.device: auto).
	loadedLine := false
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "model loaded" {
			loadedLine = true
			if e, _ := m["engine"].(string); (e != "cpu" && e != "vulkan") || m["device"] == "" || m["device"] == nil {
				t.Errorf("model loaded line without engine and device: %s", l)
			}
		}
	}
	if !loadedLine {
		t.Errorf("no model loaded line:\n%s", logs.String())
	}
	for range 2 {
		await(t, notes, "WATCHDOG=1", has("WATCHDOG=1"))
	}

	// A good reload: draft and log.level apply, listen needs a restart.
	// model.device, like every model key, needs a restart.
	edited := strings.Replace(base, "listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1)
	edited = strings.Replace(edited, "  threads: 1\n", "  threads: 1\n  device: cpu\n", 1)
	writeConfig(t, cfgPath, edited+"draft:\n  mode: tree\n  top_k: 4\npower:\n  check_interval: 10s\nlog:\n  level: warn\n")
	powerBefore := d.Power()
	for deadline := time.Now().Add(5 * time.Second); powerBefore == nil; powerBefore = d.Power() {
		if time.Now().After(deadline) {
			t.Fatal("no power controller")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := monotonicUsec(t)
	sigs <- syscall.SIGHUP
	m = await(t, notes, "RELOADING=1", has("RELOADING=1"))
	usec, err := strconv.ParseInt(field(m, "MONOTONIC_USEC"), 10, 64)
	if err != nil || usec < before || usec > monotonicUsec(t) {
		t.Fatalf("MONOTONIC_USEC in %q not between %d and now: %v", m, before, err)
	}
	await(t, notes, "READY=1 after reload", has("READY=1"))
	c := d.Config()
	if c.Draft.Mode != "tree" || c.Draft.TopK != 4 || c.Log.Level != "warn" || c.Listen != "127.0.0.1:0" {
		t.Fatalf("config after reload: %+v", c)
	}
	lr := d.LastReload()
	if lr == nil || lr.Err != "" || !slices.Equal(lr.RestartRequired, []string{"listen", "model.device"}) ||
		!slices.Equal(lr.Applied, []string{"draft.mode", "draft.top_k", "power.check_interval", "log.level"}) {
		t.Fatalf("last reload %+v", lr)
	}
	// The power watch restarts with the new settings: a new controller.
	for deadline := time.Now().Add(5 * time.Second); d.Power() == powerBefore; {
		if time.Now().After(deadline) {
			t.Fatal("power watch not restarted after a power settings reload")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d.level.Level() != zerolog.WarnLevel {
		t.Fatalf("log level not switched: %v", d.level.Level())
	}

	// A bad reload keeps the running config and says why.
	writeConfig(t, cfgPath, base+"draft:\n  top_k: 0\n")
	sigs <- syscall.SIGHUP
	await(t, notes, "RELOADING=1", has("RELOADING=1"))
	m = await(t, notes, "READY=1 after a failed reload", has("READY=1"))
	if !strings.Contains(field(m, "STATUS"), "config reload failed") || !strings.Contains(m, "draft.top_k") {
		t.Fatalf("STATUS after a failed reload: %q", m)
	}
	if lr := d.LastReload(); lr == nil || !strings.Contains(lr.Err, "edgellmd.yaml:10: draft.top_k: must be between 1 and 32, got 0") {
		t.Fatalf("last reload %+v", lr)
	}
	if c := d.Config(); c.Draft.Mode != "tree" || c.Draft.TopK != 4 {
		t.Fatalf("bad reload changed the config: %+v", c.Draft)
	}
	// An emptied file (a truncation caught by the reload, or a mistake) is
	// refused: applied, it would put every setting back to its default.
	writeConfig(t, cfgPath, "# emptied\n\n")
	sigs <- syscall.SIGHUP
	await(t, notes, "RELOADING=1", has("RELOADING=1"))
	await(t, notes, "READY=1 after an empty file", has("READY=1"))
	if lr := d.LastReload(); lr == nil || !strings.Contains(lr.Err, "is empty") {
		t.Fatalf("last reload after an empty file %+v", lr)
	}
	if c := d.Config(); c.Draft.Mode != "tree" || c.Draft.TopK != 4 || c.Log.Level != "warn" {
		t.Fatalf("an empty file changed the config: %+v", c)
	}

	// SIGTERM while a request is in flight: STOPPING=1, no new connections,
	// the request still completes, then the stop hooks, then exit 0.
	type result struct {
		code int
		body []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", addr+"/v1/completions",
			strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":24,"temperature":0}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Hold", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, b, err}
	}()
	<-held
	sigs <- syscall.SIGTERM
	await(t, notes, "STOPPING=1", has("STOPPING=1"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), time.Second)
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after STOPPING=1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	proceedOnce.Do(func() { close(proceed) })
	r := <-got
	if r.err != nil || r.code != 200 {
		t.Fatalf("in-flight request: %d %v %s", r.code, r.err, r.body)
	}
	var out struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Choices) != 1 || out.Choices[0].Text == "" || out.Usage.CompletionTokens == 0 {
		t.Fatalf("in-flight answer %s: %v", r.body, err)
	}
	select {
	case err := <-runErr:
		runErr <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after SIGTERM")
	}
	if !hookRan.Load() {
		t.Fatal("stop hook did not run")
	}
}

// Requests still running at the drain deadline, or at a second SIGTERM,
// are cancelled, and Run still returns nil.
func TestDrainDeadlineCancelsRequests(t *testing.T) {
	for _, c := range []struct {
		name         string
		drainTimeout string
		secondSignal bool
		logLine      string
	}{
		{"deadline", "200ms", false, "cancelling them"},
		{"second SIGTERM", "1m", true, "second stop signal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "edgellmd.yaml")
			writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+storiesModel+"\n  threads: 1\ncache:\n  persist: false\napi:\n  drain_timeout: "+c.drainTimeout+"\n")
			notes := notifySocket(t)
			var logs syncBuffer
			d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: &logs}, "")
			if err != nil {
				t.Fatal(err)
			}
			held := make(chan struct{})
			cancelled := make(chan struct{})
			d.wrap = func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(held)
					<-r.Context().Done() // a request that only ends when cancelled
					close(cancelled)
					w.WriteHeader(499)
				})
			}
			sigs := make(chan os.Signal, 2)
			ctx, stop := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			go func() { runErr <- d.Run(ctx, sigs) }()
			t.Cleanup(stop)
			m := await(t, notes, "READY=1", has("READY=1"))
			_, addr, _ := strings.Cut(field(m, "STATUS"), " at ")
			go func() {
				resp, err := http.Get(addr + "/v1/models")
				if err == nil {
					resp.Body.Close()
				}
			}()
			<-held
			t0 := time.Now()
			if c.secondSignal {
				sigs <- syscall.SIGTERM
			} else {
				stop() // cancelling Run's context stops it like SIGTERM
			}
			await(t, notes, "STOPPING=1", has("STOPPING=1"))
			if c.secondSignal {
				sigs <- syscall.SIGINT
			}
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("in-flight request not cancelled")
			}
			if err := <-runErr; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if took := time.Since(t0); took > 10*time.Second {
				t.Fatalf("stop took %v", took)
			}
			if !strings.Contains(logs.String(), c.logLine) {
				t.Fatalf("no log line %q:\n%s", c.logLine, logs.String())
			}
		})
	}
}

// A worker that stops beating stops the watchdog pings; while it beats,
// they flow.
func TestWatchdogFollowsTheEngineWorker(t *testing.T) {
	eng, err := engine.Load(storiesModel, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sched := engine.NewScheduler(eng, 1) // never Run: a worker that is stuck
	d := &Daemon{}
	d.sched.Store(sched)
	d.state.Store(stateReady)
	interval := 100 * time.Millisecond

	now := sched.LastBeat()
	if !d.alive(now.Add(time.Second), interval) {
		t.Fatal("a worker that beat 1s ago counts as stuck")
	}
	if d.alive(now.Add(minBeatAge+time.Millisecond), interval) {
		t.Fatal("a worker silent for longer than the watchdog allows counts as alive")
	}
	if !d.alive(now.Add(time.Hour), time.Hour+time.Minute) {
		t.Fatal("a long watchdog interval is not honoured")
	}
	d.state.Store(stateStopping)
	if !d.alive(now.Add(time.Hour), interval) {
		t.Fatal("no pings while stopping")
	}

	// The loop itself: pings while alive, none after.
	notes := notifySocket(t)
	var isAlive atomic.Bool
	isAlive.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var logs syncBuffer
	log := zerolog.New(&logs)
	n := notifier{log: log}
	go func() {
		defer close(done)
		watchdog(ctx, interval, func(time.Time) bool { return isAlive.Load() }, func() { n.send("WATCHDOG=1") }, log)
	}()
	await(t, notes, "WATCHDOG=1", has("WATCHDOG=1"))
	isAlive.Store(false)
	time.Sleep(interval) // let a ping already sent arrive
	for len(notes) > 0 {
		<-notes
	}
	select {
	case m := <-notes:
		t.Fatalf("ping %q while the worker is stuck", m)
	case <-time.After(4 * interval):
	}
	cancel()
	<-done
	if !strings.Contains(logs.String(), "withholding watchdog pings") {
		t.Fatalf("no log line: %s", logs.String())
	}
}

func TestStartFailsOnMissingModel(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+filepath.Join(dir, "absent.gguf")+"\n")
	d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: io.Discard}, "")
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "model.path") || !strings.Contains(err.Error(), "absent.gguf") {
		t.Fatalf("Run: %v", err)
	}
}

// TestSettledConfig: a reload takes the config file only once two reads
// agree, refuses one that keeps changing, and refuses an empty one.
func TestSettledConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgellmd.yaml")
	if err := os.WriteFile(path, []byte("log:\n  level: warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := settledConfig(path); err != nil || string(data) != "log:\n  level: warn\n" {
		t.Fatalf("a settled file: %q, %v", data, err)
	}
	for _, empty := range []string{"", "\n\n", "# all comments\n  # indented\n", "---\n"} {
		if err := os.WriteFile(path, []byte(empty), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := settledConfig(path); err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("%q: %v, want an error saying the file is empty", empty, err)
		}
	}
	// A writer that rewrites the file between every two reads, for longer
	// than a reload waits: refused, naming the file. (Rewritten in the wait
	// itself: a writer on a clock of its own may be descheduled long enough
	// on a loaded machine for two reads to agree.)
	rewrites := 0
	rewrite := func() {
		rewrites++
		writeConfig(t, path, fmt.Sprintf("log:\n  level: warn\n# %d\n", rewrites))
	}
	if _, err := settleConfig(path, rewrite); err == nil || !strings.Contains(err.Error(), path+" kept changing") {
		t.Errorf("a file that keeps changing: %v, want it refused", err)
	}
	if rewrites != configSettleTries+1 {
		t.Errorf("refused after %d reads, want %d", rewrites+1, configSettleTries+2)
	}
	// One that stops changing before the last try is applied as it ends.
	rewrites = 0
	data, err := settleConfig(path, func() {
		if rewrites < configSettleTries {
			rewrite()
		}
	})
	if want := fmt.Sprintf("log:\n  level: warn\n# %d\n", configSettleTries); err != nil || string(data) != want {
		t.Errorf("a file that settles on the last try: %q, %v; want %q", data, err, want)
	}
}
