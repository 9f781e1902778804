package power

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPinAlreadyInMode(t *testing.T) {
	tests := []struct {
		board string
		mode  int // current id, which is the MAXN mode of the board
		want  PowerMode
	}{
		{"thor-agx", 0, PowerMode{0, "MAXN"}},
		{"orin-nano-super", 2, PowerMode{2, "MAXN_SUPER"}},
		{"agx-orin", 0, PowerMode{0, "MAXN"}},
	}
	for _, tt := range tests {
		t.Run(tt.board, func(t *testing.T) {
			tools := newFakeTools(t, tt.board, tt.mode)
			c, _ := newTestController(t, tt.board, tools, Options{Mode: "MAXN"})
			res, err := c.Pin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Changed || res.JetsonClocks || *res.Target != tt.want {
				t.Errorf("Pin = %+v, want no change to %v", res, tt.want)
			}
			if got, want := tools.calls(), []string{"nvpmodel -p --verbose", "nvpmodel -q"}; !reflect.DeepEqual(got, want) {
				t.Errorf("ran %q, want only %q", got, want)
			}
			st := c.Status()
			if !st.Pinned || *st.Mode != tt.want || st.LastError != "" || st.LastCheck.IsZero() {
				t.Errorf("Status = %+v", st)
			}
			// A second Pin lists the modes no more.
			tools.resetCalls()
			if _, err := c.Pin(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := tools.calls(), []string{"nvpmodel -q"}; !reflect.DeepEqual(got, want) {
				t.Errorf("second Pin ran %q, want %q", got, want)
			}
		})
	}
}

func TestPinSwitches(t *testing.T) {
	tests := []struct {
		board      string
		from       int
		wantTarget PowerMode
	}{
		{"thor-agx", 1, PowerMode{0, "MAXN"}},              // from the 120W default
		{"orin-nano-super", 1, PowerMode{2, "MAXN_SUPER"}}, // from the 25W default
		{"agx-orin", 2, PowerMode{0, "MAXN"}},              // from the MODE_30W default
	}
	for _, tt := range tests {
		t.Run(tt.board, func(t *testing.T) {
			tools := newFakeTools(t, tt.board, tt.from)
			c, logs := newTestController(t, tt.board, tools, Options{Mode: "MAXN"})
			res, err := c.Pin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !res.Changed || res.From.ID != tt.from || *res.Target != tt.wantTarget {
				t.Errorf("Pin = %+v", res)
			}
			set := "nvpmodel -m " + itoa(tt.wantTarget.ID)
			want := []string{"nvpmodel -p --verbose", "nvpmodel -q", set, "nvpmodel -q"}
			if got := tools.calls(); !reflect.DeepEqual(got, want) {
				t.Errorf("ran %q, want %q", got, want)
			}
			// nvpmodel -m must see EOF at once on its standard input, so that a
			// reboot prompt can never be answered.
			checked := false
			for _, call := range tools.rawCalls() {
				if strings.HasPrefix(call, set+" |") {
					checked = true
					if !strings.HasSuffix(call, "stdin=/dev/null bytes=0") {
						t.Errorf("nvpmodel -m ran with %q, want stdin=/dev/null bytes=0", call)
					}
				}
			}
			if !checked {
				t.Errorf("no %q in the call log %q", set, tools.rawCalls())
			}
			if tools.mode() != tt.wantTarget.ID {
				t.Errorf("mode is %d after Pin, want %d", tools.mode(), tt.wantTarget.ID)
			}
			if st := c.Status(); !st.Pinned || *st.Mode != tt.wantTarget {
				t.Errorf("Status = %+v", st)
			}
			if !strings.Contains(logs.String(), "switched power mode") {
				t.Errorf("log has no switch line:\n%s", logs)
			}
		})
	}
}

func TestPinRebootRequired(t *testing.T) {
	tests := []struct {
		name   string
		board  string
		from   int
		mode   string
		target int
		answer string // file of testdata/nvpmodel/set
	}{
		// The recorded Thor answer is for `nvpmodel -m 2` (90W) from MAXN.
		{"thor 90W", "thor-agx", 0, "90W", 2, "thor-reboot.txt"},
		{"orin MAXN", "agx-orin", 2, "MAXN", 0, "orin-reboot-golden.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := newFakeTools(t, tt.board, tt.from)
			tools.answerSet(tt.target, tt.answer, 0)
			c, _ := newTestController(t, tt.board, tools, Options{Mode: tt.mode, JetsonClocks: true})
			_, err := c.Pin(context.Background())
			var rr *RebootRequiredError
			if !errors.As(err, &rr) {
				t.Fatalf("Pin error = %v, want a *RebootRequiredError", err)
			}
			if rr.Target.ID != tt.target || rr.From.ID != tt.from {
				t.Errorf("RebootRequiredError = %+v", rr)
			}
			msg := err.Error()
			for _, want := range []string{"needs a reboot", "run `sudo nvpmodel -m " + itoa(tt.target) + "` and reboot", "restart edgellmd"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			// Nothing was confirmed: the prompt read EOF, nothing else ran.
			want := []string{"nvpmodel -p --verbose", "nvpmodel -q", "nvpmodel -m " + itoa(tt.target)}
			if got := tools.calls(); !reflect.DeepEqual(got, want) {
				t.Errorf("ran %q, want %q (no jetson_clocks)", got, want)
			}
			if raw := tools.rawCalls(); !strings.HasSuffix(raw[2], "stdin=/dev/null bytes=0") {
				t.Errorf("nvpmodel -m ran with %q: it must get no input (no YES)", raw[2])
			}
			if tools.mode() != tt.from {
				t.Errorf("mode changed to %d", tools.mode())
			}
			st := c.Status()
			if !st.RebootRequired || st.Pinned || !strings.Contains(st.LastError, "needs a reboot") {
				t.Errorf("Status = %+v", st)
			}
		})
	}
}

func TestPinNvpmodelError(t *testing.T) {
	for _, rc := range []int{0, 1} { // nvpmodel has been seen to print NVPM ERROR and exit 0
		t.Run("exit "+itoa(rc), func(t *testing.T) {
			tools := newFakeTools(t, "thor-agx", 1)
			tools.answerSet(0, "error-permission.txt", rc)
			c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", JetsonClocks: true})
			_, err := c.Pin(context.Background())
			if err == nil {
				t.Fatal("Pin succeeded, want an error")
			}
			var rr *RebootRequiredError
			if errors.As(err, &rr) {
				t.Errorf("error %v is a reboot error", err)
			}
			for _, want := range []string{"switch power mode to MAXN (id 0)", "NVPM ERROR: Error opening /sys/devices/system/cpu/cpu4/online: 13"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if got := tools.calls(); len(got) != 3 || got[2] != "nvpmodel -m 0" {
				t.Errorf("ran %q, want -p, -q, -m 0 and no jetson_clocks", got)
			}
			if st := c.Status(); st.LastError == "" || st.Pinned {
				t.Errorf("Status = %+v", st)
			}
		})
	}
}

func TestPinJetsonClocks(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", JetsonClocks: true})
	ctx := context.Background()

	// First pin of the process: the mode is right (it survives a reboot) but
	// the clocks are not locked (that does not), so jetson_clocks runs.
	res, err := c.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.JetsonClocks || res.Changed {
		t.Errorf("first Pin = %+v, want jetson_clocks and no switch", res)
	}
	if got, want := tools.calls(), []string{"nvpmodel -p --verbose", "nvpmodel -q", "jetson_clocks"}; !reflect.DeepEqual(got, want) {
		t.Errorf("first Pin ran %q, want %q", got, want)
	}
	if !c.Status().JetsonClocksRun {
		t.Error("status does not say jetson_clocks ran")
	}

	// Nothing changed since: nothing runs but the query.
	tools.resetCalls()
	if res, err = c.Pin(ctx); err != nil || res.JetsonClocks {
		t.Fatalf("second Pin = %+v, %v", res, err)
	}
	if got, want := tools.calls(), []string{"nvpmodel -q"}; !reflect.DeepEqual(got, want) {
		t.Errorf("second Pin ran %q, want %q", got, want)
	}

	// A mode switch resets the clocks: jetson_clocks runs again after it.
	tools.setMode(1)
	tools.resetCalls()
	if res, err = c.Pin(ctx); err != nil || !res.Changed || !res.JetsonClocks {
		t.Fatalf("Pin after drift = %+v, %v", res, err)
	}
	if got, want := tools.calls(), []string{"nvpmodel -q", "nvpmodel -m 0", "nvpmodel -q", "jetson_clocks"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pin after drift ran %q, want %q", got, want)
	}
}

func TestPinJetsonClocksFails(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	tools.answerJetsonClocks("jetson-clocks-not-root.txt", 1)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", JetsonClocks: true})
	_, err := c.Pin(context.Background())
	if err == nil || !strings.Contains(err.Error(), "jetson_clocks") || !strings.Contains(err.Error(), "as a root user") {
		t.Errorf("Pin error = %v, want jetson_clocks' own complaint", err)
	}
	if c.Status().JetsonClocksRun {
		t.Error("status says jetson_clocks ran")
	}
}

func TestNotJetsonIsNoOp(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 1) // on PATH, and must not be run
	c, logs := newTestController(t, "x86", tools, Options{Mode: "MAXN", JetsonClocks: true, Repin: true})
	ctx := context.Background()

	res, err := c.Pin(ctx)
	if err != nil || !res.Skipped || !strings.Contains(res.Note, "not a Jetson") {
		t.Errorf("Pin = %+v, %v; want a skipped result saying why", res, err)
	}
	if st, err := c.Check(ctx); err != nil || st.Jetson || st.Mode != nil {
		t.Errorf("Check = %+v, %v", st, err)
	}
	if err := c.Watch(ctx, time.Hour); err != nil { // returns at once
		t.Errorf("Watch = %v", err)
	}
	if got := tools.calls(); len(got) != 0 {
		t.Errorf("ran %q off a Jetson", got)
	}
	if !strings.Contains(logs.String(), "not a Jetson") {
		t.Errorf("nothing logged:\n%s", logs)
	}
	if st := c.Status(); st.Note == "" {
		t.Errorf("Status has no note: %+v", st)
	}
}

func TestPinNoModeConfigured(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 1)
	c, _ := newTestController(t, "thor-agx", tools, Options{})
	res, err := c.Pin(context.Background())
	if err != nil || !res.Skipped {
		t.Errorf("Pin = %+v, %v", res, err)
	}
	// Check still reports the mode, without a target.
	st, err := c.Check(context.Background())
	if err != nil || st.Mode == nil || *st.Mode != (PowerMode{1, "120W"}) || st.Target != nil || st.Pinned {
		t.Errorf("Check = %+v, %v", st, err)
	}
	if got, want := tools.calls(), []string{"nvpmodel -q"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
}

func TestPinUnknownMode(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 1)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXQ"})
	_, err := c.Pin(context.Background())
	if err == nil || !strings.Contains(err.Error(), "power.mode") || !strings.Contains(err.Error(), "MAXN (id 0), 120W (id 1)") {
		t.Errorf("Pin error = %v, want one naming the key and listing the modes", err)
	}
	if got, want := tools.calls(), []string{"nvpmodel -p --verbose", "nvpmodel -q"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ran %q, want %q (no -m)", got, want)
	}
	// The status still shows the mode the board is in.
	if st := c.Status(); st.Mode == nil || *st.Mode != (PowerMode{1, "120W"}) || st.Target != nil || !strings.Contains(st.LastError, "MAXQ") {
		t.Errorf("Status = %+v", st)
	}
}

