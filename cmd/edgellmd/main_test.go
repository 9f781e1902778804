package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const stories = "../../testdata/models/stories260K.gguf"

// asMainEnv set to 1 makes the test binary edgellmd itself, its arguments
// the command line: tests run `edgellmd serve` as a child process without
// building the binary first.
const asMainEnv = "EDGELLMD_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type golden struct {
	Prompt       string  `json:"prompt"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
	Text         string  `json:"text"`
}

func readGoldens(t *testing.T, path string) []golden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no goldens", path)
	}
	return out
}

// run calls the command in-process, as the binary would.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = runMain(args, &o, &e)
	return o.String(), e.String(), code
}

// The acceptance test of the engine core: `edgellmd run --json` reproduces
// llama.cpp's greedy tokens on stories260K for all ten golden prompts.
func TestRunMatchesLlamaCppGoldens(t *testing.T) {
	for _, g := range readGoldens(t, "../../testdata/golden/stories260K-greedy64.jsonl") {
		out, errOut, code := run(t, "run", "-m", stories, "-p", g.Prompt, "-n", "64", "--temp", "0", "--json", "--threads", "1", "--special=false", "--device", "cpu")
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", g.Prompt, code, errOut)
		}
		var got runOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: output %q is not one JSON line: %v", g.Prompt, out, err)
		}
		if !slices.Equal(got.PromptTokens, g.PromptTokens) {
			t.Errorf("%q: prompt tokens\n got %v\nwant %v", g.Prompt, got.PromptTokens, g.PromptTokens)
		}
		if len(got.Tokens) < len(g.Tokens) || !slices.Equal(got.Tokens[:len(g.Tokens)], g.Tokens) {
			t.Errorf("%q: tokens\n got %v\nwant %v", g.Prompt, got.Tokens, g.Tokens)
			continue
		}
		if len(g.Tokens) == 64 && got.Text != g.Text {
			t.Errorf("%q: text\n got %q\nwant %q", g.Prompt, got.Text, g.Text)
		}
	}
}

func TestRunIgnoreEOSGivesExactlyN(t *testing.T) {
	out, errOut, code := run(t, "run", "-m", stories, "-p", "Once upon a time", "-n", "200", "--ignore-eos", "--json", "--threads", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got runOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tokens) != 200 {
		t.Fatalf("got %d tokens, want 200", len(got.Tokens))
	}
}

func TestRunSeededSamplingIsRepeatable(t *testing.T) {
	args := []string{"run", "-m", stories, "-p", "The cat", "-n", "32", "--temp", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "7", "--json"}
	// The output without its timings (prefill_ms, decode_ms).
	tokens := func(out string) string {
		var r runOutput
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		b, _ := json.Marshal([]any{r.PromptTokens, r.Tokens, r.Text})
		return string(b)
	}
	a, _, ca := run(t, args...)
	b, _, cb := run(t, args...)
	if ca != 0 || cb != 0 || tokens(a) != tokens(b) {
		t.Fatalf("same seed, different output:\n%s\n%s", a, b)
	}
	c, _, cc := run(t, append(args[:len(args)-3:len(args)-3], "--seed", "8", "--json")...)
	if cc != 0 {
		t.Fatalf("seed 8: exit %d", cc)
	}
	if tokens(c) == tokens(a) {
		t.Logf("seeds 7 and 8 gave the same text (possible but unlikely): %s", a)
	}
}

func TestRunErrorsNameTheProblem(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "-p", "x"}, 2, "-m"},
		{[]string{"run", "-m", "/nonexistent/model.gguf", "-p", "x"}, 1, "/nonexistent/model.gguf"},
		{[]string{"run", "-m", stories, "-p", "x", "--temp", "-1"}, 2, "temperature"},
		{[]string{"run", "-m", stories, "-p", "x", "--kv", "q4"}, 2, "--kv"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"bench", "nope"}, 2, "unknown bench"},
	} {
		_, errOut, code := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

func TestBenchDecodeJSONLines(t *testing.T) {
	out, errOut, code := run(t, "bench", "decode", "-m", stories, "--prompt-tokens", "64", "--gen", "16", "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out)
	}
	for _, l := range lines {
		var b benchLine
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatal(err)
		}
		if b.PrefillTokS <= 0 || b.DecodeTokS <= 0 || b.PromptTokens != 64 || b.GenTokens != 16 || b.Threads != 1 {
			t.Fatalf("bad line %+v", b)
		}
		if b.DecodeStepMS <= 0 || b.PrefillPassMS <= 0 || b.PrefillPasses != 1 || b.Engine == "" || b.Device == "" {
			t.Fatalf("line without the forward pass times or the device: %+v", b)
		}
	}
}

// TestBenchDecodeOnGPU: on a GPU (lavapipe in CI) bench decode also reports
// the device memory in use and decode's share of the device's copy
// bandwidth.
func TestBenchDecodeOnGPU(t *testing.T) {
	sel := os.Getenv("EDGELLMD_TEST_DEVICE")
	if sel == "" {
		sel = "gpu:0"
	}
	out, errOut, code := run(t, "bench", "decode", "-m", stories, "--prompt-tokens", "32", "--gen", "8", "--runs", "1", "--json", "--device", sel)
	switch {
	case code != 0 && strings.Contains(errOut, "cannot be used") && os.Getenv("EDGELLMD_REQUIRE_GPU") != "1":
		t.Skipf("no Vulkan device: %s", errOut)
	case code != 0:
		t.Fatalf("--device %s: exit %d: %s", sel, code, errOut)
	}
	var b benchLine
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if b.Engine != "vulkan" || b.Driver == "" || b.DeviceMemoryUsedMiB <= 0 || b.CopyGBs <= 0 || b.DecodeOfCopy <= 0 ||
		b.DecodeGBs <= 0 || b.DecodeStepMS <= 0 {
		t.Errorf("--device %s: %+v", sel, b)
	}
}

func TestPowerPinReadsTheConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("power:\n  pin: MAXN\n  jetson_clockz: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("power:\n  pin: MAXN\n  jetson_clocks: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pc := "../../power/testdata/root/x86"
	if _, errOut, code := run(t, "power", "pin", "--root", pc, "-c", bad); code != 1 || !strings.Contains(errOut, "power.jetson_clockz") {
		t.Fatalf("bad config: exit %d, %q; want an error naming power.jetson_clockz", code, errOut)
	}
	if _, errOut, code := run(t, "power", "pin", "--root", pc, "-c", filepath.Join(dir, "absent.yaml")); code != 1 || !strings.Contains(errOut, "absent.yaml") {
		t.Fatalf("explicit missing config: exit %d, %q", code, errOut)
	}
	out, errOut, code := run(t, "power", "pin", "--root", pc, "-c", good)
	if code != 0 {
		t.Fatalf("not a Jetson: exit %d, %q (want a no-op)", code, errOut)
	}
	if !strings.Contains(strings.ToLower(out+errOut), "jetson") {
		t.Fatalf("no-op should say it is not a Jetson: %q %q", out, errOut)
	}
}
