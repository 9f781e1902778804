//go:build e2e

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildBinary builds edgellmd once per test binary into a temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgellmd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func execOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("edgellmd %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// The whole path through the built binary: synth writes the tiny qwen35 model
// that llama.cpp made its goldens from (same sha256), and `run --json` on it
// reproduces llama.cpp's greedy tokens (F32 KV on both sides; golden.mjs
// tokenizes without parsing special tokens, so --special=false).
func TestE2ESynthThenRunMatchesLlamaCpp(t *testing.T) {
	bin := buildBinary(t)
	var manifest struct {
		Models []struct {
			Name    string `json:"name"`
			Options struct {
				Size string `json:"size"`
				MTP  bool   `json:"mtp"`
				Seed int    `json:"seed"`
			} `json:"options"`
			Tokenizer string            `json:"tokenizer"`
			SHA256    string            `json:"sha256"`
			Goldens   map[string]string `json:"goldens"`
		} `json:"models"`
	}
	raw, err := os.ReadFile("../../testdata/qwen35/models.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	for _, m := range manifest.Models {
		if m.Tokenizer != "" {
			continue // the Qwen3-tokenizer model is covered by engine/model's parity test
		}
		out := filepath.Join(t.TempDir(), m.Name+".gguf")
		args := []string{"synth", "--arch", "qwen35", "--size", m.Options.Size, "--seed", itoa(m.Options.Seed), "-o", out}
		if m.Options.MTP {
			args = append(args, "--mtp")
		}
		execOK(t, bin, args...)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != m.SHA256 {
			t.Fatalf("%s: synth wrote sha256 %s, llama.cpp's goldens were made from %s", m.Name, got, m.SHA256)
		}
		for _, g := range readGoldens(t, filepath.Join("../../testdata/qwen35", m.Goldens["f32kv"])) {
			line := execOK(t, bin, "run", "-m", out, "-p", g.Prompt, "-n", itoa(len(g.Tokens)), "--ignore-eos", "--kv", "f32", "--json", "--threads", "2", "--special=false", "--device", "cpu")
			var got runOutput
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if !slices.Equal(got.PromptTokens, g.PromptTokens) || !slices.Equal(got.Tokens, g.Tokens) {
				t.Errorf("%s %q:\n got %v %v\nwant %v %v", m.Name, g.Prompt, got.PromptTokens, got.Tokens, g.PromptTokens, g.Tokens)
			}
		}
	}
}

func TestE2EBenchDecodeReportsMappedWeights(t *testing.T) {
	bin := buildBinary(t)
	line := execOK(t, bin, "bench", "decode", "-m", stories, "--prompt-tokens", "128", "--gen", "32", "--runs", "1", "--json")
	var b benchLine
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatal(err)
	}
	if b.DecodeTokS <= 0 || b.PrefillTokS <= 0 {
		t.Fatalf("bad bench line %s", line)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
