package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// TestPassPanicAnswers500: a forward pass that panics (injected through
// engine.Options.PassHook) answers its request 500 with the panic in the
// message; the server stays up, /health turns 503 with the reason,
// /status.json and /metrics say the engine is broken, and later requests
// fail at once.
func TestPassPanicAnswers500(t *testing.T) {
	var armed atomic.Bool
	eng, err := engine.Load(storiesPath, engine.Options{Threads: 1, KVType: tensor.F16, MaxSequences: 1, Log: zerolog.Nop(),
		PassHook: func() {
			if armed.Load() {
				panic("injected fault in a forward pass")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ts := startServer(t, eng, 4, Options{})
	body := `{"model":"test-model","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4}`
	if status, _, data := post(t, ts.URL+"/v1/chat/completions", body); status != http.StatusOK {
		t.Fatalf("before the fault: %d %s", status, data)
	}
	if !strings.Contains(string(get(t, ts.URL+"/metrics")), "edgellmd_engine_broken{model_name=\"test-model\"} 0") {
		t.Error("/metrics: edgellmd_engine_broken is not 0 before the fault")
	}
	armed.Store(true)
	for i := range 2 {
		status, _, data := post(t, ts.URL+"/v1/chat/completions", body)
		if status != http.StatusInternalServerError || !strings.Contains(string(data), "injected fault in a forward pass") {
			t.Fatalf("request %d after the fault: %d %s, want 500 naming the panic", i, status, data)
		}
	}
	resp, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), "injected fault") || !strings.Contains(string(data), "engine_broken") {
		t.Fatalf("/health: %d %s, want 503 engine_broken with the reason", resp.StatusCode, data)
	}
	var st struct {
		Ready  bool   `json:"ready"`
		Broken string `json:"broken"`
	}
	if err := json.Unmarshal(get(t, ts.URL+"/status.json"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ready || !strings.Contains(st.Broken, "injected fault") {
		t.Errorf("/status.json: ready %v, broken %q", st.Ready, st.Broken)
	}
	if !strings.Contains(string(get(t, ts.URL+"/metrics")), "edgellmd_engine_broken{model_name=\"test-model\"} 1") {
		t.Error("/metrics: edgellmd_engine_broken is not 1 after the fault")
	}
}
