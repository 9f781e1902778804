package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// engineFlags are the flags every command that loads a model shares.
type engineFlags struct {
	model   string
	threads int
	kv      string
	act     string
	ctx     int
	draft   speculative.Config
	device  string
	matmul  string
}

func (f *engineFlags) register(fs *flag.FlagSet, defaultThreads int) {
	fs.StringVar(&f.model, "m", "", "model file (GGUF)")
	fs.IntVar(&f.threads, "threads", defaultThreads, "kernel worker threads (0 = all cores)")
	fs.StringVar(&f.kv, "kv", "f16", "KV cache type: f16 (as llama.cpp), f32 or fp8 (E4M3, per-layer scales from the file)")
	fs.StringVar(&f.act, "activations", "q8", "activations against NVFP4 weights: q8 (W4A8, as llama.cpp), f32 (W4A16) or nvfp4 (W4A4)")
	fs.IntVar(&f.ctx, "ctx", 0, "context length in tokens (0 = the model's)")
	fs.StringVar(&f.device, "device", "auto", deviceUsage)
	fs.StringVar(&f.matmul, "gpu-matmul", "auto", "how a GPU multiplies prefill chunks and verify trees: auto (cooperative matrices, the tensor cores, where the device has them), scalar or coopmat (an error without them)")
	f.draft = speculative.DefaultConfig()
	f.draft.RegisterFlags(fs)
}

func (f *engineFlags) load(log zerolog.Logger) (*engine.Engine, error) {
	if f.model == "" {
		return nil, fmt.Errorf("%w: -m MODEL.gguf is required", errUsage)
	}
	kv, err := tensor.ParseKVType(f.kv)
	if err != nil {
		return nil, fmt.Errorf("%w: --kv: %v", errUsage, err)
	}
	act, err := tensor.ParseActivations(f.act)
	if err != nil {
		return nil, fmt.Errorf("%w: --activations: %v", errUsage, err)
	}
	if err := f.draft.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, speculative.FlagError(err))
	}
	if err := engine.ParseDevice(f.device); err != nil {
		return nil, fmt.Errorf("%w: --device: %v", errUsage, err)
	}
	if err := engine.ParseGPUMatMul(f.matmul); err != nil {
		return nil, fmt.Errorf("%w: --gpu-matmul: %v", errUsage, err)
	}
	return engine.Load(f.model, engine.Options{Threads: f.threads, KVType: kv, Activations: act, ContextLen: f.ctx, Draft: f.draft,
		Device: f.device, GPUMatMul: f.matmul, Log: log})
}

// deviceUsage is the --device flag's help, the same for every command.
const deviceUsage = "where the model runs: auto (a real GPU when the Vulkan loader sees one and the model runs on it, else the CPU; never lavapipe), cpu, gpu (the first real GPU) or gpu:N (see edgellmd devices)"

// runOutput is the one line `run --json` prints.
type runOutput struct {
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
	Text         string  `json:"text"`
	// TargetSteps are the forward passes while decoding; with drafting,
	// fewer than the output tokens.
	TargetSteps    int `json:"target_steps"`
	DraftTokens    int `json:"draft_tokens"`
	AcceptedTokens int `json:"accepted_tokens"`
	// PrefillMS is the prompt's prefill; DecodeMS from the first output
	// token to the last.
	PrefillMS float64 `json:"prefill_ms"`
	DecodeMS  float64 `json:"decode_ms"`
}

func cmdRun(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("run")
	var ef engineFlags
	ef.register(fs, 0)
	prompt := fs.String("p", "", "prompt text")
	n := fs.Int("n", 64, "tokens to generate at most")
	temp := fs.Float64("temp", 0, "temperature (0 = greedy)")
	topK := fs.Int("top-k", 0, "top-k (0 = off)")
	topP := fs.Float64("top-p", 1, "top-p (1 = off)")
	seed := fs.Uint64("seed", 42, "sampling seed")
	asJSON := fs.Bool("json", false, `print one JSON line {"prompt_tokens","tokens","text","target_steps","draft_tokens","accepted_tokens","prefill_ms","decode_ms"}`)
	ignoreEOS := fs.Bool("ignore-eos", false, "generate exactly -n tokens, past end-of-generation tokens")
	special := fs.Bool("special", true, "recognise special tokens such as <|im_start|> in the prompt text (--special=false reads them as plain text, as llama.cpp's tokenize(text, false) does)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *n < 1 {
		return fmt.Errorf("%w: -n must be at least 1, got %d", errUsage, *n)
	}
	params := sample.Params{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), Seed: *seed}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	e, err := ef.load(log)
	if err != nil {
		return err
	}
	defer e.Close()
	tok := e.Tokenizer()
	ids := tok.Encode(*prompt, true, *special)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	emit := func(engine.Token) error { return nil }
	if !*asJSON {
		fmt.Fprint(stdout, *prompt)
		emit = func(t engine.Token) error { _, err := stdout.Write(t.Piece); return err }
	}
	res, err := e.Generate(ctx, engine.Request{Prompt: ids, MaxTokens: *n, Sample: params, IgnoreEOS: *ignoreEOS}, emit)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintln(stdout)
		return nil
	}
	out := runOutput{PromptTokens: res.Prompt, Tokens: res.Tokens, Text: tok.Decode(res.Tokens),
		TargetSteps: int(res.Spec.TargetSteps), DraftTokens: int(res.Spec.Drafted), AcceptedTokens: int(res.Spec.Accepted),
		PrefillMS: float64(res.PrefillTime.Microseconds()) / 1000, DecodeMS: float64(res.DecodeTime.Microseconds()) / 1000}
	if out.Tokens == nil {
		out.Tokens = []int32{}
	}
	return json.NewEncoder(stdout).Encode(out)
}
