// The BFCL client: each case sent as one streamed chat completion with
// tool_choice auto, scored as it comes back.

package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/edgellmd/edgellmd/engine/chat"
)

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
	inParallel(ctx, len(cases), cfg.Concurrency, func(ctx context.Context, i int) {
		r := runBFCLCase(ctx, cfg, i, &cases[i])
		mu.Lock()
		defer mu.Unlock()
		recs[i] = r
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, len(cases), r)
		}
	})
	s := summarizeBFCL(cfg, cases, recs, time.Since(start))
	return &BFCLResult{Records: recs, Summary: s}, nil
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
