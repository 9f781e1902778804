package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Report file names under the --out directory.
const (
	PerTurnFile = "per_turn.jsonl"
	SummaryFile = "summary.json"
	ReportFile  = "report.txt"
	// Plots.
	TTFTPlotFile       = "ttft.png"
	CachePlotFile      = "prompt_cache.png"
	CumulativePlotFile = "cumulative_time.png"
)

// WriteReport writes per_turn.jsonl, summary.json, report.txt and the PNG
// plots into dir (created if needed).
func WriteReport(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := writeJSONLines(filepath.Join(dir, PerTurnFile), res.Records); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, SummaryFile), res.Summary); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, ReportFile), func(w io.Writer) error {
		return WriteText(w, res)
	}); err != nil {
		return err
	}
	return writePlots(dir, res)
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	bw := bufio.NewWriter(f)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}

// writeJSONLines writes one JSON object a line.
func writeJSONLines[T any](path string, recs []T) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeJSON writes v as indented JSON.
func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// WriteText writes the human-readable report: the summary, then one line
// per conversation.
func WriteText(w io.Writer, res *Result) error {
	s := res.Summary
	var b strings.Builder
	verdict := "VALID"
	if !s.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "edgellmd bench agentic: MLPerf Edge Agentic replay (teacher-forced, harness metrics)\n\n")
	fmt.Fprintf(&b, "dataset      %s: %d conversations, %d requests\n", s.Dataset, s.Conversations, s.Turns)
	maxTok := fmt.Sprintf("max_completion_tokens %d", res.Config.Request.MaxTokens)
	if s.MaxTokensFromTrace {
		maxTok = "max_completion_tokens from the trace, ignore_eos"
	}
	fmt.Fprintf(&b, "server       %s, model %q, concurrency %d, %s\n", s.URL, s.Model, s.Concurrency, maxTok)
	fmt.Fprintf(&b, "result       %s: %d of %d requests completed, %d missing", verdict, s.CompletedTurns, s.Turns, s.MissingTurns)
	if s.Interrupted {
		b.WriteString(" (interrupted)")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "wall time    %.2f s\n", s.DurationS)
	fmt.Fprintf(&b, "output       %d tokens (%s count; server %d), %.2f tok/s\n", s.OutputTokens, s.TokenSource, s.ServerOutputTokens, s.OutputTokS)
	fmt.Fprintf(&b, "TTFT ms      p50 %.1f  p90 %.1f  p99 %.1f  mean %.1f\n", s.TTFTmsP50, s.TTFTmsP90, s.TTFTmsP99, s.TTFTmsMean)
	fmt.Fprintf(&b, "TPOT ms      p50 %.2f  p90 %.2f  p99 %.2f  mean %.2f\n", s.TPOTmsP50, s.TPOTmsP90, s.TPOTmsP99, s.TPOTmsMean)
	fmt.Fprintf(&b, "prompt       %d tokens (%s count; server %d)\n", s.PromptTokens, s.TokenSource, s.ServerPromptTokens)
	cached := fmt.Sprintf("%d tokens served from the server's cache (%.2f%% of its prompt tokens)", s.CachedPromptTokens, 100*s.CachedRatio)
	if !s.CachedReported {
		cached += "; some answers reported no cached_tokens"
	}
	fmt.Fprintf(&b, "cache        %s\n", cached)
	if res.Config.Counter != nil {
		fmt.Fprintf(&b, "ideal cache  %d tokens (%.2f%%): each prompt's longest prefix shared with an earlier one\n", s.IdealCachedPromptTokens, 100*s.IdealCachedRatio)
	}
	if s.IoU != nil {
		fmt.Fprintf(&b, "IoU          %.4f over %d scored requests (bash executables vs the recorded answer)\n", *s.IoU, s.IoUTurns)
	} else {
		fmt.Fprintf(&b, "IoU          none scored\n")
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conversation\trequests\tdone\tprompt\tcached\tideal\toutput\tTTFT p50 ms\tTPOT p50 ms\tIoU\t")
	type agg struct {
		n, done                       int
		prompt, cached, ideal, output int64
		ttft, tpot                    []float64
		iouSum                        float64
		iouN                          int
	}
	var order []string
	per := map[string]*agg{}
	for _, r := range res.Records {
		a := per[r.ConversationID]
		if a == nil {
			a = &agg{}
			per[r.ConversationID] = a
			order = append(order, r.ConversationID)
		}
		a.n++
		if r.IoU != nil {
			a.iouSum += *r.IoU
			a.iouN++
		}
		if !r.Completed {
			continue
		}
		a.done++
		if res.Config.Counter != nil {
			a.prompt += int64(r.PromptTokens)
			a.output += int64(r.OutputTokens)
		} else {
			a.prompt += int64(r.ServerPromptTokens)
			a.output += int64(r.ServerOutputTokens)
		}
		a.cached += int64(max(r.CachedTokens, 0))
		a.ideal += int64(r.IdealCachedTokens)
		a.ttft = append(a.ttft, r.TTFTms)
		if r.outputTokens() >= 2 {
			a.tpot = append(a.tpot, r.TPOTms)
		}
	}
	for _, id := range order {
		a := per[id]
		iou := "-"
		if a.iouN > 0 {
			iou = fmt.Sprintf("%.3f", a.iouSum/float64(a.iouN))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%s\t\n", id, a.n, a.done, a.prompt, a.cached, a.ideal, a.output,
			percentile(a.ttft, 50), percentile(a.tpot, 50), iou)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var errs []string
	for _, r := range res.Records {
		if r.Error != "" && !strings.HasPrefix(r.Error, "not issued") {
			errs = append(errs, fmt.Sprintf("  %s turn %d: %s", r.ConversationID, r.Turn, r.Error))
		}
	}
	if len(errs) > 0 {
		if _, err := fmt.Fprintf(w, "\nerrors:\n%s\n", strings.Join(errs, "\n")); err != nil {
			return err
		}
	}
	return nil
}
