package update

import (
	"context"
	"fmt"
	"slices"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// CheckOptions are the engine settings of the health check. Pack and the
// check must decode the same way: the KV cache type changes the numbers,
// so both use F16 (llama.cpp's default and the daemon's) unless told.
func CheckOptions(threads int) engine.Options {
	return engine.Options{Threads: threads, KVType: tensor.F16}
}

// EngineCheck is a CheckFunc that loads the model with engine.Load(opt),
// runs the bundle's health check on it and closes it.
func EngineCheck(opt engine.Options) CheckFunc {
	return func(ctx context.Context, modelPath string, check HealthCheck) error {
		e, err := engine.Load(modelPath, opt)
		if err != nil {
			return err
		}
		defer e.Close()
		return CheckEngine(ctx, e, check)
	}
}

// CheckEngine decodes check.Prompt greedily on a loaded engine and compares
// the tokens with check.Tokens. The daemon may call it on the engine it is
// about to serve with, to load the model once.
func CheckEngine(ctx context.Context, e *engine.Engine, check HealthCheck) error {
	got, err := GreedyTokens(ctx, e, check.Prompt, len(check.Tokens))
	if err != nil {
		return err
	}
	if i := firstDiff(got, check.Tokens); i >= 0 {
		return fmt.Errorf("greedy decoding of %q differs from the bundle's expected tokens at position %d: got %v, want %v", check.Prompt, i, got, check.Tokens)
	}
	return nil
}

// GreedyTokens decodes n tokens of prompt greedily, past end-of-generation
// tokens, with BOS added where the model asks for it and special tokens
// read as plain text. Pack records its output as the expected tokens.
func GreedyTokens(ctx context.Context, e *engine.Engine, prompt string, n int) ([]int32, error) {
	if n < 1 {
		return nil, fmt.Errorf("health check: want at least one token, got %d", n)
	}
	ids := e.Tokenizer().Encode(prompt, true, false)
	res, err := e.Generate(ctx, engine.Request{Prompt: ids, MaxTokens: n, Sample: sample.Params{}, IgnoreEOS: true},
		func(engine.Token) error { return nil })
	if err != nil {
		return nil, fmt.Errorf("health check: %w", err)
	}
	return res.Tokens, nil
}

func firstDiff(a, b []int32) int {
	if slices.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
