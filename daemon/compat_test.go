package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// TestSystemFingerprint: the fingerprint names the model file's contents,
// edgellmd's version and the engine's settings, and nothing else (a copy
// of the file at another path and time has the same one).
func TestSystemFingerprint(t *testing.T) {
	cpu := engine.DeviceInfo{Engine: engine.EngineCPU, Name: "some CPU"}
	fpOf := func(path, version string, dev engine.DeviceInfo, kv, act string) (string, string) {
		t.Helper()
		efp, err := engine.Fingerprint(path, tensor.KVTypeNames[kv], tensor.ActivationNames[act], dev)
		if err != nil {
			t.Fatal(err)
		}
		return systemFingerprint(efp, version)
	}
	base, desc := fpOf(storiesModel, "1.2.0", cpu, "f16", "q8")
	if !regexp.MustCompile(`^fp_[0-9a-f]{16}$`).MatchString(base) || !strings.Contains(desc, "edgellmd=1.2.0") {
		t.Fatalf("fingerprint %q from %q", base, desc)
	}
	data, err := os.ReadFile(storiesModel)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copied := filepath.Join(dir, "copy.gguf")
	if err := os.WriteFile(copied, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A different header: one byte of the metadata (the first key's
	// name, past the 24-byte preamble and its 8-byte length).
	changed := slices.Clone(data)
	changed[24+8] ^= 0x20
	edited := filepath.Join(dir, "edited.gguf")
	if err := os.WriteFile(edited, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	fp1 := func(path, version string, dev engine.DeviceInfo, kv, act string) string {
		t.Helper()
		fp, _ := fpOf(path, version, dev, kv, act)
		return fp
	}
	if fp1(copied, "1.2.0", engine.DeviceInfo{Engine: engine.EngineCPU, Name: "another CPU"}, "f16", "q8") != base {
		t.Error("a copy of the file, on another CPU, changed the fingerprint")
	}
	gpu := engine.DeviceInfo{Engine: engine.EngineVulkan, Name: "Orin", Driver: "nvidia 540"}
	newer := gpu
	newer.Driver = "nvidia 541"
	for _, tc := range []struct{ name, a, b string }{
		{"another version", base, fp1(storiesModel, "1.2.1", cpu, "f16", "q8")},
		{"another header", base, fp1(edited, "1.2.0", cpu, "f16", "q8")},
		{"another KV type", base, fp1(storiesModel, "1.2.0", cpu, "fp8", "q8")},
		{"other activations", base, fp1(storiesModel, "1.2.0", cpu, "f16", "nvfp4")},
		{"a GPU", base, fp1(storiesModel, "1.2.0", gpu, "f16", "q8")},
		{"another GPU driver", fp1(storiesModel, "1.2.0", gpu, "f16", "q8"), fp1(storiesModel, "1.2.0", newer, "f16", "q8")},
	} {
		if tc.a == tc.b {
			t.Errorf("%s: the same fingerprint %s", tc.name, tc.a)
		}
	}
	if _, err := engine.Fingerprint(filepath.Join(dir, "missing.gguf"), tensor.F16, tensor.NVFP4ActQ8, cpu); err == nil {
		t.Error("no error for a missing file")
	}
}

// TestAPISettingsReachTheServer: model.aliases, api.cors_origins, the
// X-Api-Key form of api.key and the system fingerprint, through a running
// daemon.
func TestAPISettingsReachTheServer(t *testing.T) {
	notes := notifySocket(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+storiesModel+"\n  threads: 1\n  aliases: [gpt-4o-mini]\n"+
		"cache:\n  dir: "+dir+"\napi:\n  key: k3y\n  cors_origins: [\"http://localhost:3000\"]\n")
	var logs syncBuffer
	d, addr := runUntilReady(t, notes, Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: -1, Version: "9.9.9"})
	do := func(method, path, body string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	resp, body := do(http.MethodGet, "/models", "", "X-Api-Key", "k3y")
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	json.Unmarshal(body, &models)
	if resp.StatusCode != 200 || len(models.Data) != 2 || models.Data[0].ID != "stories260K" || models.Data[1].ID != "gpt-4o-mini" {
		t.Errorf("/models: %d %s", resp.StatusCode, body)
	}

	resp, body = do(http.MethodPost, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Lily"}],"max_tokens":3}`,
		"Authorization", "Bearer k3y", "Origin", "http://localhost:3000")
	var answer struct {
		Model             string `json:"model"`
		SystemFingerprint string `json:"system_fingerprint"`
	}
	json.Unmarshal(body, &answer)
	want, _ := systemFingerprint(d.eng.Load().Fingerprint(), "9.9.9")
	if resp.StatusCode != 200 || answer.Model != "stories260K" || answer.SystemFingerprint != want {
		t.Errorf("chat as gpt-4o-mini: %d %s, want system_fingerprint %s", resp.StatusCode, body, want)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:3000" {
		t.Errorf("Access-Control-Allow-Origin %q", got)
	}

	resp, _ = do(http.MethodOptions, "/v1/chat/completions", "", "Origin", "http://localhost:3000", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not name the fingerprint %s", want)
	}
}
