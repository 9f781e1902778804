package power

import (
	"context"
	"strings"
	"testing"
	"time"
)

// watcher runs c.watch in a goroutine with ticks the test sends, and hands
// back the status after each check.
type watcher struct {
	t      *testing.T
	ticks  chan time.Time
	checks chan Status
	cancel context.CancelFunc
	done   chan error
}

func startWatch(t *testing.T, c *Controller) *watcher {
	t.Helper()
	w := &watcher{t: t, ticks: make(chan time.Time), checks: make(chan Status, 16), done: make(chan error, 1)}
	c.afterCheck = func(s Status) { w.checks <- s }
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- c.watch(ctx, w.ticks) }()
	t.Cleanup(w.stop)
	return w
}

// next waits for the next check to finish.
func (w *watcher) next() Status {
	w.t.Helper()
	select {
	case s := <-w.checks:
		return s
	case <-time.After(30 * time.Second):
		w.t.Fatal("no check within 30s")
		return Status{}
	}
}

// tick makes the watcher check once more and returns the status after it.
func (w *watcher) tick() Status {
	w.t.Helper()
	w.ticks <- time.Now()
	return w.next()
}

func (w *watcher) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			w.t.Errorf("watch returned %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		w.t.Error("watch did not stop within 30s of its context ending")
	}
}

func TestWatchRepinsDrift(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	c, logs := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", Repin: true})
	w := startWatch(t, c)

	if s := w.next(); !s.Pinned || s.Drifted || s.Drifts != 0 {
		t.Fatalf("first check: %+v", s)
	}
	tools.resetCalls()
	tools.setMode(1) // someone ran `nvpmodel -m 1`
	s := w.tick()
	if !s.Drifted || s.Drifts != 1 || s.Repins != 1 || !s.Pinned || s.Mode.ID != 0 || s.LastError != "" {
		t.Errorf("after drift: %+v", s)
	}
	if tools.mode() != 0 {
		t.Errorf("mode is %d, want re-pinned to 0", tools.mode())
	}
	if got := strings.Join(tools.calls(), ", "); got != "nvpmodel -q, nvpmodel -q, nvpmodel -m 0, nvpmodel -q" {
		t.Errorf("drift check ran %s", got)
	}
	if !strings.Contains(logs.String(), "power mode drifted") || !strings.Contains(logs.String(), "re-pinned") {
		t.Errorf("log:\n%s", logs)
	}
	if s := w.tick(); s.Drifted || !s.Pinned || s.Drifts != 1 || s.Repins != 1 {
		t.Errorf("check after re-pin: %+v", s)
	}
}

func TestWatchReportsOnlyWithoutRepin(t *testing.T) {
	tools := newFakeTools(t, "orin-nano-super", 2)
	c, logs := newTestController(t, "orin-nano-super", tools, Options{Mode: "MAXN"})
	w := startWatch(t, c)
	w.next()

	tools.setMode(0)
	s := w.tick()
	if !s.Drifted || s.Pinned || s.Drifts != 1 || s.Repins != 0 || s.Mode.Name != "15W" {
		t.Errorf("after drift: %+v", s)
	}
	if s := w.tick(); s.Drifts != 1 || !s.Drifted { // the same drift is not counted twice
		t.Errorf("second check: %+v", s)
	}
	for _, call := range tools.calls() {
		if strings.HasPrefix(call, "nvpmodel -m") || call == "jetson_clocks" {
			t.Errorf("ran %q with re-pinning off", call)
		}
	}
	if n := strings.Count(logs.String(), "power mode drifted"); n != 1 {
		t.Errorf("drift logged %d times, want once:\n%s", n, logs)
	}
	tools.setMode(2) // the operator put it back
	if s := w.tick(); s.Drifted || !s.Pinned {
		t.Errorf("after the mode came back: %+v", s)
	}
}

func TestWatchRebootRequiredTriesOnce(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 2)
	tools.answerSet(0, "thor-reboot.txt", 0)
	c, logs := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", Repin: true, JetsonClocks: true})
	w := startWatch(t, c)

	s := w.next()
	if !s.Drifted || !s.RebootRequired || !strings.Contains(s.LastError, "sudo nvpmodel -m 0") {
		t.Errorf("first check: %+v", s)
	}
	w.tick()
	s = w.tick()
	if !s.RebootRequired || s.Drifts != 1 || s.Repins != 0 || !strings.Contains(s.LastError, "needs a reboot") {
		t.Errorf("later checks: %+v", s)
	}
	if n := strings.Count(strings.Join(tools.calls(), "\n"), "nvpmodel -m 0"); n != 1 {
		t.Errorf("nvpmodel -m 0 ran %d times, want once: %q", n, tools.calls())
	}
	if !strings.Contains(logs.String(), "without a reboot") {
		t.Errorf("log:\n%s", logs)
	}
}

func TestWatchSurvivesFailedChecks(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", Repin: true})
	w := startWatch(t, c)
	w.next()

	good := fakeNvpmodel
	tools.write("nvpmodel", "#!/bin/sh\necho 'NVPM ERROR: Error opening /etc/nvpmodel.conf'\nexit 1\n", 0o755)
	s := w.tick()
	if !strings.Contains(s.LastError, "NVPM ERROR") || !s.Pinned {
		t.Errorf("failed check: %+v (the last known mode stays)", s)
	}
	tools.write("nvpmodel", good, 0o755)
	if s := w.tick(); s.LastError != "" || !s.Pinned {
		t.Errorf("check after recovery: %+v", s)
	}
}

func TestWatchBadInterval(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN"})
	if err := c.Watch(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "check_interval") {
		t.Errorf("Watch(0) = %v", err)
	}
}

func TestWatchStopsWithContext(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN"})
	ctx, cancel := context.WithCancel(context.Background())
	checked := make(chan struct{}, 1)
	c.afterCheck = func(Status) {
		select {
		case checked <- struct{}{}:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, time.Hour) }()
	<-checked // the first check runs at once
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}
