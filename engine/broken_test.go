package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/gpu"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// TestPassPanicBreaksEngine injects a panic into the fourth piece of model
// work of a generation (new state, prompt chunk, publish, prompt chunk): the request
// gets an error naming the panic, the engine is broken from then on, every
// later request fails at once, and the prefix cache keeps only what was
// published before the failed pass.
func TestPassPanicBreaksEngine(t *testing.T) {
	var calls atomic.Int32
	hook := func() {
		if calls.Add(1) == 4 {
			panic("injected fault")
		}
	}
	e, err := Load(stories, Options{Threads: 2, KVType: tensor.F16, CacheMaxBytes: 64 << 20, PassHook: hook, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := make([]int32, 100)
	for i := range prompt {
		prompt[i] = int32(10 + i)
	}
	req := Request{Prompt: prompt, MaxTokens: 4, IgnoreEOS: true, Sample: sample.Params{Temperature: 0}, PublishAt: []int{50, 100}}
	_, err = e.Generate(context.Background(), req, func(Token) error { return nil })
	if err == nil || !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), "injected fault") {
		t.Fatalf("Generate: err = %v, want ErrBroken naming the injected fault", err)
	}
	if b := e.Broken(); b == nil || !strings.Contains(b.Error(), "injected fault") {
		t.Fatalf("Broken() = %v, want the injected fault", b)
	}
	if st, _ := e.CacheStats(); st.Entries != 1 {
		t.Errorf("prefix cache holds %d entries, want 1 (the publish before the failed pass only)", st.Entries)
	}
	sched := NewScheduler(e, 1)
	if b := sched.LastBeat(); b.IsZero() || time.Since(b) < 0 {
		t.Errorf("LastBeat %v, want the time of the panic", b)
	}
	before := calls.Load()
	_, err = e.Generate(context.Background(), req, func(Token) error { return nil })
	if !errors.Is(err, ErrBroken) {
		t.Fatalf("second Generate: err = %v, want ErrBroken", err)
	}
	if calls.Load() != before {
		t.Errorf("a broken engine ran %d more pieces of model work", calls.Load()-before)
	}
}

// TestGPUTypeCheck: the GPU engine runs every weight type the CPU engine
// runs (the K-quants and legacy block types since issue 35), so a Q4_K_M
// file passes its check; a matrix of a type its shaders lack is refused
// at load with the tensor, its type and what the GPU runs (before any
// device is opened: this holds on a machine without one), never run on
// the CPU instead.
func TestGPUTypeCheck(t *testing.T) {
	f, err := gguf.Open("../testdata/kquant/synth-kquant-Q4_K_M.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := model.CheckTypes(f, "the GPU engine", gpuRuns, "x"); err != nil {
		t.Errorf("the GPU's type check refuses a Q4_K_M file: %v", err)
	}
	for _, typ := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.NVFP4, tensor.Q4_0, tensor.Q4_1,
		tensor.Q5_0, tensor.Q5_1, tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_NL, tensor.IQ4_XS} {
		cpu, onGPU := tensor.CPUSupports(typ), gpuRuns(&gguf.TensorInfo{Name: "m", Type: typ, Shape: []int64{256, 4}})
		if !cpu || !onGPU {
			t.Errorf("%s matrices: the CPU runs them %v, the GPU %v; want both", typ, cpu, onGPU)
		}
	}
	bad := &gguf.File{Path: "x.gguf", Tensors: []gguf.TensorInfo{
		{Name: "blk.0.ffn_up.weight", Type: tensor.Q4_K, Shape: []int64{256, 4}},
		{Name: "blk.0.ffn_down.weight", Type: tensor.MXFP4, Shape: []int64{64, 4}},
		{Name: "blk.1.ffn_down.weight", Type: tensor.MXFP4, Shape: []int64{64, 4}},
	}}
	err = model.CheckTypes(bad, "the GPU engine", gpuRuns, gpu.WeightTypes())
	if err == nil {
		t.Fatal("the GPU's type check accepted MXFP4 matrices")
	}
	for _, want := range []string{`tensor "blk.0.ffn_down.weight" has type MXFP4`, "the GPU engine cannot run", "and 1 more", "Q4_K", "IQ4_XS", "NVFP4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
