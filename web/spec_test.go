package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// With drafting on, a repeated request is mostly accepted drafts: the
// request's log line, /metrics (drafts, accepted tokens per position) and
// /status.json (acceptance, mean accepted length) all say so, and the text
// equals what the same engine wrote with drafting off.
func TestSpeculativeFiguresReachMetrics(t *testing.T) {
	eng, err := engine.Load(storiesPath, engine.Options{Threads: 1, KVType: tensor.F16, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ts := startServer(t, eng, 4, Options{})
	const body = `{"prompt":"Once upon a time","max_tokens":48,"temperature":0}`
	complete := func(id string) string {
		code, _, data := post(t, ts.URL+"/v1/completions", body, "X-Request-ID", id)
		if code != http.StatusOK {
			t.Fatalf("completion: %d %s", code, data)
		}
		var r struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text
	}
	plain := complete("spec-plain")
	cfg := speculative.Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"suffix"}}
	if err := eng.SetDraft(cfg); err != nil {
		t.Fatal(err)
	}
	complete("spec-learn") // the suffix drafter learns the text
	if got := complete("spec-repeat"); got != plain {
		t.Fatalf("with drafting: %q, without: %q", got, plain)
	}
	// The line is written once the metrics and the status book have the
	// request, after the client has its answer.
	last := ts.logs.requestLine(t, "spec-repeat")
	if last["draft"] != cfg.String() || last["accepted_tokens"].(float64) < 20 {
		t.Fatalf("request log line: %v", last)
	}
	metrics := string(get(t, ts.URL+"/metrics"))
	for _, want := range []string{"edgellmd_spec_decode_num_drafts_total", `edgellmd_spec_decode_num_accepted_tokens_per_pos_total{model_name="test-model",position="0"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var doc struct {
		Speculative struct {
			AcceptedTokens     int64   `json:"accepted_tokens"`
			Acceptance         float64 `json:"acceptance"`
			MeanAcceptedLength float64 `json:"mean_accepted_length"`
		} `json:"speculative"`
	}
	if err := json.Unmarshal(get(t, ts.URL+"/status.json"), &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Speculative; s.AcceptedTokens < 20 || s.Acceptance <= 0 || s.MeanAcceptedLength <= 2 {
		t.Errorf("/status.json speculative: %+v", s)
	}
}
