package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Config is one replay of an agentic trace.
type Config struct {
	Client  *Client
	Trace   *Trace
	Request RequestOptions // model, sampling, the default max_completion_tokens
	// Conversations and Turns take the first N conversations and the first N
	// requests of each; 0 means all.
	Conversations, Turns int
	// Concurrency is how many conversations run at once (MLPerf: 1).
	Concurrency int
	// TurnTimeout bounds one request; a turn that times out or fails aborts
	// the rest of its conversation and makes the run invalid.
	TurnTimeout time.Duration
	// MaxTokensFromTrace sets each request's max_completion_tokens to the
	// token length of the recorded answer (content and tool calls, and the
	// reasoning too when the template thinks) and asks the server to ignore
	// EOS, so that a model that never stops by itself (random weights)
	// produces the real workload's output volume. Needs Counter.
	MaxTokensFromTrace bool
	// InjectToolDelay sleeps each row's recorded delay_seconds before issuing
	// it (the harness's inject_tool_delay; off in the MLPerf run).
	InjectToolDelay bool
	// Counter counts tokens on the client side; nil leaves prompt, output and
	// ideal-cache figures to what the server reports.
	Counter *TokenCounter
	// Progress, when set, is called after every request (from one goroutine
	// at a time).
	Progress func(Progress)
}

// Progress is what a progress display needs after each request.
type Progress struct {
	Done, Total  int
	Record       *Record
	Elapsed      time.Duration
	OutputTokens int // server-reported (or chunk-counted) so far
}

// Record is one request's outcome: a line of per_turn.jsonl.
type Record struct {
	ConversationID string `json:"conversation"`
	Turn           int    `json:"turn"`  // the client row's turn number in the trace
	Index          int    `json:"index"` // the request's position in its conversation
	// Seq is the order in which the request completed in the run (0-based);
	// -1 for a request that was never issued.
	Seq    int     `json:"seq"`
	StartS float64 `json:"start_s"` // seconds from the run's start to sending
	EndS   float64 `json:"end_s"`   // ... to the end of the stream

	MaxTokens          int `json:"max_tokens"`
	PromptTokens       int `json:"prompt_tokens"`        // client-side count (0 without a tokenizer)
	ServerPromptTokens int `json:"server_prompt_tokens"` // usage.prompt_tokens
	CachedTokens       int `json:"cached_tokens"`        // usage.prompt_tokens_details.cached_tokens; -1 when not reported
	IdealCachedTokens  int `json:"ideal_cached_tokens"`  // longest prefix shared with an earlier request
	OutputTokens       int `json:"output_tokens"`        // client-side count of the answer
	ServerOutputTokens int `json:"server_output_tokens"` // usage.completion_tokens
	OutputChunks       int `json:"output_chunks"`

	TTFTms    float64  `json:"ttft_ms"`
	TPOTms    float64  `json:"tpot_ms"`
	LatencyMs float64  `json:"latency_ms"`
	IoU       *float64 `json:"iou"` // nil when the recorded answer has no bash actions

	FinishReason string `json:"finish_reason"`
	Error        string `json:"error"` // empty when the request completed
	Completed    bool   `json:"completed"`

	// Actions are the bash actions of the answer and of the recorded one.
	Actions         []string `json:"actions,omitempty"`
	ExpectedActions []string `json:"expected_actions,omitempty"`

	expected *chat.Message // the recorded answer
	answer   chat.Message
	stream   *Stream
}

// Result is a finished (or interrupted) replay.
type Result struct {
	Config      Config
	Started     time.Time
	Duration    time.Duration
	Interrupted bool
	// Records are in workload order: conversation by conversation, request
	// by request.
	Records []*Record
	Summary Summary
}

// Run replays the trace: each conversation's requests in order, each after
// the previous one has finished, Concurrency conversations at a time, in
// dataset order. Client-side token counts (and the ideal cache figures) are
// computed before the first request is sent, so that tokenizing does not
// compete with the server; answers are counted after the last one. A
// cancelled ctx stops the replay; what was measured is returned, marked
// interrupted.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Client == nil || cfg.Trace == nil {
		return nil, errors.New("bench: Run needs a Client and a Trace")
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = 600 * time.Second
	}
	if cfg.Request.MaxTokens <= 0 {
		cfg.Request.MaxTokens = 1024
	}
	if cfg.MaxTokensFromTrace && cfg.Counter == nil {
		return nil, errors.New("bench: --max-tokens-from-trace needs the model's tokenizer (--tokenizer)")
	}
	turns, plan, all, err := planRun(ctx, cfg)
	if err != nil {
		return nil, err
	}

	res := &Result{Config: cfg, Records: all, Started: time.Now()}
	var mu sync.Mutex
	done, outTokens := 0, 0
	report := func(r *Record) {
		mu.Lock()
		defer mu.Unlock()
		r.Seq = done
		done++
		if r.ServerOutputTokens > 0 {
			outTokens += r.ServerOutputTokens
		} else {
			outTokens += r.OutputChunks
		}
		if cfg.Progress != nil {
			cfg.Progress(Progress{Done: done, Total: len(all), Record: r, Elapsed: time.Since(res.Started), OutputTokens: outTokens})
		}
	}

	// Conversations record their errors per turn.
	inParallel(ctx, len(plan), cfg.Concurrency, func(ctx context.Context, ci int) {
		runConversation(ctx, cfg, res.Started, turns[ci], plan[ci], report)
	})
	res.Duration = time.Since(res.Started)
	res.Interrupted = ctx.Err() != nil

	if err := countAnswers(cfg, all); err != nil {
		return nil, err
	}
	res.Summary = summarize(res)
	return res, nil
}

