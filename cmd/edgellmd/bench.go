package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
)

func cmdBench(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: bench needs a kind: decode, agentic or bfcl", errUsage)
	}
	if isHelp(args[0]) {
		return groupHelp(stdout, "bench")
	}
	switch args[0] {
	case "decode":
		return cmdBenchDecode(args[1:], stdout, log)
	case "agentic":
		return cmdBenchAgentic(args[1:], stdout, log)
	case "bfcl":
		return cmdBenchBFCL(args[1:], stdout, log)
	}
	return fmt.Errorf("%w: unknown bench %q (want decode, agentic or bfcl)", errUsage, args[0])
}

// benchLine is one run's JSON line, with the same keys as llama.cpp's
// reference bench (shared/tools/llamaref/bench.mjs) so the two compare line for line.
type benchLine struct {
	Model        string  `json:"model"`
	FileType     string  `json:"file_type,omitempty"` // the quantization preset, general.file_type ("Q4_K_M")
	Threads      int     `json:"threads"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// Resident memory after the run: weights that are mapped, not copied,
	// show in RssFile (shared with the page cache), not in RssAnon.
	RSSAnonMiB float64 `json:"rss_anon_mib,omitempty"`
	RSSFileMiB float64 `json:"rss_file_mib,omitempty"`
	// The weight bytes a decode step reads, and the bandwidth that draws.
	WeightBytes int64   `json:"weight_bytes_per_token"`
	DecodeGBs   float64 `json:"decode_weight_gb_s"`
	// The time of one forward pass: a decode step, and a prefill pass of up
	// to 512 tokens (prefill_passes of them).
	DecodeStepMS  float64 `json:"decode_step_ms"`
	PrefillPassMS float64 `json:"prefill_pass_ms"`
	PrefillPasses int     `json:"prefill_passes"`
	// Where it ran: engine cpu or vulkan, and the device.
	Engine string `json:"engine"`
	Device string `json:"device"`
	Driver string `json:"driver,omitempty"`
	// On a GPU: its memory in use, the bandwidth of a copy between two
	// device buffers (read + write, GPU timestamps), and the share of it
	// that decoding draws (decode_weight_gb_s / copy_gb_s).
	DeviceMemoryUsedMiB float64 `json:"device_memory_used_mib,omitempty"`
	CopyGBs             float64 `json:"copy_gb_s,omitempty"`
	DecodeOfCopy        float64 `json:"decode_of_copy,omitempty"`
	// The GPU's matrix path (scalar or coopmat, with its tiles), the share
	// of the prefill's matrix-product multiply-adds done on tensor cores,
	// and whether the weights are the mapped file's pages (imported, not
	// copied).
	MatMul                 string  `json:"gpu_matmul,omitempty"`
	MatMulTiles            string  `json:"gpu_matmul_tiles,omitempty"`
	PrefillTensorCoreShare float64 `json:"prefill_tensor_core_share"`
	WeightsInPlace         bool    `json:"weights_in_place"`
	// The prefill's matrix products in TFLOPS (2 × their multiply-adds over
	// the prefill time; attention not counted), a 16-token verify pass
	// (all 16 logits) and its share on tensor cores, and its time over a
	// decode step's.
	PrefillTFLOPS         float64 `json:"prefill_matmul_tflops,omitempty"`
	Verify16StepMS        float64 `json:"verify16_step_ms"`
	VerifyTensorCoreShare float64 `json:"verify_tensor_core_share"`
	Verify16OfDecode      float64 `json:"verify16_of_decode,omitempty"`
}

// residentMiB reads RssAnon and RssFile of this process (Linux; zero elsewhere).
func residentMiB() (anon, file float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(l, "RssAnon: %f kB", &kb); err == nil {
			anon = kb / 1024
		} else if _, err := fmt.Sscanf(l, "RssFile: %f kB", &kb); err == nil {
			file = kb / 1024
		}
	}
	return anon, file
}

func cmdBenchDecode(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("bench decode")
	var ef engineFlags
	ef.register(fs, 1)
	nPrompt := fs.Int("prompt-tokens", 512, "prompt tokens to prefill")
	nGen := fs.Int("gen", 128, "tokens to decode (EOS ignored)")
	runs := fs.Int("runs", 3, "runs")
	asJSON := fs.Bool("json", false, "one JSON line per run")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *nPrompt < 1 || *nGen < 2 || *runs < 1 {
		return fmt.Errorf("%w: need --prompt-tokens >= 1, --gen >= 2, --runs >= 1", errUsage)
	}
	if ef.draft.Mode != "off" {
		return fmt.Errorf("%w: bench decode measures plain decoding, as llama.cpp's bench does; measure drafting with run --json (target_steps, decode_ms)", errUsage)
	}
	if ef.ctx == 0 {
		ef.ctx = *nPrompt + *nGen + 16 + 3*16 // and three 16-token verify passes
	}
	e, err := ef.load(log)
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dev := e.Device()
	var copyGBs float64 // the device's copy bandwidth, the yardstick for decode's GB/s
	if dev.Engine != engine.EngineCPU {
		if copyGBs, err = e.MeasureDeviceCopy(0, 10); err != nil {
			log.Warn().Err(err).Msg("device copy bandwidth not measured")
		}
	}
	if !*asJSON {
		if ft := e.FileType(); ft != "" {
			fmt.Fprintf(stdout, "model: %s (%s)\n", ef.model, ft)
		}
		fmt.Fprintf(stdout, "device: %s (%s", dev.Name, dev.Engine)
		if dev.Driver != "" {
			fmt.Fprintf(stdout, ", %s", dev.Driver)
		}
		if dev.Note != "" {
			fmt.Fprintf(stdout, "; %s", dev.Note)
		}
		fmt.Fprintln(stdout, ")")
		if dev.Engine != engine.EngineCPU {
			fmt.Fprintf(stdout, "matrix products: %s %s; weights in place: %v\n", dev.MatMul, dev.MatMulTiles, dev.WeightsInPlace)
		}
		if copyGBs > 0 {
			fmt.Fprintf(stdout, "device copy bandwidth: %.1f GB/s (read + write)\n", copyGBs)
		}
	}
	for r := 0; r < *runs; r++ {
		run, err := e.MeasureSpeed(ctx, *nPrompt, *nGen)
		if err != nil {
			return err
		}
		line := benchLine{Model: ef.model, FileType: e.FileType(), Threads: run.Threads, PromptTokens: run.PromptTokens,
			GenTokens: run.GenTokens, PrefillTokS: round2(run.PrefillTokS), DecodeTokS: round2(run.DecodeTokS),
			WeightBytes: run.WeightBytes, DecodeGBs: round2(run.DecodeGBs),
			DecodeStepMS: round3(run.DecodeStepMS), PrefillPassMS: round3(run.PrefillPassMS), PrefillPasses: run.PrefillPasses,
			Verify16StepMS: round3(run.Verify16StepMS),
			Engine:         dev.Engine, Device: dev.Name, Driver: dev.Driver}
		if dev.Engine != engine.EngineCPU {
			line.DeviceMemoryUsedMiB = round2(float64(e.Device().MemoryUsedBytes) / (1 << 20))
			line.MatMul, line.MatMulTiles, line.WeightsInPlace = dev.MatMul, dev.MatMulTiles, dev.WeightsInPlace
			line.PrefillTensorCoreShare = roundSig3(run.PrefillTensorCoreShare)
			line.VerifyTensorCoreShare = roundSig3(run.VerifyTensorCoreShare)
			if run.PrefillTokS > 0 {
				line.PrefillTFLOPS = roundSig3(2 * float64(run.PrefillMACs) * run.PrefillTokS / float64(run.PromptTokens) / 1e12)
			}
			line.CopyGBs = round2(copyGBs)
			if copyGBs > 0 {
				line.DecodeOfCopy = roundSig3(run.DecodeGBs / copyGBs)
			}
		}
		if run.DecodeStepMS > 0 && run.Verify16StepMS > 0 {
			line.Verify16OfDecode = roundSig3(run.Verify16StepMS / run.DecodeStepMS)
		}
		anon, file := residentMiB()
		line.RSSAnonMiB, line.RSSFileMiB = round2(anon), round2(file)
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(line); err != nil {
				return err
			}
			continue
		}
		if line.Verify16StepMS > 0 {
			fmt.Fprintf(stdout, "run %d: a 16-token verify pass %.3f ms (%.3gx a decode step)\n", r+1, line.Verify16StepMS, line.Verify16OfDecode)
		}
		fmt.Fprintf(stdout, "run %d: prefill %d tokens %.2f tok/s (%.2f ms per pass), decode %d tokens %.2f tok/s (%.3f ms per step), %.2f GB/s of weights",
			r+1, line.PromptTokens, line.PrefillTokS, line.PrefillPassMS, line.GenTokens, line.DecodeTokS, line.DecodeStepMS, line.DecodeGBs)
		if line.CopyGBs > 0 {
			fmt.Fprintf(stdout, ", %.1f%% of the device's %.1f GB/s", 100*run.DecodeGBs/copyGBs, line.CopyGBs)
		}
		fmt.Fprintf(stdout, " (%d threads; resident %.1f MiB anonymous, %.1f MiB mapped file", line.Threads, line.RSSAnonMiB, line.RSSFileMiB)
		if dev.Engine != engine.EngineCPU {
			fmt.Fprintf(stdout, "; %.1f MiB of device memory; %.3g of the prefill's multiply-adds on tensor cores, %.3g TFLOPS", line.DeviceMemoryUsedMiB, line.PrefillTensorCoreShare, line.PrefillTFLOPS)
		}
		fmt.Fprintln(stdout, ")")
	}
	return nil
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// roundSig3 rounds x > 0 to three significant digits, so that a small
// ratio (a software driver's decode against its copy rate) is not shown as 0.
func roundSig3(x float64) float64 {
	if x <= 0 {
		return x
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(x)))
	return math.Round(x*p) / p
}
