package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// BFCLCase is one single-turn function-calling prompt in the BFCL format of
// bfcl_calib.jsonl: messages, OpenAI tools and the BFCL subset it comes from.
// PossibleAnswer is BFCL v4's ground truth when the file carries it
// ("possible_answer" or "ground_truth"): the expected calls, each
// {function name: {parameter: [allowed values...]}}, where an allowed ""
// marks an optional parameter.
type BFCLCase struct {
	ID             string                        `json:"id,omitempty"`
	Subset         string                        `json:"subset"`
	Messages       []chat.Message                `json:"messages"`
	Tools          []json.RawMessage             `json:"tools"`
	PossibleAnswer []map[string]map[string][]any `json:"-"`
}

// LoadBFCL reads a BFCL-format JSONL file.
func LoadBFCL(path string) ([]BFCLCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load BFCL cases: %w", err)
	}
	defer f.Close()
	return ParseBFCL(f, path)
}

// ParseBFCL reads BFCL cases from r; name is used in error messages.
func ParseBFCL(r io.Reader, name string) ([]BFCLCase, error) {
	var cases []BFCLCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var c BFCLCase
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		var gt struct {
			PossibleAnswer json.RawMessage `json:"possible_answer"`
			GroundTruth    json.RawMessage `json:"ground_truth"`
		}
		if err := json.Unmarshal(b, &gt); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		for _, raw := range []json.RawMessage{gt.PossibleAnswer, gt.GroundTruth} {
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&c.PossibleAnswer); err != nil {
				return nil, fmt.Errorf("%s:%d: possible_answer: want a list of {function: {parameter: [allowed values]}}: %w", name, line, err)
			}
			break
		}
		if len(c.Messages) == 0 {
			return nil, fmt.Errorf("%s:%d: messages: missing or empty", name, line)
		}
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s_%d", c.Subset, line)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", name)
	}
	return cases, nil
}

// BFCLVerdict is how one answer scored.
type BFCLVerdict struct {
	// Scored is false when the case has no ground truth and its subset is
	// not one whose answer is known without it (irrelevance, relevance).
	Scored  bool
	Correct bool
	Reason  string // why not correct
}

// ScoreBFCL scores the calls an answer made. Irrelevance subsets are
// correct when no call is made, relevance subsets when one is; other cases
// need PossibleAnswer and are scored by BFCL's AST rules: as many calls as
// expected (matched in any order for parallel cases), each naming the
// expected function, with every required parameter present, no parameter
// the answer does not allow, each value among the allowed ones (strings
// compared after BFCL's standardisation) and of the schema's type.
func ScoreBFCL(c *BFCLCase, calls []chat.ToolCall) BFCLVerdict {
	switch {
	case strings.Contains(c.Subset, "irrelevance"):
		if len(calls) == 0 {
			return BFCLVerdict{Scored: true, Correct: true}
		}
		return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("made %d call(s) where none fits", len(calls))}
	case strings.Contains(c.Subset, "relevance"):
		if len(calls) > 0 {
			return BFCLVerdict{Scored: true, Correct: true}
		}
		return BFCLVerdict{Scored: true, Reason: "made no call"}
	case c.PossibleAnswer == nil:
		return BFCLVerdict{}
	}
	if len(calls) != len(c.PossibleAnswer) {
		return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("made %d call(s), want %d", len(calls), len(c.PossibleAnswer))}
	}
	schemas := toolParams(c.Tools)
	used := make([]bool, len(calls))
	for i, want := range c.PossibleAnswer {
		var firstErr error
		found := false
		for j, call := range calls {
			if used[j] {
				continue
			}
			err := matchCall(want, call, schemas)
			if err == nil {
				used[j], found = true, true
				break
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if !found {
			if len(calls) == 1 {
				return BFCLVerdict{Scored: true, Reason: firstErr.Error()}
			}
			return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("expected call %d matches no call made (first mismatch: %v)", i, firstErr)}
		}
	}
	return BFCLVerdict{Scored: true, Correct: true}
}

// paramSchema is what the scorer needs of a tool's parameters.
type paramSchema struct {
	required []string
	types    map[string]string // parameter → JSON schema type
}

