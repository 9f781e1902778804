package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/update"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startDaemon runs a daemon on cfgPath until the test ends and returns its
// base URL once READY=1.
func startDaemon(t *testing.T, cfgPath, exe string) (string, func()) {
	t.Helper()
	notes := notifySocket(t)
	var logs syncBuffer
	d, err := newDaemon(Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: -1, Executable: exe}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx, nil) }()
	stopped := false
	shutdown := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop")
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	}
	t.Cleanup(shutdown)
	m := await(t, notes, "READY=1", has("READY=1"))
	_, addr, ok := strings.Cut(field(m, "STATUS"), " at ")
	if !ok {
		t.Fatalf("no address in %q", m)
	}
	return addr, shutdown
}

// servedModels lists /v1/models (with the test's API key "secret").
func servedModels(t *testing.T, addr string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, addr+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// POST /admin/update on a running daemon that serves the bundled model:
// the signed bundle is verified, health-checked, committed and served
// without a restart; a restart serves it too (update.Recover at start).
func TestAdminUpdateSwapsTheServedModel(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(root, "bin", "edgellmd")
	copyFile(t, storiesModel, filepath.Join(root, "share", "edgellmd", "models", BundledModel))
	copyFile(t, storiesModel, exe) // any file: only its directory matters

	keys, trusted, state := filepath.Join(root, "keys"), filepath.Join(root, "trusted.d"), filepath.Join(root, "state")
	for _, dir := range []string{keys, trusted, state} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := update.GenerateKeyFiles(filepath.Join(keys, "fleet")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(keys, "fleet.pub"), filepath.Join(trusted, "fleet.pub"))
	priv, err := update.LoadPrivateKey(filepath.Join(keys, "fleet.key"))
	if err != nil {
		t.Fatal(err)
	}

	// The bundle: the same weights under another file name, so the served
	// model id shows which one runs; the expected tokens come from our engine.
	bdir := filepath.Join(root, "bundle")
	copyFile(t, storiesModel, filepath.Join(bdir, "stories-v2.gguf"))
	eng, err := engine.Load(storiesModel, update.CheckOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "Once upon a time"
	want, err := update.GreedyTokens(context.Background(), eng, prompt, 8)
	eng.Close()
	if err != nil {
		t.Fatal(err)
	}
	var bundle bytes.Buffer
	if _, err := update.Pack(&bundle, bdir, update.PackOptions{Name: "stories", Version: "1.0.0",
		HealthCheck: update.HealthCheck{Prompt: prompt, Tokens: want}}, priv); err != nil {
		t.Fatal(err)
	}

	cfgPath := filepath.Join(root, "edgellmd.yaml")
	writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  threads: 1\ncache:\n  dir: "+filepath.Join(root, "cache")+
		"\n  persist: false\napi:\n  key: secret\nupdate:\n  state_dir: "+state+"\n  trusted_dir: "+trusted+"\n")
	addr, shutdown := startDaemon(t, cfgPath, exe)
	if got := servedModels(t, addr); len(got) != 1 || got[0] != "stories260K" {
		t.Fatalf("before the update the daemon serves %v, want the bundled stories260K", got)
	}

	post := func(key string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, addr+"/admin/update", bytes.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := post("wrong", bundle.Bytes()); code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d %s", code, body)
	}
	tampered := bytes.Clone(bundle.Bytes())
	tampered[len(tampered)/2] ^= 0xff
	if code, body := post("secret", tampered); code != http.StatusBadRequest {
		t.Fatalf("tampered bundle: %d %s", code, body)
	}
	if got := servedModels(t, addr); len(got) != 1 || got[0] != "stories260K" {
		t.Fatalf("after a refused bundle the daemon serves %v", got)
	}
	code, body := post("secret", bundle.Bytes())
	var res update.Result
	if err := json.Unmarshal(body, &res); err != nil || code != http.StatusOK || !res.Committed {
		t.Fatalf("update: %d %s", code, body)
	}
	if got := servedModels(t, addr); len(got) != 1 || got[0] != "stories-v2" {
		t.Fatalf("after the update the daemon serves %v, want stories-v2", got)
	}
	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/completions", strings.NewReader(`{"model":"stories-v2","prompt":"Once upon a time","max_tokens":4}`))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("completion on the new model: %v %v", resp, err)
	}
	resp.Body.Close()

	// An older bundle: refused, and the answer says how this route
	// allows it (its query parameter, not the command line's flag).
	var older bytes.Buffer
	if _, err := update.Pack(&older, bdir, update.PackOptions{Name: "stories", Version: "0.9.0",
		HealthCheck: update.HealthCheck{Prompt: prompt, Tokens: want}}, priv); err != nil {
		t.Fatal(err)
	}
	if code, body := post("secret", older.Bytes()); code != http.StatusConflict ||
		!strings.Contains(string(body), "?allow_downgrade=true") || strings.Contains(string(body), "--allow-downgrade") {
		t.Fatalf("downgrade: %d %s", code, body)
	}

	shutdown()
	addr, _ = startDaemon(t, cfgPath, exe)
	if got := servedModels(t, addr); len(got) != 1 || got[0] != "stories-v2" {
		t.Fatalf("after a restart the daemon serves %v, want the installed stories-v2", got)
	}
}
