package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/speculative"
)

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// renameOver writes src to a temporary file beside path and renames it
// over path, as editors and configuration tools save.
func renameOver(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	writeConfig(t, tmp, src)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeInPieces rewrites path in place in two writes with a pause between
// them, as a slow writer or a tool that streams the file does.
func writeInPieces(t *testing.T, path, first, second string, pause time.Duration) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause) // the scenario: the file is half written for this long
	if _, err := f.WriteString(second); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// The watcher on its own: only the config file's events count (not its
// neighbours'); pieces of one write are reported once, after the whole
// file is there; rename-over, removal and re-creation are each seen.
func TestConfigWatchSeesTheFileOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edgellmd.yaml")
	writeConfig(t, path, "first\n")

	var mu sync.Mutex
	var accepted []fileEvent
	reads := make(chan string, 64)
	const debounce = 300 * time.Millisecond
	cw := configWatch{path: path, debounce: debounce, log: zerolog.Nop(),
		changed: func() {
			b, err := os.ReadFile(path)
			if err != nil {
				reads <- "<gone>"
				return
			}
			reads <- string(b)
		},
		accepted: func(ev fileEvent) {
			mu.Lock()
			defer mu.Unlock()
			accepted = append(accepted, ev)
		},
	}
	run := cw.start()
	if run == nil {
		t.Fatal("the watch did not start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Neighbours, then the file itself in two pieces: the first call sees
	// the whole file, and every event that started the debounce was the file's.
	for _, other := range []string{"other.yaml", "edgellmd.yaml~", ".edgellmd.yaml.swp", "edgellmd.yaml.dpkg-dist"} {
		writeConfig(t, filepath.Join(dir, other), "x\n")
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	writeInPieces(t, path, "a: 1\n", "b: 2\n", debounce/6)
	select {
	case got := <-reads:
		if got != "a: 1\nb: 2\n" {
			t.Fatalf("the reload after a write in two pieces read %q, want the whole file", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after a write in two pieces")
	}
	mu.Lock()
	if len(accepted) == 0 {
		t.Error("no event accepted")
	}
	for _, ev := range accepted {
		if ev.Name != path {
			t.Errorf("event %v counted as a config change", ev)
		}
	}
	mu.Unlock()

	next := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got := <-reads:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("no reload reading %q within 10s", want)
			}
		}
	}
	renameOver(t, path, "renamed\n")
	next("renamed\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	next("<gone>")
	writeConfig(t, path, "back\n")
	next("back\n")
}

// A directory that cannot be watched turns the watch off (logged).
func TestConfigWatchMissingDirectory(t *testing.T) {
	var logs syncBuffer
	cw := configWatch{path: filepath.Join(t.TempDir(), "absent", "edgellmd.yaml"), debounce: time.Millisecond,
		log: zerolog.New(&logs), changed: func() { t.Error("changed called") }}
	if run := cw.start(); run != nil {
		t.Fatal("a watch of a missing directory started")
	}
	if !strings.Contains(logs.String(), "config watch off") {
		t.Fatalf("not logged: %s", logs.String())
	}
}

// Hot reload against a running daemon with a real HTTP server, while
// requests keep coming: edits by rename-over and by an in-place write in
// two pieces reach the engine and /status.json; an invalid edit keeps the
// running parameters and shows its error on /status.json and /health until
// the file is fixed; a listen change is reported as needing a restart; a
// removed file is reported and the running parameters kept. No request
// fails along the way.
func TestHotReloadRunningDaemon(t *testing.T) {
	notes := notifySocket(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + storiesModel + "\n  threads: 1\ncache:\n  dir: " + dir +
		"\n  max_bytes: 16MiB\n  persist: false\n"
	writeConfig(t, cfgPath, base+"draft:\n  mode: linear\n  steps: 3\n  top_k: 1\n")
	var logs syncBuffer
	const debounce = 300 * time.Millisecond
	d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: debounce}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx, nil) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop")
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	m := await(t, notes, "READY=1", has("READY=1"))
	_, addr, ok := strings.Cut(field(m, "STATUS"), " at ")
	if !ok {
		t.Fatalf("no address in %q", m)
	}

	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	type reload struct {
		Error           string   `json:"error"`
		Applied         []string `json:"applied"`
		RestartRequired []string `json:"restart_required"`
	}
	type status struct {
		Speculative struct {
			Mode        string   `json:"mode"`
			Steps       int      `json:"steps"`
			TopK        int      `json:"top_k"`
			VerifyNodes int      `json:"verify_nodes"`
			Drafters    []string `json:"drafters"`
			LastReload  *reload  `json:"last_reload"`
		} `json:"speculative"`
	}
	statusJSON := func() (status, string) {
		t.Helper()
		code, b := get("/status.json")
		var st status
		if err := json.Unmarshal(b, &st); err != nil || code != 200 {
			t.Fatalf("/status.json: %d %v %s", code, err, b)
		}
		return st, string(b)
	}
	type health struct {
		Status     string  `json:"status"`
		LastReload *reload `json:"last_reload"`
	}
	healthJSON := func() (health, string) {
		t.Helper()
		code, b := get("/health")
		var h health
		if err := json.Unmarshal(b, &h); err != nil || code != 200 || h.Status != "ok" {
			t.Fatalf("/health: %d %v %s", code, err, b)
		}
		return h, string(b)
	}
	// want checks that the engine, /status.json and /health agree on the
	// draft parameters in force and on the last reload's error ("" = none).
	want := func(step string, draft speculative.Config, reloadErr string) {
		t.Helper()
		if got := d.eng.Load().Draft(); !reflect.DeepEqual(got, draft) {
			t.Fatalf("%s: engine draft %+v, want %+v", step, got, draft)
		}
		// The next request runs with them: its log line says so.
		id := fmt.Sprintf("step-%d", time.Now().UnixNano())
		req, _ := http.NewRequest(http.MethodPost, addr+"/v1/completions",
			strings.NewReader(`{"prompt":"Once upon a time","max_tokens":6,"temperature":0}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", id)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: request: %v %v", step, resp, err)
		} else {
			resp.Body.Close()
		}
		// The line is written as the handler returns, which may be just
		// after the client has the whole answer.
		line := ""
		for deadline := time.Now().Add(5 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"request_id":"`+id+`"`) {
					line = l
				}
			}
		}
		if wantDraft := `"draft":"` + draft.String() + `"`; !strings.Contains(line, wantDraft) {
			t.Fatalf("%s: the next request's log line lacks %s: %s", step, wantDraft, line)
		}
		st, body := statusJSON()
		s := st.Speculative
		if s.Mode != draft.Mode || s.Steps != draft.Steps || s.TopK != draft.TopK || s.VerifyNodes != draft.VerifyNodes ||
			!slices.Equal(s.Drafters, draft.Drafters) {
			t.Fatalf("%s: /status.json speculative %s, want %+v", step, body, draft)
		}
		h, hbody := healthJSON()
		if reloadErr == "" {
			if s.LastReload != nil && s.LastReload.Error != "" {
				t.Fatalf("%s: /status.json still shows a reload error: %s", step, body)
			}
			if h.LastReload != nil && h.LastReload.Error != "" {
				t.Fatalf("%s: /health still shows a reload error: %s", step, hbody)
			}
			return
		}
		if s.LastReload == nil || !strings.Contains(s.LastReload.Error, reloadErr) {
			t.Fatalf("%s: /status.json lacks the reload error %q: %s", step, reloadErr, body)
		}
		if h.LastReload == nil || !strings.Contains(h.LastReload.Error, reloadErr) {
			t.Fatalf("%s: /health lacks the reload error %q: %s", step, reloadErr, hbody)
		}
	}
	inForce := func(draft speculative.Config) func() bool {
		return func() bool { return reflect.DeepEqual(d.eng.Load().Draft(), draft) }
	}
	logCount := func(msg string) int { return strings.Count(logs.String(), `"message":"`+msg+`"`) }

	// Requests all along: none may fail while the file changes under them.
	var sent, failed atomic.Int64
	var failure atomic.Value
	trafficDone := make(chan struct{})
	stopTraffic := make(chan struct{})
	go func() {
		defer close(trafficDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopTraffic:
				return
			case <-tick.C:
			}
			resp, err := http.Post(addr+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt":"Once upon a time","max_tokens":4,"temperature":0}`))
			sent.Add(1)
			if err != nil {
				failed.Add(1)
				failure.Store(err.Error())
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failed.Add(1)
				failure.Store(fmt.Sprintf("%d %s", resp.StatusCode, b))
			}
		}
	}()
	var haltOnce sync.Once
	halt := func() { haltOnce.Do(func() { close(stopTraffic); <-trafficDone }) }
	defer halt()

	// The draft section of the file at start reached the engine at load.
	linear3 := speculative.Config{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}
	want("start", linear3, "")

	// 1. Rename-over.
	tree6 := speculative.Config{Mode: "tree", Steps: 6, TopK: 2, VerifyNodes: 24, Drafters: []string{"suffix"}}
	renameOver(t, cfgPath, base+"draft:\n  mode: tree\n  steps: 6\n  verify_nodes: 24\n  drafters: [suffix]\n")
	eventually(t, "rename-over applied", inForce(tree6))
	want("rename-over", tree6, "")
	if st, body := statusJSON(); st.Speculative.LastReload == nil ||
		!slices.Equal(st.Speculative.LastReload.Applied, []string{"draft.mode", "draft.steps", "draft.top_k", "draft.verify_nodes", "draft.drafters"}) {
		t.Fatalf("rename-over: last reload %s", body)
	}

	// 2. In place, in two pieces with a pause of three quiet periods (the
	// writer keeps the file open). The first piece alone is invalid ("mode:
	// tr"): a reload between the pieces would be refused, so none may be.
	reloaded, refused := logCount("config reloaded"), logCount("config reload refused: the running config stays in force")
	tree8 := speculative.Config{Mode: "tree", Steps: 8, TopK: 4, VerifyNodes: 32, Drafters: []string{"mtp", "suffix"}}
	whole := base + "draft:\n  mode: tree\n  steps: 8\n  top_k: 4\n  verify_nodes: 32\n"
	cut := strings.Index(whole, "mode: tr") + len("mode: tr")
	writeInPieces(t, cfgPath, whole[:cut], whole[cut:], 3*debounce)
	eventually(t, "in-place write applied", inForce(tree8))
	eventually(t, "the reload logged", func() bool { return logCount("config reloaded") > reloaded })
	if n := logCount("config reload refused: the running config stays in force"); n != refused {
		t.Fatalf("in-place write: %d reloads refused between the pieces (a half-written file was read)", n-refused)
	}
	if n := logCount("config reloaded"); n != reloaded+1 {
		t.Fatalf("in-place write: %d reloads, want 1", n-reloaded)
	}
	want("in-place write", tree8, "")

	// 3. An invalid edit: the running parameters stay, the error (file,
	// line, key, reason) shows on /status.json and /health and in the log.
	renameOver(t, cfgPath, base+"draft:\n  mode: linear\n  steps: 2\n  top_k: 0\n")
	badErr := "edgellmd.yaml:12: draft.top_k: must be between 1 and 32, got 0"
	eventually(t, "invalid edit reported", func() bool { rl := d.LastReload(); return rl != nil && strings.Contains(rl.Err, badErr) })
	want("invalid edit", tree8, badErr)
	if !strings.Contains(logs.String(), badErr) {
		t.Fatalf("the refused edit is not logged with its key")
	}
	// Still reported after a request and a poll: only a fix clears it.
	want("invalid edit, later", tree8, badErr)

	// 4. Fixing the file applies it and clears the error everywhere.
	linear4 := speculative.Config{Mode: "linear", Steps: 4, TopK: 1, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}
	renameOver(t, cfgPath, base+"draft:\n  mode: linear\n  steps: 4\n  top_k: 1\n")
	eventually(t, "fix applied", inForce(linear4))
	eventually(t, "error cleared", func() bool { rl := d.LastReload(); return rl != nil && rl.Err == "" })
	want("fixed", linear4, "")
	if h, body := healthJSON(); h.LastReload != nil {
		t.Fatalf("/health shows a reload after a clean one: %s", body)
	}

	// 5. listen cannot change live: reported as restart required, on
	// /health too, and the daemon stays where it is (it answered above and
	// answers below on the old address).
	renameOver(t, cfgPath, strings.Replace(base, "listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1)+
		"draft:\n  mode: linear\n  steps: 4\n  top_k: 1\n")
	eventually(t, "restart required reported", func() bool {
		rl := d.LastReload()
		return rl != nil && slices.Equal(rl.RestartRequired, []string{"listen"})
	})
	if c := d.Config(); c.Listen != "127.0.0.1:0" {
		t.Fatalf("listen half-applied: %q", c.Listen)
	}
	if h, body := healthJSON(); h.LastReload == nil || !slices.Equal(h.LastReload.RestartRequired, []string{"listen"}) {
		t.Fatalf("/health lacks restart_required: %s", body)
	}
	if st, body := statusJSON(); st.Speculative.LastReload == nil || !slices.Equal(st.Speculative.LastReload.RestartRequired, []string{"listen"}) {
		t.Fatalf("/status.json lacks restart_required: %s", body)
	}
	want("listen edit", linear4, "")

	// 6. The file removed: reported, the running parameters kept; back
	// again: applied.
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	eventually(t, "removal reported", func() bool { rl := d.LastReload(); return rl != nil && strings.Contains(rl.Err, "was removed") })
	want("removed", linear4, "was removed")
	tree5 := speculative.Config{Mode: "tree", Steps: 5, TopK: 3, VerifyNodes: 20, Drafters: []string{"suffix"}}
	writeConfig(t, cfgPath, base+"draft:\n  mode: tree\n  steps: 5\n  top_k: 3\n  verify_nodes: 20\n  drafters: [suffix]\n")
	eventually(t, "re-created file applied", inForce(tree5))
	eventually(t, "removal cleared", func() bool { rl := d.LastReload(); return rl != nil && rl.Err == "" })
	want("re-created", tree5, "")

	// 7. Valid YAML that this model cannot run (stories260K has no MTP
	// head): the engine refuses it, naming the key; the parameters stay.
	writeConfig(t, cfgPath, base+"draft:\n  mode: tree\n  drafters: [mtp]\n")
	eventually(t, "mtp-only refused", func() bool { rl := d.LastReload(); return rl != nil && strings.Contains(rl.Err, "draft.drafters") })
	want("mtp on a model without a head", tree5, "no MTP head")

	halt()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed during reloads; last: %v", n, sent.Load(), failure.Load())
	}
	if sent.Load() == 0 {
		t.Fatal("no requests were sent during the reloads")
	}
	t.Logf("%d requests during the reloads, none failed", sent.Load())
}

