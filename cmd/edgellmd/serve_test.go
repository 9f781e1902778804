package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeCheckConfigFlagsOverrideFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "edgellmd.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:9000\nmodel:\n  path: /file.gguf\n  threads: 3\napi:\n  key: secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "serve", "-c", cfg, "--model", "/flag.gguf", "--log-level", "debug", "--check-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"listen: 127.0.0.1:9000", "path: /flag.gguf", "threads: 3", "level: debug", "key: (hidden)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Error("api.key printed")
	}
	out, _, code = run(t, "serve", "-c", cfg, "-m", "/m.gguf", "--listen", "0.0.0.0:1", "--check-config")
	if code != 0 || !strings.Contains(out, "path: /m.gguf") || !strings.Contains(out, "listen: 0.0.0.0:1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("draft:\n  top_k: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", filepath.Join(dir, "absent.yaml")}, "absent.yaml: no such file"},
		{[]string{"-c", bad}, "bad.yaml:2: draft.top_k: must be between 1 and 32, got 0"},
		{[]string{"-c", bad, "--listen", "nowhere"}, "draft.top_k"},
		{[]string{"--listen", "nowhere", "-c", filepath.Join(dir, "absent.yaml")}, "absent.yaml"},
	} {
		_, errOut, code := run(t, append([]string{"serve", "--check-config"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, errOut, code := run(t, "serve", "extra"); code != 2 || !strings.Contains(errOut, "unexpected argument") {
		t.Errorf("positional argument: exit %d %q", code, errOut)
	}
}
