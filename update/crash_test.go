package update

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// crashExit is the exit status of a helper process that "crashed".
const crashExit = 3

// crashSpec tells TestCrashHelper what to do and where to die.
type crashSpec struct {
	Op        string // apply, rollback, recover
	StateDir  string
	Bundle    string // bundle file (apply)
	PubKey    string
	FailCheck bool   // the health check fails (apply)
	Step      string // die after the N-th time this step is reached
	N         int
}

// TestCrashHelper is not a test on its own: TestCrashRecovery runs the test
// binary with it to run one operation in a process that exits abruptly
// (no deferred cleanup, no further writes) at a chosen step — a crash or
// power loss as far as the state directory can tell, since every step
// fsyncs what it wrote before it returns.
func TestCrashHelper(t *testing.T) {
	raw := os.Getenv("UPDATE_CRASH_SPEC")
	if raw == "" {
		t.Skip("run by TestCrashRecovery")
	}
	var c crashSpec
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	hook := func(step string) {
		seen[step]++
		if step == c.Step && seen[step] == c.N {
			os.Exit(crashExit)
		}
	}
	key, err := LoadPublicKey(c.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{StateDir: c.StateDir, TrustedKeys: []TrustedKey{key}, Check: stubCheck, ReserveBytes: -1, Log: zerolog.Nop(), afterStep: hook}
	if c.FailCheck {
		opt.Check = func(context.Context, string, HealthCheck) error { return errors.New("model says nonsense") }
	}
	switch c.Op {
	case "apply":
		f, err := os.Open(c.Bundle)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, err = Apply(context.Background(), f, opt)
		if err != nil && !c.FailCheck {
			t.Fatal(err)
		}
	case "rollback":
		if _, err := Rollback(opt); err != nil {
			t.Fatal(err)
		}
	case "recover":
		unlock, err := lockState(c.StateDir, true)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		a := &applier{dir: c.StateDir, log: zerolog.Nop(), afterStep: hook}
		if _, err := a.recover(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("%s finished without reaching step %s #%d (reached %v)", c.Op, c.Step, c.N, seen)
}

// runCrash runs the helper and checks that it died where it was told to.
func runCrash(t *testing.T, c crashSpec) {
	t.Helper()
	spec, _ := json.Marshal(c)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "UPDATE_CRASH_SPEC="+string(spec))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != crashExit {
		t.Fatalf("helper did not crash at %s #%d: %v\n%s", c.Step, c.N, err, out)
	}
}

// TestCrashRecovery kills an apply (or a rollback, or Recover itself) after
// each of its steps, then runs Recover as the daemon would at start, and
// checks that current names an intact bundle — the old one before the
// commit, the new one after — that nothing is left over, and that the
// update can then be applied again.
func TestCrashRecovery(t *testing.T) {
	kp := newKeys(t)
	keyDir := t.TempDir()
	pubFile := kp.pubPath
	src := bundleDir(t, bytes.Repeat([]byte("model v"), 1000))
	v1, v2 := pack(t, kp, src, "1.0.0", nil), pack(t, kp, src, "2.0.0", nil)
	v2File := filepath.Join(keyDir, "v2.tar")
	if err := os.WriteFile(v2File, v2, 0o644); err != nil {
		t.Fatal(err)
	}

	type crash struct {
		op        string
		step      string
		n         int
		failCheck bool
		noV1      bool // nothing installed before
	}
	cases := []struct {
		crashes []crash // run in order, then Recover
		want    string
	}{
		{[]crash{{op: "apply", step: "verified", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "file", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "file", n: 2}}, "1.0.0"},
		{[]crash{{op: "apply", step: "staged", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "state-temp", n: 1}}, "1.0.0"}, // trial written to a temp file, not renamed
		{[]crash{{op: "apply", step: "trial", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "link-temp", n: 1}}, "1.0.0"}, // temp symlink made, not renamed
		{[]crash{{op: "apply", step: "swapped", n: 1}}, "1.0.0"},   // the acceptance case: between swap and commit
		{[]crash{{op: "apply", step: "checked", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "state-temp", n: 2}}, "1.0.0"}, // commit written to a temp file, not renamed
		{[]crash{{op: "apply", step: "committed", n: 1}}, "2.0.0"},
		{[]crash{{op: "apply", step: "swapped", n: 1, noV1: true}}, ""},
		{[]crash{{op: "apply", step: "link-temp", n: 2, failCheck: true}}, "1.0.0"}, // rolling back, temp symlink made
		{[]crash{{op: "apply", step: "unswapped", n: 1, failCheck: true}}, "1.0.0"},
		{[]crash{{op: "apply", step: "state-temp", n: 2, failCheck: true}}, "1.0.0"},
		{[]crash{{op: "apply", step: "unswapped", n: 1, failCheck: true, noV1: true}}, ""},
		// Recover itself interrupted, then run again.
		{[]crash{{op: "apply", step: "swapped", n: 1}, {op: "recover", step: "link-temp", n: 1}}, "1.0.0"},
		{[]crash{{op: "apply", step: "swapped", n: 1}, {op: "recover", step: "state-temp", n: 1}}, "1.0.0"},
		// A rollback from 2.0.0 to 1.0.0 interrupted: the state decides.
		{[]crash{{op: "rollback", step: "state-temp", n: 1}}, "2.0.0"},
		{[]crash{{op: "rollback", step: "rollback-state", n: 1}}, "1.0.0"},
		{[]crash{{op: "rollback", step: "link-temp", n: 1}}, "1.0.0"},
	}
	for _, tc := range cases {
		var names []string
		for _, c := range tc.crashes {
			names = append(names, fmt.Sprintf("%s@%s#%d", c.op, c.step, c.n))
			if c.failCheck {
				names[len(names)-1] += "(check fails)"
			}
			if c.noV1 {
				names[len(names)-1] += "(first install)"
			}
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			state := t.TempDir()
			opt := testOptions(state, kp)
			if !tc.crashes[0].noV1 {
				mustApply(t, v1, opt)
			}
			if tc.crashes[0].op == "rollback" {
				mustApply(t, v2, opt)
			}
			for _, c := range tc.crashes {
				runCrash(t, crashSpec{Op: c.op, StateDir: state, Bundle: v2File, PubKey: pubFile, FailCheck: c.failCheck, Step: c.step, N: c.n})
			}
			wantCurrent(t, state, tc.want)
			for _, pat := range []string{"bundles/.staging-*", "bundles/.trash-*", ".current.tmp-*", ".update.json.tmp-*"} {
				if m, _ := filepath.Glob(filepath.Join(state, pat)); len(m) > 0 {
					t.Fatalf("leftovers after recover: %v", m)
				}
			}
			s, err := ReadStatus(state)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range s.Installed {
				if b.Error != "" {
					t.Fatalf("broken bundle left installed: %+v", b)
				}
			}
			// The state directory is usable: the update goes through now.
			if tc.want != "2.0.0" {
				mustApply(t, v2, opt)
				wantCurrent(t, state, "2.0.0")
			}
		})
	}
}
