//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveProc is `edgellmd serve` as a child process.
type serveProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	logs *lockedBuffer
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe starts the daemon on cfg and waits for /health to say ok.
func startServe(t *testing.T, bin, cfg, addr string, logs *lockedBuffer) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "-c", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, cmd: cmd, url: "http://" + addr, logs: logs}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(p.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not become ready\n%s", logs.String())
		}
	}
}

func (p *serveProc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if sig == syscall.SIGTERM && err != nil {
			p.t.Fatalf("serve exited with %v after SIGTERM\n%s", err, p.logs.String())
		}
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		p.t.Fatalf("serve did not exit after %v", sig)
	}
}

// statusCache reads the cache part of /status.json.
func (p *serveProc) statusCache() (diskEntries, restored int64, restoring bool) {
	p.t.Helper()
	resp, err := http.Get(p.url + "/status.json")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Cache struct {
			DiskEntries     int64 `json:"disk_entries"`
			RestoredEntries int64 `json:"restored_entries"`
			Restoring       bool  `json:"restoring"`
		} `json:"cache"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		p.t.Fatal(err)
	}
	return doc.Cache.DiskEntries, doc.Cache.RestoredEntries, doc.Cache.Restoring
}

// turn is one chat completion's answer and the prompt tokens the server
// restored from its prefix cache.
type turn struct {
	text   string
	cached int64
	prompt int64
}

var conversation = []string{
	"List the files in the project and say which one holds the configuration.",
	"Open the configuration file and tell me the listen address.",
	"Change the port to 9000 and show me the diff.",
}

// chatTurn sends turn i of the conversation, with the earlier answers as the
// assistant's messages (as an agent re-sends the whole conversation).
func chatTurn(t *testing.T, url string, i int, answers []string) turn {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a coding agent. Answer briefly.")}
	for j := 0; j < i; j++ {
		msgs = append(msgs, openai.UserMessage(conversation[j]), openai.AssistantMessage(answers[j]))
	}
	msgs = append(msgs, openai.UserMessage(conversation[i]))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "qwen", Messages: msgs, MaxCompletionTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatalf("turn %d: %v", i+1, err)
	}
	return turn{text: got.Choices[0].Message.Content, cached: got.Usage.PromptTokensDetails.CachedTokens, prompt: got.Usage.PromptTokens}
}

func writeServeConfig(t *testing.T, dir, model, addr string, cacheBytes string) string {
	t.Helper()
	cfg := filepath.Join(dir, "edgellmd.yaml")
	src := fmt.Sprintf("listen: %s\nmodel:\n  path: %s\n  name: qwen\n  threads: 2\ncache:\n  dir: %s\n  max_bytes: %s\n  max_disk_bytes: 256MiB\npower:\n  pin: \"\"\nupdate:\n  state_dir: %s\n",
		addr, model, filepath.Join(dir, "cache"), cacheBytes, filepath.Join(dir, "state"))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The prefix cache across restarts, with the daemon as a real child
// process on a hybrid (DeltaNet) model with the Qwen3 tokenizer and chat
// template: at temperature 0 the third turn's answer is the same cold
// (cache off), warm, after a graceful restart and after kill -9; after
// either restart the third turn gets exactly the cached_tokens it gets
// without a restart, from snapshots read back from disk.
func TestE2EPrefixCacheSurvivesRestart(t *testing.T) {
	bin := buildBinary(t)
	model := filepath.Join(t.TempDir(), "qwen35-tiny-qwen3tok.gguf")
	execOK(t, bin, "synth", "--arch", "qwen35", "--size", "tiny", "--tokenizer", "../../engine/tokenizer/testdata/qwen3/tokenizer.json.gz", "--seed", "10", "-o", model)

	// Warm, no restart: the reference.
	dir := t.TempDir()
	addr := freePort(t)
	var logs lockedBuffer
	p := startServe(t, bin, writeServeConfig(t, dir, model, addr, "256MiB"), addr, &logs)
	var ref []turn
	var answers []string
	for i := range conversation {
		tr := chatTurn(t, p.url, i, answers)
		ref = append(ref, tr)
		answers = append(answers, tr.text)
	}
	p.stop(syscall.SIGTERM)
	if ref[1].cached == 0 || ref[2].cached == 0 || ref[2].cached >= ref[2].prompt {
		t.Fatalf("warm run: cached tokens %d and %d of %d; the cache did not serve the later turns", ref[1].cached, ref[2].cached, ref[2].prompt)
	}
	t.Logf("warm: turn 3 has %d of %d prompt tokens from the cache", ref[2].cached, ref[2].prompt)

	// Cold: the cache off gives the same answers.
	cold := t.TempDir()
	addr = freePort(t)
	p = startServe(t, bin, writeServeConfig(t, cold, model, addr, "0"), addr, &logs)
	if got := chatTurn(t, p.url, 2, answers); got.text != ref[2].text || got.cached != 0 {
		t.Errorf("cold: %q (cached %d), warm %q", got.text, got.cached, ref[2].text)
	}
	p.stop(syscall.SIGTERM)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		dir := t.TempDir()
		addr := freePort(t)
		cfg := writeServeConfig(t, dir, model, addr, "256MiB")
		p := startServe(t, bin, cfg, addr, &logs)
		for i := 0; i < 2; i++ {
			if got := chatTurn(t, p.url, i, answers); got != ref[i] {
				t.Fatalf("%v run, turn %d: %+v, warm run %+v", sig, i+1, got, ref[i])
			}
		}
		if sig == syscall.SIGKILL {
			// kill -9 loses what is not written yet: wait for the writer
			// (it syncs within a second of a write) so that the comparison
			// below is exact.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if n, _, _ := p.statusCache(); n >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the snapshots never reached the disk\n%s", logs.String())
				}
			}
			time.Sleep(1500 * time.Millisecond)
		}
		p.stop(sig)

		p = startServe(t, bin, cfg, addr, &logs)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, restored, restoring := p.statusCache(); !restoring && restored > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %v: nothing restored from disk\n%s", sig, logs.String())
			}
		}
		if got := chatTurn(t, p.url, 2, answers); got != ref[2] {
			t.Errorf("after %v and a restart, turn 3: %+v; without a restart: %+v", sig, got, ref[2])
		}
		p.stop(syscall.SIGTERM)
	}
	if strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}