func toolParams(tools []json.RawMessage) map[string]paramSchema {
	out := map[string]paramSchema{}
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]struct {
						Type any `json:"type"`
					} `json:"properties"`
					Required []string `json:"required"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Function.Name == "" {
			continue
		}
		ps := paramSchema{required: t.Function.Parameters.Required, types: map[string]string{}}
		for name, p := range t.Function.Parameters.Properties {
			if s, ok := p.Type.(string); ok {
				ps.types[name] = s
			}
		}
		out[funcKey(t.Function.Name)] = ps
	}
	return out
}

// funcKey compares function names as BFCL does for OpenAI-style models,
// which may not use dots in names.
func funcKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

func matchCall(want map[string]map[string][]any, call chat.ToolCall, schemas map[string]paramSchema) error {
	if len(want) != 1 {
		return fmt.Errorf("possible answer entry names %d functions, want 1", len(want))
	}
	for name, params := range want {
		if funcKey(call.Function.Name) != funcKey(name) {
			return fmt.Errorf("called %q, want %q", call.Function.Name, name)
		}
		args, err := decodeArgs(call.Function.Arguments)
		if err != nil {
			return fmt.Errorf("%s: arguments are not a JSON object: %v", name, err)
		}
		schema := schemas[funcKey(name)]
		for _, r := range schema.required {
			if _, ok := args[r]; !ok {
				return fmt.Errorf("%s: required parameter %q missing", name, r)
			}
		}
		for k := range args {
			if _, ok := params[k]; !ok {
				return fmt.Errorf("%s: unexpected parameter %q", name, k)
			}
		}
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			allowed := params[k]
			v, ok := args[k]
			if !ok {
				if !allowsAbsent(allowed) {
					return fmt.Errorf("%s: parameter %q missing", name, k)
				}
				continue
			}
			if t := schema.types[k]; t != "" && !hasType(v, t) {
				return fmt.Errorf("%s: parameter %q: %s is not of type %s", name, k, compact(v), t)
			}
			if !amongAllowed(v, allowed) {
				return fmt.Errorf("%s: parameter %q: %s is not among the allowed values %s", name, k, compact(v), compact(allowed))
			}
		}
	}
	return nil
}

func decodeArgs(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null")
	}
	return m, nil
}

func allowsAbsent(allowed []any) bool {
	for _, a := range allowed {
		if s, ok := a.(string); ok && s == "" {
			return true
		}
	}
	return false
}

// hasType checks a decoded JSON value against a JSON-schema type name (as
// BFCL's OpenAI-style tool schemas write them; "float", "dict" and "tuple"
// are BFCL's own).
func hasType(v any, t string) bool {
	switch t {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "number", "float":
		_, ok := v.(json.Number)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array", "tuple":
		_, ok := v.([]any)
		return ok
	case "object", "dict":
		_, ok := v.(map[string]any)
		return ok
	}
	return true // "any" and types this scorer does not know
}

func amongAllowed(v any, allowed []any) bool {
	for _, a := range allowed {
		if sameValue(v, a) {
			return true
		}
	}
	return false
}

// sameValue compares a model's value with an allowed one: strings after
// BFCL's standardize_string, numbers by value, lists element by element,
// objects key by key (an allowed object's values may themselves be lists of
// allowed values, as BFCL writes nested answers).
func sameValue(v, a any) bool {
	switch a := a.(type) {
	case string:
		s, ok := v.(string)
		return ok && standardize(s) == standardize(a)
	case json.Number:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		x, err1 := n.Float64()
		y, err2 := a.Float64()
		return err1 == nil && err2 == nil && (x == y || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)))
	case bool:
		b, ok := v.(bool)
		return ok && b == a
	case nil:
		return v == nil
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(a) {
			return false
		}
		for i := range l {
			if !sameValue(l[i], a[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for k := range m {
			if _, ok := a[k]; !ok {
				return false
			}
		}
		for k, want := range a {
			got, present := m[k]
			if alts, isList := want.([]any); isList {
				if !present {
					if !allowsAbsent(alts) {
						return false
					}
					continue
				}
				if !amongAllowed(got, alts) && !sameValue(got, want) {
					return false
				}
				continue
			}
			if !present || !sameValue(got, want) {
				return false
			}
		}
		return true
	}
	return false
}

// standardize is BFCL's standardize_string: drop spaces and , . / - _ * ^,
// lower-case, and read single quotes as double quotes.
func standardize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case ' ', ',', '.', '/', '-', '_', '*', '^':
			continue
		case '\'':
			r = '"'
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// BFCLConfig is one accuracy run.
type BFCLConfig struct {
	Client      *Client
	Cases       []BFCLCase
	Dataset     string
	Request     RequestOptions // ToolChoice is set to "auto"
	Limit       int            // first N cases; 0 means all
	Concurrency int
	Timeout     time.Duration // per request
	Progress    func(done, total int, r *BFCLRecord)
}

// BFCLRecord is one case's outcome: a line of bfcl_results.jsonl.
type BFCLRecord struct {
	Index     int             `json:"index"`
	ID        string          `json:"id"`
	Subset    string          `json:"subset"`
	Content   string          `json:"content,omitempty"`
	Reasoning string          `json:"reasoning_content,omitempty"`
	Calls     []chat.ToolCall `json:"tool_calls,omitempty"`
	// WellFormed: every call names a tool of the request and has JSON-object
	// arguments with the tool's required parameters.
	WellFormed bool    `json:"well_formed"`
	Scored     bool    `json:"scored"`
	Correct    bool    `json:"correct"`
	Reason     string  `json:"reason,omitempty"`
	TTFTms     float64 `json:"ttft_ms"`
	LatencyMs  float64 `json:"latency_ms"`
	Error      string  `json:"error,omitempty"`
}

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

// BFCLResult is a finished accuracy run.
type BFCLResult struct {
	Records []*BFCLRecord
	Summary BFCLSummary
}

// RunBFCL sends each case as one streamed chat completion with
// tool_choice auto and scores the calls it gets back.
func RunBFCL(ctx context.Context, cfg BFCLConfig) (*BFCLResult, error) {
	if cfg.Client == nil {
		return nil, errors.New("bench: RunBFCL needs a Client")
	}
	cases := cfg.Cases
	if cfg.Limit > 0 && cfg.Limit < len(cases) {
		cases = cases[:cfg.Limit]
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 600 * time.Second
	}
	if cfg.Request.MaxTokens <= 0 {
		cfg.Request.MaxTokens = 1024
	}
	cfg.Request.ToolChoice = "auto"
	recs := make([]*BFCLRecord, len(cases))
	start := time.Now()
	var mu sync.Mutex
	done := 0
	next := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(next)
		for i := range cases {
			select {
			case next <- i:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	for w := 0; w < cfg.Concurrency; w++ {
		g.Go(func() error {
			for i := range next {
				r := runBFCLCase(gctx, cfg, i, &cases[i])
				mu.Lock()
				recs[i] = r
				done++
				if cfg.Progress != nil {
					cfg.Progress(done, len(cases), r)
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	res := &BFCLResult{}
	s := BFCLSummary{Dataset: cfg.Dataset, Model: cfg.Request.Model, URL: cfg.Client.BaseURL,
		DurationS: round2(time.Since(start).Seconds()), Subsets: map[string]BFCLSubset{}}
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
	res.Records, res.Summary = recs, s
	return res, nil
}

func runBFCLCase(ctx context.Context, cfg BFCLConfig, i int, c *BFCLCase) *BFCLRecord {
	r := &BFCLRecord{Index: i, ID: c.ID, Subset: c.Subset}
	body, err := ChatBody(c.Messages, c.Tools, cfg.Request)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	s, err := cfg.Client.StreamChat(tctx, body, nil)
	if s != nil {
		r.Content, r.Reasoning, r.Calls = s.Content, s.Reasoning, s.ToolCalls
		r.TTFTms = ms(s.TTFT())
		if !s.Done.IsZero() {
			r.LatencyMs = ms(s.Done.Sub(s.Sent))
		}
	}
	if err != nil {
		r.Error = err.Error()
	}
	r.WellFormed = wellFormed(r.Calls, toolParams(c.Tools))
	v := ScoreBFCL(c, r.Calls)
	if err != nil && v.Scored { // a failed request is wrong, whatever it had said
		v.Correct, v.Reason = false, "request failed"
	}
	r.Scored, r.Correct, r.Reason = v.Scored, v.Correct, v.Reason
	return r
}

func wellFormed(calls []chat.ToolCall, schemas map[string]paramSchema) bool {
	for _, c := range calls {
		s, ok := schemas[funcKey(c.Function.Name)]
		if !ok {
			return false
		}
		args, err := decodeArgs(c.Function.Arguments)
		if err != nil {
			return false
		}
		for _, r := range s.required {
			if _, ok := args[r]; !ok {
				return false
			}
		}
	}
	return len(calls) > 0
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
