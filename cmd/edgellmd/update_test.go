package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/update"
)

func updateCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := cmdUpdate(args, &out, zerolog.Nop())
	return out.String(), err
}

// TestUpdateCLI walks the whole flow with the real model: keygen, pack with
// --model-check, apply with the engine health check, status, a tampered
// bundle, a bundle whose expected tokens are wrong, and rollback.
func TestUpdateCLI(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "signer")
	if out, err := updateCmd(t, "keygen", "-o", keys); err != nil || !strings.Contains(out, "signer.pub") {
		t.Fatalf("keygen: %v %s", err, out)
	}
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	model, err := os.ReadFile(stories)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "stories260K.gguf"), model, 0o644)
	state, root := filepath.Join(dir, "state"), t.TempDir()
	b1, b2 := filepath.Join(dir, "b1.tar"), filepath.Join(dir, "b2.tar")
	if out, err := updateCmd(t, "pack", "--key", keys+".key", "--version", "1.0.0", "--model-check", "--expect-n", "8", "--threads", "1", src, "-o", b1); err != nil {
		t.Fatalf("pack: %v", err)
	} else if !strings.Contains(out, `"Once upon a time"`) {
		t.Fatalf("pack output: %s", out)
	}
	apply := func(bundle string, extra ...string) (update.Result, error) {
		args := append([]string{"apply", bundle, "--pubkey", keys + ".pub", "--state-dir", state, "--root", root, "--threads", "1", "--json"}, extra...)
		out, err := updateCmd(t, args...)
		var res update.Result
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
			t.Fatalf("apply --json printed %q: %v", out, jerr)
		}
		return res, err
	}

	// A flipped byte in the model file is refused; nothing is installed.
	data, _ := os.ReadFile(b1)
	i := bytes.Index(data, []byte("GGUF"))
	data[i+5000] ^= 1
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, data, 0o644)
	if res, err := apply(bad); err == nil || !strings.Contains(err.Error(), "sha256") || res.Committed {
		t.Fatalf("tampered bundle: %v %+v", err, res)
	}

	if _, err := os.Stat(filepath.Join(state, "current")); !os.IsNotExist(err) {
		t.Fatalf("current exists after a refused bundle: %v", err)
	}
	if res, err := apply(b1); err != nil || !res.Committed || res.ModelPath != filepath.Join(state, "bundles", "1.0.0", "stories260K.gguf") {
		t.Fatalf("apply: %v %+v", err, res)
	}
	// Wrong expected tokens: applied, checked, rolled back.
	if _, err := updateCmd(t, "pack", "--key", keys+".key", "--version", "1.1.0", "--expect-prompt", "Once upon a time", "--expect-tokens", "1,2,3", src, "-o", b2); err != nil {
		t.Fatal(err)
	}
	if res, err := apply(b2); err == nil || !res.RolledBack || res.Current != "1.0.0" {
		t.Fatalf("failing health check: %v %+v", err, res)
	}
	// Untrusted: no key given and an empty trusted folder.
	if _, err := updateCmd(t, "apply", b2, "--trusted-dir", t.TempDir(), "--state-dir", state); err == nil || !strings.Contains(err.Error(), "no trusted keys") {
		t.Fatalf("no keys: %v", err)
	}

	// Pack a good 1.1.0 with tokens given by hand (those --model-check found).
	var m1 update.Manifest
	readManifest(t, b1, &m1)
	var ids []string
	for _, id := range m1.HealthCheck.Tokens {
		ids = append(ids, strconv.Itoa(int(id)))
	}
	if _, err := updateCmd(t, "pack", "--key", keys+".key", "--version", "v1.1.0", "--name", "stories", "--expect-prompt", m1.HealthCheck.Prompt, "--expect-tokens", strings.Join(ids, ","), src, "-o", b2); err != nil {
		t.Fatal(err)
	}
	if res, err := apply(b2); err != nil || res.Version != "1.1.0" || res.Previous != "1.0.0" {
		t.Fatalf("apply 1.1.0: %v %+v", err, res)
	}
	if _, err := apply(b1); err == nil || !strings.Contains(err.Error(), "--allow-downgrade") {
		t.Fatalf("downgrade: %v", err)
	}
	out, err := updateCmd(t, "status", "--state-dir", state)
	if err != nil || !strings.Contains(out, "current: stories 1.1.0") || !strings.Contains(out, "previous: src 1.0.0") || !strings.Contains(out, "last failure") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = updateCmd(t, "rollback", "--state-dir", state)
	if err != nil || !strings.Contains(out, "rolled back to src 1.0.0") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	out, err = updateCmd(t, "status", "--state-dir", state, "--json")
	var st update.Status
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Current.Version != "1.0.0" || st.Link != "1.0.0" {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
}

func readManifest(t *testing.T, bundle string, m *update.Manifest) {
	t.Helper()
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.IndexByte(data[512:], '{') + 512 // the first entry's data, after its header
	end := bytes.Index(data[start:], []byte("\n}\n")) + start + 2
	if err := json.Unmarshal(data[start:end], m); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateCLIErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "keygen, pack, apply"},
		{[]string{"frobnicate"}, "unknown update command"},
		{[]string{"keygen"}, "-o KEYBASE"},
		{[]string{"pack", "dir", "-o", "x"}, "--key, --version and -o"},
		{[]string{"pack", "--key", "k", "--version", "1.0.0", "-o", "x", "dir"}, "either --expect-tokens"},
		{[]string{"pack", "--key", "k", "--version", "1.0.0", "-o", "x", "--model-check", "--expect-tokens", "1", "dir"}, "either --expect-tokens"},
		{[]string{"pack", "--key", "k", "--version", "1.0.0", "-o", "x", "--expect-tokens", "1", "dir"}, "needs --expect-prompt"},
		{[]string{"apply"}, "one BUNDLE"},
		{[]string{"status", "extra"}, "unexpected argument"},
	} {
		_, err := updateCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.msg)
		}
	}
}
