// The BFCL report: the run's summary, per subset, and its files.

package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"
)

// BFCLSubset are one subset's counts.
type BFCLSubset struct {
	Cases     int      `json:"cases"`
	WithCalls int      `json:"with_calls"`
	Scored    int      `json:"scored"`
	Correct   int      `json:"correct"`
	Accuracy  *float64 `json:"accuracy"` // correct / scored; nil when none scored
}

// BFCLSummary is bfcl_summary.json.
type BFCLSummary struct {
	Dataset       string                `json:"dataset"`
	Model         string                `json:"model"`
	URL           string                `json:"url"`
	Cases         int                   `json:"cases"`
	Errors        int                   `json:"errors"`
	WithCalls     int                   `json:"with_calls"`
	WellFormed    int                   `json:"well_formed"` // answers whose calls are all well formed
	Scored        int                   `json:"scored"`
	Correct       int                   `json:"correct"`
	Accuracy      *float64              `json:"accuracy"`
	DurationS     float64               `json:"duration_s"`
	TTFTmsP50     float64               `json:"ttft_ms_p50"`
	Subsets       map[string]BFCLSubset `json:"subsets"`
	GroundTruthed bool                  `json:"ground_truth"` // the file carried possible answers
}

// summarizeBFCL counts the records of a run (a case not issued, the run
// interrupted, gets a record saying so).
func summarizeBFCL(cfg BFCLConfig, cases []BFCLCase, recs []*BFCLRecord, took time.Duration) BFCLSummary {
	s := BFCLSummary{Dataset: cfg.Dataset, Model: cfg.Request.Model, URL: cfg.Client.BaseURL,
		DurationS: round2(took.Seconds()), Subsets: map[string]BFCLSubset{}}
	var ttft []float64
	for i, r := range recs {
		if r == nil {
			r = &BFCLRecord{Index: i, ID: cases[i].ID, Subset: cases[i].Subset, Error: "not issued: the run was interrupted"}
			recs[i] = r
		}
		if cases[i].PossibleAnswer != nil {
			s.GroundTruthed = true
		}
		sub := s.Subsets[r.Subset]
		s.Cases++
		sub.Cases++
		if r.Error != "" {
			s.Errors++
		} else {
			ttft = append(ttft, r.TTFTms)
		}
		if len(r.Calls) > 0 {
			s.WithCalls++
			sub.WithCalls++
			if r.WellFormed {
				s.WellFormed++
			}
		}
		if r.Scored {
			s.Scored++
			sub.Scored++
			if r.Correct {
				s.Correct++
				sub.Correct++
			}
		}
		s.Subsets[r.Subset] = sub
	}
	for k, sub := range s.Subsets {
		if sub.Scored > 0 {
			a := round4(float64(sub.Correct) / float64(sub.Scored))
			sub.Accuracy = &a
			s.Subsets[k] = sub
		}
	}
	if s.Scored > 0 {
		a := round4(float64(s.Correct) / float64(s.Scored))
		s.Accuracy = &a
	}
	s.TTFTmsP50 = percentile(ttft, 50)
	return s
}

// BFCL report file names under the --out directory.
const (
	BFCLResultsFile = "bfcl_results.jsonl"
	BFCLSummaryFile = "bfcl_summary.json"
	BFCLReportFile  = "bfcl_report.txt"
)

// WriteBFCLReport writes bfcl_results.jsonl, bfcl_summary.json and
// bfcl_report.txt into dir.
func WriteBFCLReport(dir string, res *BFCLResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := writeJSONLines(filepath.Join(dir, BFCLResultsFile), res.Records); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, BFCLSummaryFile), res.Summary); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, BFCLReportFile), func(w io.Writer) error { return WriteBFCLText(w, res) })
}

// WriteBFCLText writes the human-readable accuracy report.
func WriteBFCLText(w io.Writer, res *BFCLResult) error {
	s := res.Summary
	fmt.Fprintf(w, "edgellmd bench bfcl: single-turn function calling (tool_choice auto)\n\n")
	fmt.Fprintf(w, "dataset   %s: %d cases, %d errors, %.2f s\n", s.Dataset, s.Cases, s.Errors, s.DurationS)
	fmt.Fprintf(w, "server    %s, model %q, TTFT p50 %.1f ms\n", s.URL, s.Model, s.TTFTmsP50)
	fmt.Fprintf(w, "calls     %d answers with calls, %d of them well formed\n", s.WithCalls, s.WellFormed)
	if s.Accuracy != nil {
		what := "irrelevance/relevance subsets only: the file has no possible answers"
		if s.GroundTruthed {
			what = "AST match against the possible answers, irrelevance: no call"
		}
		fmt.Fprintf(w, "accuracy  %.2f%% of %d scored cases (%s)\n\n", 100**s.Accuracy, s.Scored, what)
	} else {
		fmt.Fprintf(w, "accuracy  nothing scored (no possible answers in the file)\n\n")
	}
	names := make([]string, 0, len(s.Subsets))
	for k := range s.Subsets {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subset\tcases\twith calls\tscored\tcorrect\taccuracy\t")
	for _, k := range names {
		sub := s.Subsets[k]
		acc := "-"
		if sub.Accuracy != nil {
			acc = fmt.Sprintf("%.2f%%", 100**sub.Accuracy)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t\n", k, sub.Cases, sub.WithCalls, sub.Scored, sub.Correct, acc)
	}
	return tw.Flush()
}
