//go:build e2e

package daemon

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildServe builds the edgellmd binary into a temp dir.
func buildServe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgellmd")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/edgellmd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func waitExit(t *testing.T, cmd *exec.Cmd, logs *syncBuffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("edgellmd serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("edgellmd serve did not exit after SIGTERM\n%s", logs.String())
	}
}

// The built binary under a real NOTIFY_SOCKET with real signals: READY=1
// and STATUS, WATCHDOG=1 pings, SIGHUP -> RELOADING=1 + MONOTONIC_USEC then
// READY=1, SIGTERM -> STOPPING=1 while a streamed generation is running,
// which still completes, then exit status 0.
func TestE2EServeBinarySignals(t *testing.T) {
	bin := buildServe(t)
	notes := notifySocket(t)
	dir := t.TempDir()
	model, _ := filepath.Abs(storiesModel)
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+model+"\n  threads: 1\ncache:\n  persist: false\n")
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "-c", cfgPath)
	cmd.Env = append(os.Environ(), "WATCHDOG_USEC=300000")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	m := await(t, notes, "READY=1", has("READY=1"))
	_, addr, ok := strings.Cut(field(m, "STATUS"), " at ")
	if !ok || !strings.Contains(field(m, "STATUS"), "serving stories260K") {
		t.Fatalf("STATUS in %q", m)
	}
	resp, err := http.Get(addr + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	for range 3 {
		await(t, notes, "WATCHDOG=1", has("WATCHDOG=1"))
	}

	writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+model+"\n  threads: 1\ncache:\n  persist: false\ndraft:\n  mode: linear\n")
	before := monotonicUsec(t)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m = await(t, notes, "RELOADING=1", has("RELOADING=1"))
	if usec, err := strconv.ParseInt(field(m, "MONOTONIC_USEC"), 10, 64); err != nil || usec < before || usec > monotonicUsec(t) {
		t.Fatalf("MONOTONIC_USEC in %q: %v", m, err)
	}
	await(t, notes, "READY=1 after reload", has("READY=1"))
	// The log comes through a pipe and may trail the notify socket.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"applied":["draft.mode"]`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reload not logged as applying draft.mode:\n%s", logs.String())
		}
	}

	// A long streamed generation (about 1500 tokens); SIGTERM after its
	// first chunk.
	body := `{"prompt":"Once upon a time","max_tokens":1500,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	resp, err = http.Post(addr+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: {") {
		t.Fatalf("first SSE line %q", sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, notes, "STOPPING=1", has("STOPPING=1"))
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), time.Second); err == nil {
		// Shutdown closes the listener right after STOPPING=1; allow it a moment.
		time.Sleep(200 * time.Millisecond)
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), time.Second); err == nil {
			c.Close()
			t.Fatal("new connections still accepted while stopping")
		}
	}
	completion, done := 0, false
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			break
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var chunk struct {
				Usage *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &chunk); err != nil {
				t.Fatalf("SSE chunk %q: %v", data, err)
			}
			if chunk.Usage != nil {
				completion = chunk.Usage.CompletionTokens
			}
		}
	}
	if !done || completion != 1500 {
		t.Fatalf("in-flight stream cut short: done=%v completion_tokens=%d\n%s", done, completion, logs.String())
	}
	waitExit(t, cmd, &logs)
}

// systemd socket activation: the daemon serves on the socket it is passed
// (fd 3, LISTEN_FDS=1, LISTEN_PID = its pid) and ignores listen.
func TestE2EServeSocketActivation(t *testing.T) {
	bin := buildServe(t)
	notes := notifySocket(t)
	dir := t.TempDir()
	model, _ := filepath.Abs(storiesModel)
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	// 192.0.2.1 (TEST-NET-1) is not on this machine: listening there fails.
	writeConfig(t, cfgPath, "listen: 192.0.2.1:9\nmodel:\n  path: "+model+"\ncache:\n  persist: false\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // the duplicate in f stays open and listening
	var logs syncBuffer
	// sh's $$ is the pid that exec keeps: systemd sets LISTEN_PID the same way.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve -c "$1"`, bin, cfgPath)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	f.Close()
	m := await(t, notes, "READY=1", has("READY=1"))
	if !strings.Contains(field(m, "STATUS"), addr) {
		t.Fatalf("STATUS %q does not name the passed socket %s", m, addr)
	}
	resp, err := http.Get(addr + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health on the passed socket: %v %v\n%s", resp, err, logs.String())
	}
	resp.Body.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	await(t, notes, "STOPPING=1", has("STOPPING=1"))
	waitExit(t, cmd, &logs)
}

// The built binary applies config edits without a signal: a rename-over
// reaches /status.json, an invalid in-place edit shows on /health (and the
// running parameters stay) until a fix clears it.
func TestE2EServeBinaryHotReload(t *testing.T) {
	bin := buildServe(t)
	notes := notifySocket(t)
	dir := t.TempDir()
	model, _ := filepath.Abs(storiesModel)
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + model + "\n  threads: 1\ncache:\n  dir: " + dir + "\n  persist: false\n"
	writeConfig(t, cfgPath, base)
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "-c", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	m := await(t, notes, "READY=1", has("READY=1"))
	_, addr, ok := strings.Cut(field(m, "STATUS"), " at ")
	if !ok {
		t.Fatalf("STATUS in %q", m)
	}
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
	}
	type reload struct {
		Error string `json:"error"`
	}
	speculative := func() (mode string, steps int, lr *reload) {
		var doc struct {
			Speculative struct {
				Mode       string  `json:"mode"`
				Steps      int     `json:"steps"`
				LastReload *reload `json:"last_reload"`
			} `json:"speculative"`
		}
		getJSON("/status.json", &doc)
		return doc.Speculative.Mode, doc.Speculative.Steps, doc.Speculative.LastReload
	}
	healthReload := func() *reload {
		var h struct {
			LastReload *reload `json:"last_reload"`
		}
		getJSON("/health", &h)
		return h.LastReload
	}

	renameOver(t, cfgPath, base+"draft:\n  mode: tree\n  steps: 6\n")
	eventually(t, "rename-over edit on /status.json", func() bool { mode, steps, _ := speculative(); return mode == "tree" && steps == 6 })

	writeConfig(t, cfgPath, base+"draft:\n  mode: linear\n  top_k: 0\n")
	eventually(t, "invalid edit on /health", func() bool { lr := healthReload(); return lr != nil && strings.Contains(lr.Error, "draft.top_k") })
	if mode, steps, lr := speculative(); mode != "tree" || steps != 6 || lr == nil || !strings.Contains(lr.Error, "draft.top_k") {
		t.Fatalf("after an invalid edit: mode %s steps %d last reload %+v", mode, steps, lr)
	}

	renameOver(t, cfgPath, base+"draft:\n  mode: linear\n  steps: 2\n")
	eventually(t, "fixed edit applied and the error gone", func() bool {
		mode, steps, _ := speculative()
		return mode == "linear" && steps == 2 && healthReload() == nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, &logs)
}
