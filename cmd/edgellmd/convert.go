package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/convert"
)

func cmdConvert(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("convert")
	outType := fs.String("outtype", "", "type of the weight matrices: f32, f16 or bf16 (default: as in the checkpoint; NVFP4 stays NVFP4)")
	noMTP := fs.Bool("no-mtp", false, "leave out the multi-token-prediction (MTP) block of a Qwen3.5 checkpoint")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: want HF_DIR OUT.gguf, got %d arguments", errUsage, len(pos))
	}
	switch strings.ToLower(*outType) {
	case "", "f32", "f16", "bf16":
	default:
		return fmt.Errorf("%w: --outtype %q is not one of f32, f16, bf16", errUsage, *outType)
	}
	opt := convert.Options{OutType: *outType, NoMTP: *noMTP}
	opt.Progress = tensorProgress()
	rep, err := convert.ConvertFile(pos[0], pos[1], opt)
	if err != nil {
		return err
	}
	log.Info().Str("in", pos[0]).Str("out", pos[1]).Str("arch", rep.Arch).Int("tensors", rep.Tensors).
		Int("nvfp4", len(rep.NVFP4)).Int("mtp_layers", rep.MTPLayers).Msg("checkpoint converted")
	fmt.Fprintf(stdout, "%s: %s (%s), %d tensors", pos[1], rep.Arch, rep.HFArch, rep.Tensors)
	if len(rep.NVFP4) > 0 {
		fmt.Fprintf(stdout, ", %d NVFP4 weights repacked", len(rep.NVFP4))
	}
	if rep.MTPLayers > 0 {
		fmt.Fprintf(stdout, ", %d MTP block", rep.MTPLayers)
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(stdout, ", %d vision/auxiliary tensors skipped", rep.Skipped)
	}
	fmt.Fprintf(stdout, "; %d bytes copied, %d converted\n", rep.Copied, rep.Converted)
	if len(rep.Dropped) > 0 {
		fmt.Fprintf(stdout, "  dropped %d tensors without a GGUF counterpart (e.g. %s)\n", len(rep.Dropped), rep.Dropped[0])
	}
	return nil
}
