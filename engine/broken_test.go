package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

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

// TestGPURefusesKQuants: the GPU engine has no shaders for the K-quants
// yet, so a Q4_K_M file asked to run there is refused at load with the
// tensor, its type and what the GPU runs (before any device is opened:
// this holds on a machine without one), never run on the CPU instead.
func TestGPURefusesKQuants(t *testing.T) {
	_, err := Load("../testdata/kquant/synth-kquant-Q4_K_M.gguf", Options{Threads: 1, KVType: tensor.F16, Device: "gpu:0", Log: zerolog.Nop()})
	if err == nil {
		t.Fatal("Load on gpu:0 accepted a Q4_K_M file")
	}
	for _, want := range []string{`tensor "output.weight" has type Q6_K`, "the GPU engine cannot run", "and 32 more", "F32, F16, BF16, Q8_0, NVFP4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !IsDeviceError(err) {
		t.Errorf("error %T is not a DeviceError", err)
	}
	// The CPU engine runs it.
	e, err := Load("../testdata/kquant/synth-kquant-Q4_K_M.gguf", Options{Threads: 1, KVType: tensor.F16, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}
