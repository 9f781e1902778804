package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gpu"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// requireGPU is EDGELLMD_REQUIRE_GPU=1 (CI sets it): a skip for want of a
// Vulkan device fails instead.
func requireGPU() bool { return os.Getenv("EDGELLMD_REQUIRE_GPU") == "1" }

// TestDeviceSelectors: each selector lands where it says or fails naming
// what is missing, and a GPU asked for by name never falls back to the CPU.
func TestDeviceSelectors(t *testing.T) {
	infos, lerr := gpu.Devices()
	load := func(sel string) (*Engine, error) {
		e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, Device: sel, Log: zerolog.Nop()})
		if err == nil {
			t.Cleanup(func() { e.Close() })
		}
		return e, err
	}
	for _, sel := range []string{"", "cpu"} {
		e, err := load(sel)
		if err != nil {
			t.Fatalf("device %q: %v", sel, err)
		}
		if d := e.Device(); d.Engine != EngineCPU || d.Name == "" || d.Note != "" || d.MemoryUsedBytes != 0 {
			t.Errorf("device %q: %+v, want the CPU", sel, d)
		}
	}
	for _, c := range []struct{ sel, want string }{
		{"vulkan", "want auto, cpu, gpu or gpu:N"},
		{"gpu:-1", "want auto, cpu, gpu or gpu:N"},
		{"gpu:99", "does not exist"},
	} {
		_, err := load(c.sel)
		if lerr != nil && c.sel == "gpu:99" {
			c.want = "libvulkan1" // no loader: the error says what to install
		}
		if !IsDeviceError(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), stories) {
			t.Errorf("device %q: error %v, want a DeviceError naming the file and %q", c.sel, err, c.want)
		}
	}

	anyGPU := false
	for _, in := range infos {
		anyGPU = anyGPU || in.Real()
	}
	e, err := load("auto")
	if err != nil {
		t.Fatalf("auto: %v", err)
	}
	switch d := e.Device(); {
	case lerr != nil:
		if d.Engine != EngineCPU || !strings.Contains(d.Note, "no GPU") {
			t.Errorf("auto without a Vulkan loader: %+v", d)
		}
	case !anyGPU:
		// lavapipe (Vulkan on the CPU) is never picked by auto.
		if d.Engine != EngineCPU || d.Selector != "auto" || !strings.Contains(d.Note, "auto never picks Vulkan on the CPU") {
			t.Errorf("auto with only %v: %+v, want the CPU with a note saying why", infos, d)
		}
		if _, err := load("gpu"); !IsDeviceError(err) || !strings.Contains(err.Error(), "no GPU") {
			t.Errorf("gpu with no real GPU: %v, want a DeviceError", err)
		}
	default:
		t.Logf("auto on a machine with a GPU: %+v", d)
	}

	if lerr != nil || len(infos) == 0 {
		if requireGPU() {
			t.Fatalf("EDGELLMD_REQUIRE_GPU=1 and no Vulkan device: %v", lerr)
		}
		t.Skipf("gpu:0: no Vulkan device: %v", lerr)
	}
	e, err = load("gpu:0")
	if err != nil {
		t.Fatalf("gpu:0 (%s): %v", infos[0], err)
	}
	d := e.Device()
	if d.Engine != EngineVulkan || d.Name != infos[0].Name || d.Driver == "" || d.MemoryTotalBytes <= 0 || d.MemoryUsedBytes <= 0 {
		t.Errorf("gpu:0: %+v, want %s with its driver and memory in use", d, infos[0])
	}
	res := greedyRun(t, e, BenchPrompt(16), nil, 8)
	if len(res.Tokens) != 8 {
		t.Errorf("gpu:0 generated %v", res.Tokens)
	}
}

