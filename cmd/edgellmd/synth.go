package main

import (
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/synth"
)

func cmdSynth(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("synth")
	arch := fs.String("arch", "qwen35", "architecture (qwen35)")
	size := fs.String("size", "tiny", "tiny (tests, a few MB), small (Qwen3 tokenizer replay tests), kquant (rows of 256 values: llama-quantize's K-quant tests), bench (hundreds of MB, for speed work) or 27b (the 27B model's layer shapes and vocabulary, 16 layers: GB)")
	layers := fs.Int("layers", 0, "decoder layers (0 = the size's own; every fourth is full attention)")
	typ := fs.String("type", "", "weight matrix type: F32, F16, BF16 or Q8_0 (default F32 for tiny/small, F16 for bench, Q8_0 for 27b)")
	tokJSON := fs.String("tokenizer", "", "Hugging Face tokenizer.json to embed (tokenizer_config.json beside it gives the chat template); default a small built-in byte-level vocabulary")
	mtp := fs.Bool("mtp", false, "add a multi-token-prediction (MTP) head")
	seed := fs.Uint64("seed", 1, "random seed: the same options and seed write the same bytes")
	out := fs.String("o", "", "output GGUF file")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *out == "" {
		return fmt.Errorf("%w: -o OUT.gguf is required", errUsage)
	}
	opt := synth.Options{Arch: *arch, Size: *size, Type: *typ, TokenizerJSON: *tokJSON, MTP: *mtp, Seed: *seed, Layers: *layers}
	if err := synth.Write(*out, opt); err != nil {
		return err
	}
	log.Info().Str("out", *out).Str("arch", *arch).Str("size", *size).Msg("synthetic model written")
	fmt.Fprintln(stdout, *out)
	return nil
}