// planRun selects the requests of a run and counts their prompts.
func planRun(ctx context.Context, cfg Config) (turns [][]Turn, plan [][]*Record, all []*Record, err error) {
	if cfg.Trace == nil {
		return nil, nil, nil, errors.New("bench: no trace")
	}
	convs := cfg.Trace.Conversations
	if cfg.Conversations > 0 && cfg.Conversations < len(convs) {
		convs = convs[:cfg.Conversations]
	}
	for _, c := range convs {
		reqs := c.Requests
		if cfg.Turns > 0 && cfg.Turns < len(reqs) {
			reqs = reqs[:cfg.Turns]
		}
		recs := make([]*Record, len(reqs))
		for i, t := range reqs {
			recs[i] = &Record{ConversationID: c.ID, Turn: t.Turn, Index: t.Index, Seq: -1, CachedTokens: -1, expected: t.Expected}
			all = append(all, recs[i])
		}
		plan = append(plan, recs)
		turns = append(turns, reqs)
	}
	if len(all) == 0 {
		return nil, nil, nil, errors.New("bench: the selection has no requests")
	}
	if err := countPrompts(ctx, cfg, turns, plan); err != nil {
		return nil, nil, nil, err
	}
	return turns, plan, all, nil
}

// Workload is what a trace asks of a server, counted on the client side
// without sending anything.
type Workload struct {
	Conversations int   `json:"conversations"`
	Requests      int   `json:"requests"`
	PromptTokens  int64 `json:"prompt_tokens"`
	// IdealCachedTokens sums each prompt's longest prefix shared with an
	// earlier prompt: what a perfect prefix cache serves; the rest,
	// PrefillTokens, must be computed.
	IdealCachedTokens int64 `json:"ideal_cached_tokens"`
	PrefillTokens     int64 `json:"prefill_tokens"`
	LongestPrompt     int   `json:"longest_prompt"`
	// Prefill tokens per request: median and 90th percentile.
	PrefillP50 float64 `json:"prefill_tokens_p50"`
	PrefillP90 float64 `json:"prefill_tokens_p90"`
	// RecordedAnswerTokens sums the recorded answers' token lengths as
	// --max-tokens-from-trace would ask for them (reasoning left out when
	// the template does not think).
	RecordedAnswerTokens int64 `json:"recorded_answer_tokens"`
}

// MeasureWorkload counts the prompts of the requests cfg selects (Trace,
// Conversations, Turns, Counter): tokens, the ideal prefix-cache hit and
// the recorded answers' lengths.
func MeasureWorkload(ctx context.Context, cfg Config) (Workload, error) {
	if cfg.Counter == nil {
		return Workload{}, errors.New("bench: measuring a workload needs the model's tokenizer")
	}
	cfg.MaxTokensFromTrace = true
	_, plan, all, err := planRun(ctx, cfg)
	if err != nil {
		return Workload{}, err
	}
	w := Workload{Conversations: len(plan), Requests: len(all)}
	var prefill []float64
	for _, r := range all {
		w.PromptTokens += int64(r.PromptTokens)
		w.IdealCachedTokens += int64(r.IdealCachedTokens)
		w.LongestPrompt = max(w.LongestPrompt, r.PromptTokens)
		prefill = append(prefill, float64(r.PromptTokens-r.IdealCachedTokens))
		if r.expected != nil {
			w.RecordedAnswerTokens += int64(r.MaxTokens)
		}
	}
	w.PrefillTokens = w.PromptTokens - w.IdealCachedTokens
	w.PrefillP50, w.PrefillP90 = percentile(prefill, 50), percentile(prefill, 90)
	return w, nil
}

// runConversation issues one conversation's requests in order; the first
// failure marks the rest as not issued.
func runConversation(ctx context.Context, cfg Config, start time.Time, turns []Turn, recs []*Record, report func(*Record)) {
	header := http.Header{}
	for i, t := range turns {
		r := recs[i]
		// The conversation's id as the affinity key a fleet's proxy routes on
		// (packaging/fleet), as the agents send theirs; X-Session-ID too,
		// for the server's log line.
		header.Set("X-Session-Key", t.ConversationID)
		header.Set("X-Session-ID", t.ConversationID)
		if ctx.Err() != nil {
			r.Error = "not issued: the run was interrupted"
			continue
		}
		if cfg.InjectToolDelay && t.DelaySeconds > 0 {
			timer := time.NewTimer(time.Duration(t.DelaySeconds * float64(time.Second)))
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				r.Error = "not issued: the run was interrupted"
				continue
			}
		}
		opts := cfg.Request
		if t.MaxTokens > 0 {
			opts.MaxTokens = t.MaxTokens
		}
		if cfg.MaxTokensFromTrace && r.MaxTokens > 0 {
			opts.MaxTokens, opts.IgnoreEOS = r.MaxTokens, true
		}
		r.MaxTokens = opts.MaxTokens
		err := issue(ctx, cfg, start, t, opts, header, r)
		report(r)
		if err != nil {
			for _, rest := range recs[i+1:] {
				rest.Error = fmt.Sprintf("not issued: turn %d of the conversation failed", t.Turn)
			}
			return
		}
	}
}

