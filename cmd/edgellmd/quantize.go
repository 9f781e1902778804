package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/calib"
	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// multiFlag collects a repeated string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func cmdQuantize(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("quantize")
	typ := fs.String("type", "nvfp4", "target type of the linear weights: nvfp4. IN may hold F32, F16, BF16 or Q8_0 weights, or be a file as people download them (Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, IQ4_XS, Q4_0...), whose blocks are decoded as llama.cpp decodes them: quantizing from a K-quant adds its error to NVFP4's (from Q4_K_M, 1.03x the relative RMS error of quantizing from F16 on the synthetic kquant model; docs/performance/kquants.md), so start from F16/BF16 when you have it")
	var keep multiFlag
	fs.Var(&keep, "keep", "keep tensors whose name matches this pattern (e.g. 'blk.*.ffn_down.weight', 'output.weight') in their type; repeatable")
	calibSrc := fs.String("calib", "own", "calibration text for the activation input scales and FP8 KV scales: own (text the model samples), none, or a JSONL file of chat requests ({\"messages\": [...], \"tools\": [...]}, e.g. bfcl_calib.jsonl) or {\"text\": ...} lines")
	calibTokens := fs.Int("calib-tokens", 1024, "tokens of the model's own text to calibrate on (--calib own)")
	calibLimit := fs.Int("calib-limit", 64, "JSONL lines to calibrate on at most")
	threads := fs.Int("threads", 0, "threads for calibration (0 = all cores)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: want IN.gguf OUT.gguf, got %d arguments", errUsage, len(pos))
	}
	if !strings.EqualFold(*typ, "nvfp4") {
		return fmt.Errorf("%w: --type %q is not supported (want nvfp4)", errUsage, *typ)
	}
	if *calibTokens < 1 || *calibLimit < 1 {
		return fmt.Errorf("%w: --calib-tokens and --calib-limit must be at least 1", errUsage)
	}
	prompts, err := calibPrompts(pos[0], *calibSrc, *calibTokens, *calibLimit, log)
	if err != nil {
		return err
	}
	opt := quantize.Options{Type: tensor.NVFP4, Keep: keep}
	if len(prompts) > 0 {
		f, err := gguf.Open(pos[0])
		if err != nil {
			return err
		}
		opt.Calib, err = calib.Run(f, prompts, *threads)
		f.Close()
		if err != nil {
			return err
		}
	}
	opt.Progress = tensorProgress()
	rep, err := quantize.QuantizeFile(pos[0], pos[1], opt)
	if err != nil {
		return err
	}
	log.Info().Str("in", pos[0]).Str("out", pos[1]).Int("quantized", len(rep.Quantized)).Int("kept", len(rep.Kept)).Msg("model quantized")
	fmt.Fprintf(stdout, "%s: %d weight matrices to NVFP4, %d kept", pos[1], len(rep.Quantized), len(rep.Kept))
	if rep.Untied {
		fmt.Fprint(stdout, ", LM head untied from the embedding")
	}
	fmt.Fprintf(stdout, "; tensor data %d -> %d bytes\n", rep.InBytes, rep.OutBytes)
	if rep.CalibTokens > 0 {
		fmt.Fprintf(stdout, "calibrated on %d tokens (%s): %d input scales, FP8 KV scales for %d layers\n",
			rep.CalibTokens, *calibSrc, rep.InputScales, rep.KVScales)
	}
	for _, k := range rep.Kept {
		fmt.Fprintf(stdout, "  kept %s\n", k)
	}
	return nil
}

// tensorProgress draws a per-tensor progress bar on stderr when it is a
// terminal; nil otherwise.
func tensorProgress() func(done, total int) {
	if !isTTY(os.Stderr) {
		return nil
	}
	return func(done, total int) {
		const width = 40
		n := done * width / max(total, 1)
		fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d tensors", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
		if done == total {
			fmt.Fprintln(os.Stderr)
		}
	}
}

// isTTY reports whether f is a terminal (a character device).
func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
