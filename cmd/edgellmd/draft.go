package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// cmdDraft is `edgellmd draft fit`: give a model without an MTP head (a
// llama such as stories260K) one, fitted by ridge regression to the
// model's own generations (engine/speculative.FitMTP), then measure how
// many of its drafts the model accepts.
func cmdDraft(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) > 0 && isHelp(args[0]) {
		return groupHelp(stdout, "draft")
	}
	if len(args) == 0 || args[0] != "fit" {
		return fmt.Errorf("%w: draft needs a command: fit", errUsage)
	}
	fs := newFlagSet("draft fit")
	in := fs.String("m", "", "model file (GGUF, llama architecture, no MTP head)")
	out := fs.String("o", "", "output model file: the input plus the fitted MTP head")
	tokens := fs.Int("tokens", 16384, "tokens the model generates to fit the head on")
	seqLen := fs.Int("seq-len", 256, "tokens per generated sequence")
	ridge := fs.Float64("ridge", 1e-3, "ridge strength, relative to the mean diagonal of the normal equations")
	seed := fs.Uint64("seed", 1, "seed of the generations")
	threads := fs.Int("threads", 0, "worker threads (0: all cores)")
	evalTokens := fs.Int("eval-tokens", 64, "greedy tokens per prompt when measuring the fitted head (0: skip)")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("%w: draft fit needs -m MODEL.gguf and -o OUT.gguf", errUsage)
	}
	f, err := gguf.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	pool := tensor.NewPool(*threads)
	defer pool.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	opt := speculative.FitOptions{Tokens: *tokens, SeqLen: *seqLen, Ridge: *ridge, Seed: *seed}
	if isTTY(os.Stderr) {
		opt.Progress = func(done, total int) {
			const width = 40
			n := min(done, total) * width / max(total, 1)
			fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d tokens", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
			if done >= total {
				fmt.Fprintln(os.Stderr)
			}
		}
	}
	w, rep, err := speculative.FitMTP(f, m, opt)
	if err != nil {
		return err
	}
	if err := w.WriteFile(*out); err != nil {
		return fmt.Errorf("draft fit: %w", err)
	}
	log.Info().Str("in", *in).Str("out", *out).Int("tokens", rep.Tokens).Int("pairs", rep.Pairs).
		Float64("residual", rep.Residual).Float64("variance", rep.Variance).Msg("MTP head fitted")
	fmt.Fprintf(stdout, "%s: MTP head fitted on %d generated tokens; residual %.4g of variance %.4g (%.1f%% explained)\n",
		*out, rep.Tokens, rep.Residual, rep.Variance, 100*(1-rep.Residual/rep.Variance))
	if *evalTokens <= 0 {
		return nil
	}
	return measureHead(*out, pool, *evalTokens, *seed, stdout)
}

// measureHead loads the fitted file and reports the drafts' acceptance on
// greedy continuations of short random prompts (BOS and one token).
func measureHead(path string, pool *tensor.Pool, n int, seed uint64, stdout io.Writer) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	bos := int32(1)
	if v, ok := f.GetUint("tokenizer.ggml.bos_token_id"); ok {
		bos = int32(v)
	}
	rng := rand.New(rand.NewPCG(seed, 0xd1af))
	var prompts [][]int32
	for range 8 {
		prompts = append(prompts, []int32{bos, int32(rng.IntN(m.Hyper().Vocab))})
	}
	for _, c := range []struct {
		name string
		cfg  speculative.Config
	}{
		{"linear 3", speculative.Config{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{"mtp"}}},
		{"tree 8/2/16", speculative.Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp"}}},
	} {
		s, toks, err := speculative.Measure(m, c.cfg, prompts, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %-11s %d of %d drafted tokens accepted (%.1f%%), %.3f target steps per token\n",
			c.name, s.Accepted, s.Drafted, 100*float64(s.Accepted)/float64(max(s.Drafted, 1)), float64(s.TargetSteps)/float64(max(toks, 1)))
	}
	return nil
}