func TestPinNvpmodelMissing(t *testing.T) {
	tools := &fakeTools{t: t, dir: t.TempDir()} // an empty PATH directory
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN"})
	_, err := c.Pin(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nvpmodel not found on PATH") {
		t.Errorf("Pin error = %v", err)
	}
	if st := c.Status(); !strings.Contains(st.LastError, "nvpmodel not found") {
		t.Errorf("Status.LastError = %q", st.LastError)
	}
}

func TestCommandTimeout(t *testing.T) {
	tools := newFakeTools(t, "thor-agx", 0)
	tools.write("nvpmodel", "#!/bin/sh\nexec sleep 30\n", 0o755)
	c, _ := newTestController(t, "thor-agx", tools, Options{Mode: "MAXN", CommandTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := c.Pin(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Errorf("Pin error = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Pin took %s", d)
	}
}

func TestStatusJSON(t *testing.T) {
	tools := newFakeTools(t, "orin-nano-super", 1)
	c, _ := newTestController(t, "orin-nano-super", tools, Options{Mode: "MAXN"})
	c.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if _, err := c.Pin(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.Status())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jetson":true,"model":"NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super","soc":"tegra234","family":"Orin","l4t":"36.4.3",` +
		`"mode":{"id":2,"name":"MAXN_SUPER"},"pinned_mode":"MAXN","target":{"id":2,"name":"MAXN_SUPER"},` +
		`"modes":[{"id":0,"name":"15W"},{"id":1,"name":"25W"},{"id":2,"name":"MAXN_SUPER"},{"id":3,"name":"7W"}],"default_mode":{"id":1,"name":"25W"},"pinned":true,` +
		`"jetson_clocks_run":false,"drifted":false,"drifts":0,"repins":0,"last_check":"2026-01-02T03:04:05Z"}`
	if string(b) != want {
		t.Errorf("Status JSON =\n%s\nwant\n%s", b, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
