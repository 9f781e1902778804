package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Generate with drafting on gives exactly the tokens it gives with drafting
// off, through the whole request path: prefix cache restore, publish
// points, EOS and max-token cut-offs in the middle of a verify step, and
// draft parameters changed between requests (SetDraft). The drafts are
// accepted often (the prompts repeat themselves), so fewer forward passes
// than tokens are needed.
func TestGenerateSpeculativeEqualsPlain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen35-tiny-mtp.gguf")
	if err := synth.Write(path, synth.Options{Size: "tiny", Seed: 5, MTP: true}); err != nil {
		t.Fatal(err)
	}
	load := func() *Engine {
		e, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 512, CacheMaxBytes: 64 << 20, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	plain, spec := load(), load()
	configs := []speculative.Config{
		{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{"suffix"}},
		{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}},
		{Mode: "tree", Steps: 6, TopK: 8, VerifyNodes: 32, Drafters: []string{"mtp"}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	vocab := plain.model.Hyper().Vocab
	steps, tokens := 0, 0
	for i := 0; i < 9; i++ {
		// a conversation-like prompt: a random head, then a repeated phrase
		head := randPrompt(rng, 5+rng.IntN(20), vocab)
		phrase := randPrompt(rng, 4+rng.IntN(6), vocab)
		prompt := slices.Clone(head)
		for range 3 {
			prompt = append(prompt, phrase...)
		}
		cfg := configs[i%len(configs)]
		if err := spec.SetDraft(cfg); err != nil {
			t.Fatal(err)
		}
		n := 8 + rng.IntN(40)
		stopAt := -1
		if i%4 == 3 {
			stopAt = n / 2 // the client stops the generation part-way (ErrStop)
		}
		run := func(e *Engine) Result {
			var got []int32
			res, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: n, IgnoreEOS: i%2 == 0,
				Sample: sample.Params{}, PublishAt: []int{len(head)}}, func(tk Token) error {
				got = append(got, tk.ID)
				if len(got) == stopAt {
					return ErrStop
				}
				return nil
			})
			if err != nil && !errors.Is(err, ErrStop) {
				t.Fatal(err)
			}
			if !slices.Equal(got, res.Tokens[:len(got)]) {
				t.Fatalf("emitted %v, result %v", got, res.Tokens)
			}
			return res
		}
		want, got := run(plain), run(spec)
		if !slices.Equal(got.Tokens, want.Tokens) || got.FinishReason != want.FinishReason {
			t.Fatalf("prompt %d, draft %s: tokens %v (%s), plain decoding %v (%s)", i, cfg, got.Tokens, got.FinishReason, want.Tokens, want.FinishReason)
		}
		if got.Draft != cfg.String() || want.Draft != "off" {
			t.Errorf("Result.Draft = %q and %q, want %q and off", got.Draft, want.Draft, cfg)
		}
		if len(got.Tokens) > 1 && (got.DecodeTime <= 0 || want.DecodeTime <= 0 || got.PrefillTime <= 0) {
			t.Errorf("prefill %v, decode %v and %v: the durations were not recorded", got.PrefillTime, got.DecodeTime, want.DecodeTime)
		}
		if got.Spec.TargetSteps > int64(len(got.Tokens)) {
			t.Errorf("%d forward passes for %d tokens", got.Spec.TargetSteps, len(got.Tokens))
		}
		steps += int(got.Spec.TargetSteps)
		tokens += len(got.Tokens)
		if got.Spec.Accepted > got.Spec.Drafted {
			t.Errorf("accepted %d of %d drafts", got.Spec.Accepted, got.Spec.Drafted)
		}
	}
	t.Logf("%d tokens in %d target forward passes", tokens, steps)

	// The same request again: the suffix drafter remembers the output, so
	// nearly every draft is accepted.
	if err := spec.SetDraft(configs[1]); err != nil {
		t.Fatal(err)
	}
	prompt := randPrompt(rng, 30, vocab)
	want := greedyRun(t, plain, prompt, nil, 48)
	greedyRun(t, spec, prompt, nil, 48)
	got := greedyRun(t, spec, prompt, nil, 48)
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Fatalf("repeated request: %v, plain decoding %v", got.Tokens, want.Tokens)
	}
	if got.Spec.TargetSteps > int64(len(got.Tokens)/3) {
		t.Errorf("repeated request: %d forward passes for %d tokens (%d of %d drafts accepted)", got.Spec.TargetSteps, len(got.Tokens), got.Spec.Accepted, got.Spec.Drafted)
	}
}