func TestEngineFingerprint(t *testing.T) {
	cpu := DeviceInfo{Engine: EngineCPU, Name: "AMD EPYC"}
	lvp := DeviceInfo{Engine: EngineVulkan, Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Driver: "llvmpipe Mesa 22.3.6"}
	nv := DeviceInfo{Engine: EngineVulkan, Name: "NVIDIA Thor", Driver: "NVIDIA 580.00"}
	nvNewer := nv
	nvNewer.Driver = "NVIDIA 581.10"
	fp := func(d DeviceInfo) string {
		s, err := Fingerprint(stories, tensor.F16, tensor.NVFP4ActQ8, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other := DeviceInfo{Engine: EngineCPU, Name: "Cortex-A78AE"}
	if fp(cpu) != fp(other) || fp(cpu) != fp(DeviceInfo{}) || !strings.HasSuffix(fp(cpu), " engine=cpu") {
		t.Errorf("CPU fingerprints differ by CPU name, or lack the engine: %q, %q", fp(cpu), fp(other))
	}
	seen := map[string]string{}
	for name, d := range map[string]DeviceInfo{"cpu": cpu, "lavapipe": lvp, "nvidia": nv, "nvidia, newer driver": nvNewer} {
		f := fp(d)
		if prev, dup := seen[f]; dup {
			t.Errorf("%s and %s share the fingerprint %q", prev, name, f)
		}
		seen[f] = name
	}
}

// TestCacheRefusedAcrossEngines: a prefix cache persisted by a CPU run is
// restored by the next CPU run and refused by a GPU run, and the reverse;
// a GPU run's is restored by the next GPU run.
func TestCacheRefusedAcrossEngines(t *testing.T) {
	path, dir := qwen35Tiny(t), t.TempDir()
	open := func(sel string) (*Engine, error) {
		e, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, CacheMaxBytes: 1 << 30,
			CacheDir: dir, CacheMaxDiskBytes: 1 << 30, Device: sel, Log: zerolog.Nop()})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.cache.WaitRestored(ctx); err != nil {
			e.Close()
			t.Fatal(err)
		}
		return e, nil
	}
	rng := rand.New(rand.NewPCG(7, 8))
	cpuPrompt := randPrompt(rng, 120, 250)
	gpuPrompt := randPrompt(rng, 130, 250)
	// turn publishes the prompt's first 100 tokens and reports how many
	// were restored from the cache.
	turn := func(e *Engine, prompt []int32) int { return greedyRun(t, e, prompt, []int{100}, 2).CachedTokens }

	e, err := open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if n := turn(e, cpuPrompt); n != 0 {
		t.Fatalf("empty cache restored %d tokens", n)
	}
	e.Close()
	e, err = open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := e.CacheStats(); st.RestoredEntries == 0 {
		t.Fatalf("the CPU run's cache was not restored by the next CPU run: %+v", st)
	}
	if n := turn(e, cpuPrompt); n != 100 {
		t.Fatalf("second CPU run restored %d tokens, want 100", n)
	}
	e.Close()

	if infos, err := gpu.Devices(); err != nil || len(infos) == 0 {
		if requireGPU() {
			t.Fatalf("EDGELLMD_REQUIRE_GPU=1 and no Vulkan device: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	g, err := open("gpu:0")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := g.CacheStats(); st.RestoredEntries != 0 || st.SkippedSegments == 0 {
		t.Errorf("the GPU run took the CPU run's cache: %+v", st)
	}
	if n := turn(g, cpuPrompt); n != 0 {
		t.Errorf("the GPU run restored %d tokens the CPU run computed", n)
	}
	turn(g, gpuPrompt)
	g.Close()
	// The next GPU run on the same device and driver takes its own.
	g, err = open("gpu:0")
	if err != nil {
		t.Fatal(err)
	}
	if n := turn(g, gpuPrompt); n != 100 {
		t.Errorf("second GPU run restored %d tokens of the first one's, want 100", n)
	}
	g.Close()
	e, err = open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := turn(e, gpuPrompt); n != 0 {
		t.Errorf("the CPU run restored %d tokens the GPU run computed", n)
	}
	if n := turn(e, cpuPrompt); n != 100 {
		t.Errorf("the CPU run lost its own cache to the GPU run's: %d tokens restored, want 100", n)
	}
}

// TestMeasureDeviceCopy times a copy between two device buffers on the
// test device (lavapipe in CI: host memory bandwidth, roughly).
func TestMeasureDeviceCopy(t *testing.T) {
	if _, err := (&Engine{}).MeasureDeviceCopy(1<<20, 1); !errors.Is(err, ErrNoDevice) {
		t.Errorf("on the CPU: %v, want ErrNoDevice", err)
	}
	sel := os.Getenv("EDGELLMD_TEST_DEVICE")
	if sel == "" {
		sel = "gpu:0"
	}
	d, err := gpu.Open(sel)
	if err != nil {
		if requireGPU() {
			t.Fatalf("EDGELLMD_REQUIRE_GPU=1: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	defer d.Close()
	e := &Engine{placed: placed{dev: d}}
	gbs, err := e.MeasureDeviceCopy(64<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if gbs <= 0 {
		t.Fatalf("copy bandwidth %v GB/s", gbs)
	}
	if used := d.MemoryUsed(); used != 0 {
		t.Errorf("%d bytes of device memory still held after the measurement", used)
	}
	t.Logf("%s: %.1f GB/s (read + write)", d.Info().Name, gbs)
}

// TestGenerateOnGPU: the engine on the GPU (lavapipe in CI) gives the CPU
// engine's greedy tokens, through the GPU's greedy steps (the token picked
// on the device, F32 KV: the engines agree to float32 noise).
func TestGenerateOnGPU(t *testing.T) {
	if _, err := gpu.Devices(); err != nil && !requireGPU() {
		t.Skipf("no Vulkan loader: %v", err)
	}
	prompt := []int32{1, 403, 276, 379, 286, 262, 415}
	var outs [2][]int32
	for i, sel := range []string{"cpu", "gpu:0"} {
		e, err := Load(stories, Options{Threads: 1, KVType: tensor.F32, Device: sel, Log: zerolog.Nop()})
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		outs[i] = greedyRun(t, e, prompt, nil, 48).Tokens
		e.Close()
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Errorf("greedy on the GPU %v, on the CPU %v", outs[1], outs[0])
	}
}

// TestConcurrentOnGPU: several requests at once on the GPU (lavapipe in
// CI) share its forward passes (engine/gpu's ForwardMultiGreedy) and each
// gives exactly the tokens it gives alone there, the greedy ones through
// the tokens picked on the device and one with log-probabilities through
// its logits; one cancelled mid-way leaves the others unchanged.
func TestConcurrentOnGPU(t *testing.T) {
	if _, err := gpu.Devices(); err != nil && !requireGPU() {
		t.Skipf("no Vulkan loader: %v", err)
	}
	for _, draft := range []speculative.Config{{}, {Mode: "tree", Steps: 4, TopK: 2, VerifyNodes: 8, Drafters: []string{"suffix"}}} {
		t.Run(draft.String(), func(t *testing.T) { concurrentOnGPU(t, draft) })
	}
}

func concurrentOnGPU(t *testing.T, draft speculative.Config) {
	e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, ContextLen: 256, MaxSequences: 4, PrefillChunk: 16, Device: "gpu:0", Draft: draft, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.MaxSequences() != 4 || e.Device().Engine == EngineCPU {
		t.Fatalf("max sequences %d on %+v, want 4 on the GPU", e.MaxSequences(), e.Device())
	}
	alone, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, ContextLen: 256, MaxSequences: 1, Device: "gpu:0", Draft: draft, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	V := e.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(21, 22))
	reqs := make([]Request, 5)
	for i := range reqs {
		reqs[i] = Request{Prompt: randPrompt(rng, 5+rng.IntN(40), V), MaxTokens: 12 + rng.IntN(20), IgnoreEOS: true, Logprobs: i == 1}
	}
	concurrentEqualAlone(t, e, alone, reqs, draft)
	st := e.BatchStats()
	shared := int64(0)
	for _, c := range st.BySize[1:] {
		shared += c
	}
	if shared == 0 {
		t.Fatalf("no pass on the GPU served several sequences: %+v", st)
	}
	t.Logf("%d passes, by size %v", st.Passes, st.BySize[:5])
}