func issue(ctx context.Context, cfg Config, start time.Time, t Turn, opts RequestOptions, header http.Header, r *Record) error {
	body, err := ChatBody(t.Messages, t.Tools, opts)
	if err != nil {
		r.Error = err.Error()
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, cfg.TurnTimeout)
	defer cancel()
	s, err := cfg.Client.StreamChat(tctx, body, header)
	if s != nil {
		r.stream = s
		r.StartS = seconds(s.Sent.Sub(start))
		end := s.Done
		if end.IsZero() {
			end = time.Now()
		}
		r.EndS = seconds(end.Sub(start))
		r.LatencyMs = ms(end.Sub(s.Sent))
		r.TTFTms = ms(s.TTFT())
		r.OutputChunks = s.OutputChunks
		r.FinishReason = s.FinishReason
		if s.Usage != nil {
			r.ServerPromptTokens = s.Usage.PromptTokens
			r.ServerOutputTokens = s.Usage.CompletionTokens
			r.CachedTokens = s.Usage.CachedTokens()
		}
		r.answer = s.Message()
	}
	if err != nil {
		if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("turn timed out after %s: %w", cfg.TurnTimeout, err)
		}
		r.Error = err.Error()
		return err
	}
	r.Completed = true
	return nil
}

// countPrompts tokenizes every planned prompt (in parallel), then walks them
// in workload order to find each one's longest prefix shared with an
// earlier one, and sizes --max-tokens-from-trace from the recorded answers.
func countPrompts(ctx context.Context, cfg Config, turns [][]Turn, plan [][]*Record) error {
	if cfg.Counter == nil {
		return nil
	}
	type job struct{ c, i int }
	ids := make([][][]int32, len(turns))
	jobs := make(chan job)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(jobs)
		for c := range turns {
			ids[c] = make([][]int32, len(turns[c]))
			for i := range turns[c] {
				select {
				case jobs <- job{c, i}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
		return nil
	})
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		g.Go(func() error {
			for j := range jobs {
				t := turns[j.c][j.i]
				p, err := cfg.Counter.Prompt(t.Messages, t.Tools)
				if err != nil {
					return fmt.Errorf("conversation %s turn %d: render prompt: %w", t.ConversationID, t.Turn, err)
				}
				ids[j.c][j.i] = p
				r := plan[j.c][j.i]
				r.PromptTokens = len(p)
				if cfg.MaxTokensFromTrace && t.Expected != nil {
					m := *t.Expected
					if !cfg.Counter.enableThinking {
						m.ReasoningContent = nil // not produced with reasoning off
					}
					n, err := cfg.Counter.Answer(m)
					if err != nil {
						return fmt.Errorf("conversation %s turn %d: count recorded answer: %w", t.ConversationID, t.Turn+1, err)
					}
					r.MaxTokens = max(n, 1)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var idx prefixIndex
	for c := range ids {
		for i, p := range ids[c] {
			plan[c][i].IdealCachedTokens = idx.add(p)
		}
	}
	return nil
}

// countAnswers counts each answer's tokens and scores its bash actions.
func countAnswers(cfg Config, recs []*Record) error {
	for _, r := range recs {
		if r.stream == nil {
			continue // never issued: not scored, as in the harness
		}
		if cfg.Counter != nil {
			n, err := cfg.Counter.Answer(r.answer)
			if err != nil {
				return fmt.Errorf("conversation %s turn %d: count answer: %w", r.ConversationID, r.Turn, err)
			}
			r.OutputTokens = n
		}
		r.TPOTms = ms(r.stream.TPOT(r.outputTokens()))
		if r.expected != nil {
			r.ExpectedActions = BashActions(r.expected.ToolCalls)
			if len(r.ExpectedActions) > 0 {
				r.Actions = BashActions(r.answer.ToolCalls) // a failed turn has none: it scores 0
				iou := IoU(r.ExpectedActions, r.Actions)
				r.IoU = &iou
			}
		}
	}
	return nil
}

// outputTokens is the best output count the record has: the client-side
// count, else the server's, else the number of output chunks.
func (r *Record) outputTokens() int {
	switch {
	case r.OutputTokens > 0:
		return r.OutputTokens
	case r.ServerOutputTokens > 0:
		return r.ServerOutputTokens
	}
	return r.OutputChunks
}

// seconds is d in seconds, to the microsecond.
func seconds(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e6 }

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