// An edit made while the model loads is not lost: the engine gets the
// draft parameters in force when it is installed, not those it was loaded
// with.
func TestReloadWhileLoadingReachesTheEngine(t *testing.T) {
	notes := notifySocket(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + storiesModel + "\n  threads: 1\ncache:\n  dir: " + dir + "\n  persist: false\n"
	writeConfig(t, cfgPath, base)
	var logs syncBuffer
	d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: 50 * time.Millisecond}, "")
	if err != nil {
		t.Fatal(err)
	}
	loading, release := make(chan struct{}), make(chan struct{})
	d.beforeLoad = func() { close(loading); <-release }
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx, nil) }()
	var releaseOnce sync.Once
	t.Cleanup(func() {
		releaseOnce.Do(func() { close(release) })
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	<-loading
	renameOver(t, cfgPath, base+"draft:\n  mode: tree\n  steps: 7\n")
	eventually(t, "the reload during loading", func() bool { return d.Config().Draft.Steps == 7 })
	if d.eng.Load() != nil {
		t.Fatal("engine installed before the load finished")
	}
	releaseOnce.Do(func() { close(release) })
	await(t, notes, "READY=1", has("READY=1"))
	want := speculative.Config{Mode: "tree", Steps: 7, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}
	if got := d.eng.Load().Draft(); !reflect.DeepEqual(got, want) {
		t.Fatalf("engine draft %+v after a reload during loading, want %+v", got, want)
	}
}

// /health gains "last_reload" only when the API's answer is a JSON object
// without one; anything else passes through as it was.
func TestHealthWithReload(t *testing.T) {
	rl := &ReloadStatus{At: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), Err: "edgellmd.yaml:3: draft.top_k: must be between 1 and 32, got 0"}
	for _, c := range []struct {
		name, body string
		status     int
		want       map[string]any // nil: the body as it was
	}{
		{"adds", `{"status":"ok","requests_running":0}`, 200,
			map[string]any{"status": "ok", "requests_running": 0.0,
				"last_reload": map[string]any{"at": "2026-11-30T08:00:00Z", "error": rl.Err}}},
		{"already there", `{"status":"ok","last_reload":{"error":"x"}}`, 200, nil},
		{"not JSON", "ok\n", 200, nil},
		{"not an object", `["ok"]`, 200, nil},
		{"error status kept", `{"status":"unavailable"}`, 503,
			map[string]any{"status": "unavailable", "last_reload": map[string]any{"at": "2026-11-30T08:00:00Z", "error": rl.Err}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", fmt.Sprint(len(c.body)))
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			rec := newRecorder()
			healthWithReload(rec, &http.Request{Method: http.MethodGet}, api, rl)
			if rec.status != c.status || rec.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, headers %v", rec.status, rec.header)
			}
			if c.want == nil {
				if rec.body.String() != c.body {
					t.Fatalf("body %q, want it unchanged %q", rec.body.String(), c.body)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(rec.body.Bytes(), &got); err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("body %s (%v), want %v", rec.body.String(), err, c.want)
			}
		})
	}
}

