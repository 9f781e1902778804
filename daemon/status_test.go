package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestModelInfo(t *testing.T) {
	info, err := modelInfo(storiesModel, "llama")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(storiesModel)
	if err != nil {
		t.Fatal(err)
	}
	// From testdata/models/README.md: vocabulary 512, embedding 64, 5
	// layers, FFN 172, 8 heads of 8 dims, 4 KV heads, all F32, with an
	// output matrix of its own: per layer q,o 64x64, k,v 64x32, three FFN
	// matrices 64x172 and two norms.
	perLayer := 2*64*64 + 2*64*32 + 3*64*172 + 2*64
	params := int64(5*perLayer + 2*512*64 + 64)
	want := struct {
		quant         string
		size, params  int64
		arch, pathEnd string
	}{"F32", st.Size(), params, "llama", "stories260K.gguf"}
	if info.Quantization != want.quant || info.FileBytes != want.size || info.MappedBytes != want.size ||
		info.Parameters != want.params || info.Arch != want.arch || !strings.HasSuffix(info.Path, want.pathEnd) {
		t.Fatalf("modelInfo = %+v, want %+v", info, want)
	}
	if _, err := modelInfo(filepath.Join(t.TempDir(), "missing.gguf"), "llama"); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestStatusPageSeesTheDaemon: the daemon hands the web server its power
// controller, telemetry, settings and last reload.
func TestStatusPageSeesTheDaemon(t *testing.T) {
	notes := notifySocket(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgellmd.yaml")
	base := "listen: 127.0.0.1:0\nmodel:\n  path: " + storiesModel + "\n  threads: 1\ncache:\n  dir: " + dir +
		"\n  max_bytes: 64MiB\ndraft:\n  mode: tree\n  steps: 6\n"
	writeConfig(t, cfgPath, base)
	var logs syncBuffer
	d, addr := runUntilReady(t, notes, Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: -1}) // reloads by Reload() alone
	for deadline := time.Now().Add(5 * time.Second); d.Power() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no power controller")
		}
	}
	resp, err := http.Post(addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","max_tokens":5}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %v %v", resp, err)
	}
	resp.Body.Close()
	writeConfig(t, cfgPath, base+"  top_k: 0\n")
	if err := d.Reload(); err == nil {
		t.Fatal("a bad reload was accepted")
	}

	get := func(path string) []byte {
		resp, err := http.Get(addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, b)
		}
		return b
	}
	var doc struct {
		Power *struct {
			PinnedMode string `json:"pinned_mode"`
			Note       string `json:"note"`
		} `json:"power"`
		Machine *struct {
			Memory struct {
				OK bool `json:"ok"`
			} `json:"memory"`
		} `json:"machine"`
		Model struct {
			Name, Arch, Quantization string
			FileBytes                int64  `json:"file_bytes"`
			Note                     string `json:"note"`
		} `json:"model"`
		Cache struct {
			MaxBytes int64 `json:"max_bytes"`
		} `json:"cache"`
		Speculative struct {
			Mode       string `json:"mode"`
			Steps      int    `json:"steps"`
			LastReload *struct {
				Error string `json:"error"`
			} `json:"last_reload"`
		} `json:"speculative"`
		Requests struct {
			Total int `json:"total"`
		} `json:"requests"`
	}
	body := get("/status.json")
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(storiesModel)
	switch {
	case doc.Power == nil || doc.Power.PinnedMode != "MAXN":
		t.Errorf("power: %s", body)
	case doc.Machine == nil || !doc.Machine.Memory.OK:
		t.Errorf("telemetry: %s", body)
	case doc.Model.Name != "stories260K" || doc.Model.Arch != "llama" || doc.Model.Quantization != "F32" || doc.Model.FileBytes != st.Size():
		t.Errorf("model: %+v", doc.Model)
	case !strings.Contains(doc.Model.Note, "story fragments, not answers"):
		t.Errorf("the bundled model has no warning on the status page: %+v", doc.Model)
	case doc.Cache.MaxBytes != 64<<20:
		t.Errorf("cache: %+v", doc.Cache)
	case doc.Speculative.Mode != "tree" || doc.Speculative.Steps != 6 || doc.Speculative.LastReload == nil ||
		!strings.Contains(doc.Speculative.LastReload.Error, "draft.top_k"):
		t.Errorf("speculative: %s", body)
	case doc.Requests.Total != 1:
		t.Errorf("requests: %+v", doc.Requests)
	}
	metrics := string(get("/metrics"))
	for _, want := range []string{"edgellmd_power_mode_pinned 0", `edgellmd_generation_tokens_total{model_name="stories260K"} 5`, "process_resident_memory_bytes"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if page := string(get("/")); !strings.Contains(page, "/static/app.js") {
		t.Errorf("status page: %.200s", page)
	}
	warned := false
	for _, l := range strings.Split(logs.String(), "\n") {
		warned = warned || strings.Contains(l, `"level":"warn"`) && strings.Contains(l, `"message":"`+bundledModelNote+`"`)
	}
	if !warned {
		t.Errorf("no warning about the bundled model in the log at start")
	}
	// Durations in the log carry their unit in the key.
	if !regexp.MustCompile(`"took_ms":[0-9.]+,.*"message":"model mapped"`).MatchString(logs.String()) {
		t.Errorf("the model mapped line has no took_ms:\n%s", logs.String())
	}
}

// Only the bundled test model gets the warning.
func TestModelNoteOnlyForTheBundledModel(t *testing.T) {
	for path, want := range map[string]bool{
		"/usr/share/edgellmd/models/stories260K.gguf": true,
		"/var/lib/edgellmd/models/qwen3-8b-q8_0.gguf": false,
		"stories15M.gguf": false,
	} {
		if got := modelNote(path) != ""; got != want {
			t.Errorf("modelNote(%q) = %q", path, modelNote(path))
		}
	}
}

// runUntilReady runs a daemon with opt (LogOutput a *syncBuffer) until it
// says READY=1 on notes, and returns it and the address it serves at; the
// test's end stops it (and shows its log when the test failed).
func runUntilReady(t *testing.T, notes <-chan string, opt Options) (*Daemon, string) {
	t.Helper()
	d, err := newDaemon(opt, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx, nil) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-runErr:
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop")
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", opt.LogOutput.(*syncBuffer).String())
		}
	})
	m := await(t, notes, "READY=1", has("READY=1"))
	_, addr, ok := strings.Cut(field(m, "STATUS"), " at ")
	if !ok {
		t.Fatalf("no address in %q", m)
	}
	return d, addr
}
