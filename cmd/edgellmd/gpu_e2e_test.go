//go:build e2e

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine/gpu"
)

// TestE2EServeOnGPU: `serve --device gpu:0` (lavapipe in CI) answers a chat
// completion on stories260K and reports the device, its driver and its
// memory in use in /status.json, /metrics and the "model loaded" log line.
func TestE2EServeOnGPU(t *testing.T) {
	infos, err := gpu.Devices()
	if err != nil || len(infos) == 0 {
		if os.Getenv("EDGELLMD_REQUIRE_GPU") == "1" {
			t.Fatalf("EDGELLMD_REQUIRE_GPU=1 and no Vulkan device: %v", err)
		}
		t.Skipf("no Vulkan device (apt-get install mesa-vulkan-drivers libvulkan1): %v", err)
	}
	sel := os.Getenv("EDGELLMD_TEST_DEVICE")
	if sel == "" {
		sel = "gpu:0"
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "edgellmd.yaml")
	if err := os.WriteFile(cfg, []byte("cache:\n  persist: false\nupdate:\n  state_dir: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model, _ := filepath.Abs(stories)
	addr := freePort(t)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "serve", "-c", cfg, "--model", model, "--listen", addr, "--device", sel)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	url := "http://" + addr
	for deadline := time.Now().Add(2 * time.Minute); ; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("serve --device %s exited (%v) before it was ready:\n%s", sel, err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve --device %s not ready in 2 minutes:\n%s", sel, logs.String())
		}
	}

	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &chat) != nil || len(chat.Choices) != 1 ||
		chat.Choices[0].Message.Content == "" || chat.Usage.CompletionTokens == 0 {
		t.Fatalf("chat completion on %s: %d %s", sel, resp.StatusCode, body)
	}

	var status struct {
		Device struct {
			Engine          string `json:"engine"`
			Selector        string `json:"selector"`
			Name            string `json:"name"`
			Driver          string `json:"driver"`
			MemoryUsedBytes int64  `json:"memory_used_bytes"`
		} `json:"device"`
	}
	if err := json.Unmarshal(httpGet(t, url+"/status.json"), &status); err != nil {
		t.Fatal(err)
	}
	d := status.Device
	if d.Engine != "vulkan" || d.Selector != sel || d.Name == "" || d.Driver == "" || d.MemoryUsedBytes <= 0 {
		t.Errorf("/status.json device: %+v, want vulkan on %s with its driver and memory in use", d, sel)
	}
	metrics := string(httpGet(t, url+"/metrics"))
	for _, want := range []string{`edgellmd_device_info{driver="` + d.Driver + `",engine="vulkan",model_name="stories260K",name="` + d.Name + `"} 1`,
		"edgellmd_device_memory_used_bytes{", "edgellmd_device_memory_total_bytes{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if l := logs.String(); !strings.Contains(l, `"engine":"vulkan"`) || !strings.Contains(l, `"driver":"`+d.Driver) {
		t.Errorf("the model loaded line lacks the device:\n%s", l)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM:\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