func newRecorder() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}, status: http.StatusOK}
}

// A config path relative to the working directory (serve -c edgellmd.yaml)
// is watched too.
func TestConfigWatchRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	writeConfig(t, "edgellmd.yaml", "first\n")
	called := make(chan struct{}, 16)
	cw := configWatch{path: "edgellmd.yaml", debounce: 20 * time.Millisecond, log: zerolog.Nop(),
		changed: func() { called <- struct{}{} }}
	run := cw.start()
	if run == nil {
		t.Fatal("the watch did not start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	defer func() { cancel(); <-done }()
	writeConfig(t, "edgellmd.yaml", "second\n")
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("an edit of a config file named relative to the working directory was not seen")
	}
}

// startWatch runs a configWatch on path with the default quiet period; each
// call of changed sends what the file held at that moment.
func startWatch(t *testing.T, path string) <-chan string {
	t.Helper()
	reads := make(chan string, 64)
	cw := configWatch{path: path, debounce: DefaultConfigDebounce, log: zerolog.Nop(),
		changed: func() {
			b, err := os.ReadFile(path)
			if err != nil {
				reads <- "<gone>"
				return
			}
			reads <- string(b)
		}}
	run := cw.start()
	if run == nil {
		t.Fatal("the watch did not start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return reads
}

// A writer that pauses mid-file for longer than the quiet period (an editor
// that writes in place, `cat > file` fed slowly, a script) is never seen
// half: the watch waits for the writer to close the file, however long it
// pauses, whether it rewrites the file in place or creates it anew.
func TestConfigWatchNeverHalfWritten(t *testing.T) {
	whole := "listen: 127.0.0.1:8001\ndraft:\n  mode: tree\n  steps: 6\npower:\n  pin: 15W\n"
	cut := strings.Index(whole, "draft:")
	for _, c := range []struct {
		name string
		flag int
		gone bool // the file is removed first: the writer creates it
	}{
		{"in place", os.O_WRONLY | os.O_TRUNC, false},
		{"created", os.O_WRONLY | os.O_CREATE | os.O_EXCL, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edgellmd.yaml")
			writeConfig(t, path, "listen: 127.0.0.1:8000\n")
			reads := startWatch(t, path)
			if c.gone {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				// The removal is a change of its own: let it be seen first.
				select {
				case got := <-reads:
					if got != "<gone>" {
						t.Fatalf("after the removal the watch read %q", got)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the removal not seen")
				}
			}
			f, err := os.OpenFile(path, c.flag, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(whole[:cut]); err != nil {
				t.Fatal(err)
			}
			// The pause is the scenario: four quiet periods with the file
			// half written and still open.
			pause := time.After(4 * DefaultConfigDebounce)
		paused:
			for {
				select {
				case got := <-reads:
					t.Fatalf("the watch fired while the writer paused mid-file, reading %q", got)
				case <-pause:
					break paused
				}
			}
			if _, err := f.WriteString(whole[cut:]); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-reads:
				if got != whole {
					t.Fatalf("the watch read %q, want the whole file", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no change seen after the writer closed the file")
			}
			select {
			case got := <-reads:
				t.Fatalf("a second change seen for one write: %q", got)
			case <-time.After(2 * DefaultConfigDebounce):
			}
		})
	}
}

// A normal save is seen within a second of the save, with the default
// quiet period: a write in place (open, write, close) and a rename into
// place.
func TestConfigWatchSaveWithinASecond(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgellmd.yaml")
	writeConfig(t, path, "listen: 127.0.0.1:8000\n")
	reads := startWatch(t, path)
	for i, save := range []func(string){
		func(src string) { writeConfig(t, path, src) },
		func(src string) { renameOver(t, path, src) },
	} {
		src := fmt.Sprintf("listen: 127.0.0.1:%d\n", 8001+i)
		t0 := time.Now()
		save(src)
		select {
		case got := <-reads:
			if got != src {
				t.Fatalf("save %d: read %q, want %q", i, got, src)
			}
			took := time.Since(t0)
			if took > time.Second {
				t.Errorf("save %d seen after %v, want within a second", i, took)
			}
			t.Logf("save %d seen after %v (quiet period %v)", i, took.Round(time.Millisecond), DefaultConfigDebounce)
		case <-time.After(10 * time.Second):
			t.Fatalf("save %d not seen", i)
		}
	}
}

// A file written in two opens with a pause between (a script that writes
// a header, then appends the rest) reaches the watcher's reload with whole
// sections missing: the daemon keeps the running config and says which
// sections and why, at warn level, and applies the whole file once it is
// there. A file without a section, applied on purpose (SIGHUP, Reload), is
// applied.
func TestReloadKeepsSectionsAFileCutShortDrops(t *testing.T) {
	notes := notifySocket(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + storiesModel + "\n  threads: 1\ncache:\n  dir: " + dir + "\n  persist: false\n"
	writeConfig(t, cfgPath, base+"draft:\n  mode: tree\n  steps: 6\nlog:\n  level: debug\n")
	var logs syncBuffer
	d, _ := runUntilReady(t, notes, Options{ConfigPath: cfgPath, LogOutput: &logs})
	tree6 := d.Config().Draft
	if tree6.Mode != "tree" || tree6.Steps != 6 {
		t.Fatalf("draft at start %+v", tree6)
	}

	// The first open writes base alone and closes; the rest comes later.
	writeConfig(t, cfgPath, base)
	eventually(t, "the cut-short file refused", func() bool {
		rl := d.LastReload()
		return rl != nil && strings.Contains(rl.Err, "no longer has the section(s) draft, log")
	})
	if c := d.Config(); !reflect.DeepEqual(c.Draft, tree6) || c.Log.Level != "debug" {
		t.Fatalf("a cut-short file was applied: draft %+v, log.level %q", c.Draft, c.Log.Level)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "no longer has the section(s)") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["level"] != "warn" || !strings.Contains(fmt.Sprint(line["error"]), "systemctl reload edgellmd") {
		t.Fatalf("the refusal's log line: %v", line)
	}
	f, err := os.OpenFile(cfgPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("draft:\n  mode: tree\n  steps: 7\nlog:\n  level: debug\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the whole file applied", func() bool { return d.Config().Draft.Steps == 7 })
	if rl := d.LastReload(); rl.Err != "" {
		t.Fatalf("the whole file: %+v", rl)
	}

	// On purpose: the draft section removed and Reload (SIGHUP) applies it.
	renameOver(t, cfgPath, base+"log:\n  level: debug\n")
	eventually(t, "the watcher refused the file without draft", func() bool {
		rl := d.LastReload()
		return rl != nil && strings.Contains(rl.Err, "section(s) draft ")
	})
	if err := d.Reload(); err != nil {
		t.Fatalf("Reload on purpose: %v", err)
	}
	if got, want := d.Config().Draft, DefaultConfig().Draft; !reflect.DeepEqual(got, want) {
		t.Fatalf("after Reload on purpose draft %+v, want the defaults %+v", got, want)
	}
	// The file in force now has no draft section: dropping log is refused
	// by the watcher, adding draft back is not.
	renameOver(t, cfgPath, base+"draft:\n  steps: 5\nlog:\n  level: debug\n")
	eventually(t, "draft added back", func() bool { return d.Config().Draft.Steps == 5 })
}

// A file written and left open for writing is never read; after the
// stuck-writer time the log says so (and how to apply it), once.
func TestConfigWatchSaysWhenAWriterKeepsTheFileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgellmd.yaml")
	writeConfig(t, path, "listen: 127.0.0.1:8000\n")
	var logs syncBuffer
	called := make(chan struct{}, 4)
	cw := configWatch{path: path, debounce: 50 * time.Millisecond, log: zerolog.New(&logs), stuckAfter: 300 * time.Millisecond,
		changed: func() { called <- struct{}{} }}
	run := cw.start()
	if run == nil {
		t.Fatal("the watch did not start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	defer func() { cancel(); <-done }()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("listen: 127.0."); err != nil {
		t.Fatal(err)
	}
	const msg = "the config file was written and is still open for writing"
	eventually(t, "the stuck writer logged", func() bool { return strings.Contains(logs.String(), msg) })
	select {
	case <-called:
		t.Fatal("a file still open for writing was read")
	case <-time.After(400 * time.Millisecond):
	}
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "systemctl reload edgellmd") {
		t.Errorf("the warning does not say how to apply the file now:\n%s", logs.String())
	}
	if _, err := f.WriteString("0.1:8001\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("not read once its writer closed it")
	}
}
