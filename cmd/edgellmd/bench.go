package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/rs/zerolog"
)

func cmdBench(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: bench needs a kind: decode, agentic or bfcl", errUsage)
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
		ef.ctx = *nPrompt + *nGen + 16
	}
	e, err := ef.load(log)
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for r := 0; r < *runs; r++ {
		run, err := e.MeasureSpeed(ctx, *nPrompt, *nGen)
		if err != nil {
			return err
		}
		line := benchLine{Model: ef.model, Threads: run.Threads, PromptTokens: run.PromptTokens,
			GenTokens: run.GenTokens, PrefillTokS: round2(run.PrefillTokS), DecodeTokS: round2(run.DecodeTokS),
			WeightBytes: run.WeightBytes, DecodeGBs: round2(run.DecodeGBs)}
		anon, file := residentMiB()
		line.RSSAnonMiB, line.RSSFileMiB = round2(anon), round2(file)
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(line); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "run %d: prefill %d tokens %.2f tok/s, decode %d tokens %.2f tok/s, %.2f GB/s of weights (%d threads; resident %.1f MiB anonymous, %.1f MiB mapped file)\n",
			r+1, line.PromptTokens, line.PrefillTokS, line.GenTokens, line.DecodeTokS, line.DecodeGBs, line.Threads, line.RSSAnonMiB, line.RSSFileMiB)
	}
	return nil
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
