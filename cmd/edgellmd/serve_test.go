package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/daemon"
	"github.com/edgellmd/edgellmd/engine/gpu"
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
	if want := "# " + cfg + " checked: valid."; !strings.HasPrefix(out, want) {
		t.Errorf("output does not start with %q:\n%s", want, out)
	}
	out, _, code = run(t, "serve", "-c", cfg, "-m", "/m.gguf", "--listen", "0.0.0.0:1", "--check-config")
	if code != 0 || !strings.Contains(out, "path: /m.gguf") || !strings.Contains(out, "listen: 0.0.0.0:1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// Without -c, --check-config says whether the default file was there to
// check: with none, that the output is the defaults and flags, not a file.
func TestServeCheckConfigSaysWhichFile(t *testing.T) {
	out, errOut, code := run(t, "serve", "--check-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "# No config file checked: " + daemon.DefaultConfigPath + " does not exist (name one with -c FILE)."
	if _, err := os.Stat(daemon.DefaultConfigPath); err == nil {
		want = "# " + daemon.DefaultConfigPath + " checked: valid."
	}
	if !strings.HasPrefix(out, want) {
		t.Fatalf("output does not start with %q:\n%s", want, out)
	}
	if !strings.Contains(out, "listen: 127.0.0.1:8001") {
		t.Fatalf("no configuration printed:\n%s", out)
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

// TestServeDeviceNotFound: a GPU asked for that cannot be used stops the
// start with an error naming model.device, rather than serving on the CPU.
func TestServeDeviceNotFound(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "edgellmd.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\ncache:\n  persist: false\nupdate:\n  state_dir: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sels := []string{"gpu:99"}
	if !gpu.HasGPU() {
		sels = append(sels, "gpu")
	}
	for _, sel := range sels {
		out, errOut, code := run(t, "serve", "-c", cfg, "--model", stories, "--device", sel)
		if code != 1 || !strings.Contains(errOut, "model.device: device "+sel+" cannot be used") {
			t.Errorf("--device %s: exit %d, stderr %q; want 1 and a model.device error", sel, code, errOut)
		}
		if strings.Contains(out, `"message":"ready"`) {
			t.Errorf("--device %s: served anyway:\n%s", sel, out)
		}
	}
	if _, errOut, code := run(t, "serve", "-c", cfg, "--device", "cuda:0", "--check-config"); code != 1 ||
		!strings.Contains(errOut, `model.device: "cuda:0" is not auto, cpu, gpu or gpu:N`) {
		t.Errorf("--device cuda:0: exit %d, stderr %q", code, errOut)
	}
	out, _, code := run(t, "serve", "-c", cfg, "--device", "gpu:1", "--check-config")
	if code != 0 || !strings.Contains(out, "device: gpu:1") {
		t.Errorf("--device gpu:1 --check-config: exit %d\n%s", code, out)
	}
}

func TestRunDeviceFlag(t *testing.T) {
	if _, errOut, code := run(t, "run", "-m", stories, "-p", "x", "--device", "tpu"); code != 2 || !strings.Contains(errOut, "--device") {
		t.Errorf("--device tpu: exit %d %q, want 2 naming the flag", code, errOut)
	}
	out, errOut, code := run(t, "run", "-m", stories, "-p", "Once", "-n", "4", "--device", "cpu", "--json", "--threads", "1")
	if code != 0 || !strings.Contains(out, `"tokens":[`) {
		t.Errorf("--device cpu: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := run(t, "run", "-m", stories, "-p", "x", "--device", "gpu:99"); code != 1 || !strings.Contains(errOut, "device gpu:99 cannot be used") {
		t.Errorf("--device gpu:99: exit %d %q", code, errOut)
	}
}
