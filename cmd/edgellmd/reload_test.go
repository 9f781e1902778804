package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childLog collects a child process's output, one line at a time, and wakes
// a waiter at each new line.
type childLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	more    chan struct{} // capacity 1: lines arrived since the last look
}

func newChildLog() *childLog { return &childLog{more: make(chan struct{}, 1)} }

func (l *childLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *childLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + "\n" + string(l.partial)
}

// await returns the n-th (from 1) JSON log line whose message is msg,
// waiting up to a minute for it.
func (l *childLog) await(t *testing.T, msg string, n int) map[string]any {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		seen := 0
		for _, line := range l.lines {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
				if seen++; seen == n {
					l.mu.Unlock()
					return m
				}
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-deadline.C:
			t.Fatalf("no log line %q (#%d) within a minute", msg, n) // the cleanup prints the log
		}
	}
}

// startServeChild runs `edgellmd serve -c cfg` as a child process (this
// test binary as edgellmd, see TestMain) through a symlink named edgellmd,
// so that its /proc/PID/comm is the installed binary's. It returns once the
// daemon logs "ready", with the address it listens at.
func startServeChild(t *testing.T, cfg string) (*exec.Cmd, string, *childLog) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "edgellmd")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	logs := newChildLog()
	cmd := exec.Command(bin, "serve", "-c", cfg)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "LISTEN_FDS=")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("edgellmd serve log:\n%s", logs.String())
		}
	})
	ready := logs.await(t, "ready", 1)
	addrs, _ := ready["listen"].([]any)
	if len(addrs) == 0 {
		t.Fatalf("ready line without listen addresses: %v", ready)
	}
	addr, _ := addrs[0].(string)
	return cmd, addr, logs
}

type statusSpeculative struct {
	Mode       string `json:"mode"`
	TopK       int    `json:"top_k"`
	LastReload *struct {
		At      time.Time `json:"at"`
		Err     string    `json:"error"`
		Applied []string  `json:"applied"`
	} `json:"last_reload"`
}

func speculativeStatus(t *testing.T, addr string) statusSpeculative {
	t.Helper()
	resp, err := http.Get(addr + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Speculative statusSpeculative `json:"speculative"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/status.json: %d %v", resp.StatusCode, err)
	}
	return doc.Speculative
}

// TestReloadSignalsServe: `edgellmd reload --pid` (the unit's ExecReload=)
// makes a running `edgellmd serve` re-read its config file, which applies a
// changed draft setting, and the daemon goes on serving.
func TestReloadSignalsServe(t *testing.T) {
	dir := t.TempDir()
	model, err := filepath.Abs(stories)
	if err != nil {
		t.Fatal(err)
	}
	// The config path is a symlink to a file in another directory: the
	// daemon watches the link's directory, which the edits below leave
	// alone, so every reload here comes from the signal.
	target := filepath.Join(dir, "real", "edgellmd.yaml")
	cfg := filepath.Join(dir, "etc", "edgellmd.yaml")
	for _, d := range []string{filepath.Dir(target), filepath.Dir(cfg)} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + model + "\n  threads: 1\n  device: cpu\n" +
		"cache:\n  persist: false\nupdate:\n  state_dir: " + dir + "\n"
	if err := os.WriteFile(target, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, cfg); err != nil {
		t.Fatal(err)
	}
	serve, addr, logs := startServeChild(t, cfg)
	pid := strconv.Itoa(serve.Process.Pid)
	if st := speculativeStatus(t, addr); st.LastReload != nil || st.Mode != "off" {
		t.Fatalf("before any reload: %+v", st)
	}

	// The file unchanged: only the signal can cause this reload.
	t.Setenv("MAINPID", "")
	out, errOut, code := run(t, "reload", "--pid", pid)
	if code != 0 || !strings.Contains(out, "sent SIGHUP to edgellmd serve (pid "+pid+")") {
		t.Fatalf("reload --pid %s: exit %d, stdout %q, stderr %q", pid, code, out, errOut)
	}
	logs.await(t, "config reloaded", 1)
	st := speculativeStatus(t, addr)
	if st.LastReload == nil || st.LastReload.Err != "" || len(st.LastReload.Applied) != 0 || st.Mode != "off" {
		t.Fatalf("after a reload of the unchanged file: %+v", st)
	}
	first := st.LastReload.At

	// An edit applies at the next reload; the pid from $MAINPID, as systemd
	// sets it for ExecReload=.
	if err := os.WriteFile(target, []byte(base+"draft:\n  mode: tree\n  top_k: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAINPID", pid)
	if out, errOut, code := run(t, "reload"); code != 0 {
		t.Fatalf("reload with MAINPID=%s: exit %d, stdout %q, stderr %q", pid, code, out, errOut)
	}
	line := logs.await(t, "config reloaded", 2)
	st = speculativeStatus(t, addr)
	if st.LastReload == nil || !st.LastReload.At.After(first) || st.LastReload.Err != "" ||
		!slices.Equal(st.LastReload.Applied, []string{"draft.mode", "draft.top_k"}) || st.Mode != "tree" || st.TopK != 4 {
		t.Fatalf("after a reload of the edited file: %+v (log line %v)", st, line)
	}

	// Still serving; SIGTERM stops it cleanly.
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of SIGTERM")
	}
}

// TestReloadRefuses: a missing or malformed pid is a usage error; a pid
// that is not an edgellmd serve process is refused, and not signalled
// (SIGHUP would stop it).
func TestReloadRefuses(t *testing.T) {
	t.Setenv("MAINPID", "")
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Skipf("no sleep to stand in for another program: %v", err)
	}
	t.Cleanup(func() {
		if sleep.ProcessState == nil {
			_ = sleep.Process.Kill()
			_ = sleep.Wait()
		}
	})
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	absent := strconv.Itoa(pidMax + 1)
	sleepPid := strconv.Itoa(sleep.Process.Pid)
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "--pid is required"},
		{[]string{"--pid", "abc"}, 2, `--pid "abc": want a process id`},
		{[]string{"--pid", "0"}, 2, `--pid "0": want a process id`},
		{[]string{"--pid", "-1"}, 2, `--pid "-1": want a process id`},
		{[]string{"--pid", sleepPid, "now"}, 2, `unexpected argument "now"`},
		{[]string{"--pid", absent}, 1, "no process " + absent + ": is edgellmd running?"},
		{[]string{"--pid", sleepPid}, 1, "process " + sleepPid + ` is "sleep", not edgellmd`},
		// This test binary has edgellmd's code but runs the tests, not serve.
		{[]string{"--pid", self}, 1, "not edgellmd serve: SIGHUP would stop it"},
	} {
		out, errOut, code := run(t, append([]string{"reload"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("reload %v: exit %d, stdout %q, stderr %q; want exit %d naming %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	// sleep got no SIGHUP: it is still there for the SIGKILL.
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = sleep.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ended with %v, want killed by SIGKILL (a refused reload must not signal it)", err)
	}
}
