//go:build e2e

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EAgenticReplayAgainstServe replays the MLPerf trace against a real
// `edgellmd serve` running a synthetic qwen35 model that carries the Qwen3
// tokenizer and chat template, through the built binary:
//
//	edgellmd synth --arch qwen35 --size small --tokenizer qwen3/tokenizer.json.gz --seed 1 -o small.gguf
//	edgellmd serve -m small.gguf --listen 127.0.0.1:0
//	edgellmd bench agentic --dataset agentic_coding_2.5h.jsonl --tokenizer small.gguf \
//	    --conversations 2 --turns N --max-tokens-from-trace --out DIR --json
//
// The run must be valid; the client's prompt counts (its own rendering and
// tokenizing) must equal the server's, request by request; with ignore_eos
// the server must produce exactly the recorded answers' lengths.
// EDGELLMD_E2E_AGENTIC_TURNS sets N (default 3; 0 replays whole
// conversations, the acceptance run, which needs the server's prefix
// cache to finish in reasonable time).
func TestE2EAgenticReplayAgainstServe(t *testing.T) {
	turns := 3
	if s := os.Getenv("EDGELLMD_E2E_AGENTIC_TURNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("EDGELLMD_E2E_AGENTIC_TURNS=%q: %v", s, err)
		}
		turns = n
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "edgellmd")
	build := exec.Command("go", "build", "-o", bin, "../cmd/edgellmd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	model := filepath.Join(dir, "small.gguf")
	if out, err := exec.Command(bin, "synth", "--arch", "qwen35", "--size", "small",
		"--tokenizer", filepath.Join(qwenDir, "tokenizer.json.gz"), "--seed", "1", "-o", model).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v\n%s", err, out)
	}

	// The prefix cache persists in the test's own directory, never in the
	// default /var/lib/edgellmd/cache, where an earlier run's would serve.
	cfg := filepath.Join(dir, "edgellmd.yaml")
	if err := os.WriteFile(cfg, []byte("cache:\n  dir: "+filepath.Join(dir, "cache")+"\nupdate:\n  state_dir: "+filepath.Join(dir, "state")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bin, "serve", "-c", cfg, "-m", model, "--listen", "127.0.0.1:0", "--log-level", "info")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serveErr bytes.Buffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			serve.Process.Kill()
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			var line struct {
				Message string   `json:"message"`
				Listen  []string `json:"listen"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "ready" && len(line.Listen) > 0 && !sent {
				urls <- line.Listen[0]
				sent = true
			}
		}
		exited <- serve.Wait()
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-exited:
		t.Fatalf("serve exited: %v\n%s", err, serveErr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve not ready after 60 s\n%s", serveErr.String())
	}

	out := filepath.Join(dir, "report")
	cmd := exec.Command(bin, "bench", "agentic", "--url", url, "--dataset", tracePath, "--tokenizer", model,
		"--conversations", "2", "--turns", strconv.Itoa(turns), "--max-tokens-from-trace", "--out", out, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench agentic: %v\n%s", err, stderr.String())
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, raw)
	}
	t.Logf("summary: %s", raw)
	if !s.Valid || s.MissingTurns != 0 || (turns > 0 && s.Turns != 2*turns) {
		t.Fatalf("run not valid: %+v", s)
	}
	if s.PromptTokens != s.ServerPromptTokens {
		t.Errorf("client prompt tokens %d, server %d: the client renders or tokenizes differently", s.PromptTokens, s.ServerPromptTokens)
	}

	f, err := os.Open(filepath.Join(out, PerTurnFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.PromptTokens != r.ServerPromptTokens || r.ServerOutputTokens != r.MaxTokens || r.FinishReason != "length" || r.TTFTms <= 0 {
			t.Errorf("%s turn %d: prompt %d (server %d), output %d of max %d, finish %q, TTFT %v",
				r.ConversationID, r.Turn, r.PromptTokens, r.ServerPromptTokens, r.ServerOutputTokens, r.MaxTokens, r.FinishReason, r.TTFTms)
		}
	}
	report, err := os.ReadFile(filepath.Join(out, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", report)

	bfcl := exec.Command(bin, "bench", "bfcl", "--url", url, "--dataset", "testdata/bfcl_calib.jsonl", "--limit", "4", "--max-tokens", "16", "--json")
	bfcl.Stderr = &stderr
	raw, err = bfcl.Output()
	if err != nil {
		t.Fatalf("bench bfcl: %v\n%s", err, stderr.String())
	}
	var bs BFCLSummary
	if err := json.Unmarshal(raw, &bs); err != nil || bs.Cases != 4 || bs.Errors != 0 {
		t.Fatalf("bfcl summary %s (%v)", raw, err)
	}
	if !strings.Contains(string(raw), `"simple_python"`) {
		t.Errorf("bfcl summary lacks its subsets: %s", raw)
	}
}
