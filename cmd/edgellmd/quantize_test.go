package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `quantize --type nvfp4` then `run` on its output reproduces llama.cpp's
// greedy tokens on the same NVFP4 file (testdata/nvfp4).
func TestQuantizeThenRunMatchesLlamaCpp(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stories-nvfp4.gguf")
	stdout, errOut, code := run(t, "quantize", stories, out, "--type", "nvfp4")
	if code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, "31 weight matrices to NVFP4") || !strings.Contains(stdout, "31 input scales, FP8 KV scales for 5 layers") {
		t.Errorf("quantize printed %q", stdout)
	}
	for _, g := range readGoldens(t, "../../testdata/nvfp4/stories260K-nvfp4-greedy64.jsonl")[:3] {
		o, e, c := run(t, "run", "-m", out, "-p", g.Prompt, "-n", "64", "--json", "--threads", "1", "--special=false", "--device", "cpu")
		if c != 0 {
			t.Fatalf("run: exit %d: %s", c, e)
		}
		var got runOutput
		if err := json.Unmarshal([]byte(o), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Tokens) < len(g.Tokens) || !slices.Equal(got.Tokens[:len(g.Tokens)], g.Tokens) {
			t.Errorf("%q:\n got %v\nwant %v", g.Prompt, got.Tokens, g.Tokens)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	calibDir := t.TempDir()
	badCalib := filepath.Join(calibDir, "bad.jsonl")
	if err := os.WriteFile(badCalib, []byte("{\"text\":\"fine\"}\n{\"prompt\":\"what\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"quantize", stories}, 2, "IN.gguf OUT.gguf"},
		{[]string{"quantize", stories, out, "--type", "q4_0"}, 2, "--type"},
		{[]string{"quantize", "/nonexistent/in.gguf", out}, 1, "/nonexistent/in.gguf"},
		{[]string{"quantize", stories, out, "--keep", "["}, 1, "--keep"},
		{[]string{"quantize", stories, out, "--calib", badCalib}, 1, "bad.jsonl:2"},
		{[]string{"quantize", stories, out, "--calib", filepath.Join(calibDir, "missing.jsonl")}, 1, "missing.jsonl"},
		{[]string{"quantize", stories, out, "--calib-tokens", "0"}, 2, "--calib-tokens"},
	} {
		_, errOut, code := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed runs left %d files", len(ents))
	}
}
