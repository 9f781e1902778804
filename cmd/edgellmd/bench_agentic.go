package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"

	"github.com/edgellmd/edgellmd/bench"
)

// serverFlags are the flags of the commands that talk to an OpenAI server.
type serverFlags struct {
	url, model, apiKey string
	reasoning          string
	maxTokens          int
	seed               int64
	temperature        float64
	concurrency        int
	timeout            time.Duration
	out                string
	asJSON             bool
}

func (f *serverFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	Float64Var(*float64, string, float64, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}, timeoutName string) {
	fs.StringVar(&f.url, "url", "http://127.0.0.1:8001", "the server's base URL (OpenAI API under /v1)")
	fs.StringVar(&f.model, "model", "", "model name to request (default: the first of GET /v1/models)")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("EDGELLMD_API_KEY"), "bearer token (default $EDGELLMD_API_KEY)")
	fs.StringVar(&f.reasoning, "reasoning", "off", "off: render prompts with enable_thinking false and send chat_template_kwargs to say so (the MLPerf setting); on: the template's thinking default")
	fs.IntVar(&f.maxTokens, "max-tokens", 1024, "max_completion_tokens of each request")
	fs.Int64Var(&f.seed, "seed", 42, "sampling seed sent with each request")
	fs.Float64Var(&f.temperature, "temperature", 0, "sampling temperature sent with each request")
	fs.IntVar(&f.concurrency, "concurrency", 1, "requests in flight at once (agentic: conversations at once; MLPerf uses 1)")
	fs.DurationVar(&f.timeout, timeoutName, 600*time.Second, "limit on one request")
	fs.StringVar(&f.out, "out", "", "directory for the reports (created if needed)")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON instead of the text report")
}

func (f *serverFlags) check() error {
	if f.reasoning != "off" && f.reasoning != "on" {
		return fmt.Errorf("%w: --reasoning %q: want off or on", errUsage, f.reasoning)
	}
	if f.maxTokens < 1 || f.concurrency < 1 || f.timeout <= 0 {
		return fmt.Errorf("%w: need --max-tokens >= 1, --concurrency >= 1 and a positive timeout", errUsage)
	}
	return nil
}

// requestOptions resolves the model name (asking the server when not given).
func (f *serverFlags) requestOptions(ctx context.Context, c *bench.Client) (bench.RequestOptions, error) {
	o := bench.RequestOptions{Model: f.model, Temperature: f.temperature, Seed: f.seed, MaxTokens: f.maxTokens}
	if f.reasoning == "off" {
		off := false
		o.EnableThinking = &off
	}
	if o.Model == "" {
		ids, err := c.ListModels(ctx)
		if err != nil {
			return o, fmt.Errorf("no --model given and the server's model list is unavailable: %w", err)
		}
		if len(ids) == 0 {
			return o, fmt.Errorf("no --model given and GET /v1/models lists none")
		}
		o.Model = ids[0]
	}
	return o, nil
}

// report writes the run's files (writeFiles, when --out is set), then the
// summary as indented JSON (--json) or as text (writeText).
func (f *serverFlags) report(stdout io.Writer, summary any, writeFiles, writeText func() error) error {
	if f.out != "" {
		if err := writeFiles(); err != nil {
			return err
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(summary)
	}
	return writeText()
}

func (f *serverFlags) client() *bench.Client {
	return &bench.Client{BaseURL: f.url, APIKey: f.apiKey, HTTP: &http.Client{}}
}

// newProgressBar draws on stderr when it is a terminal, else returns nil.
func newProgressBar(total int, what string) *progressbar.ProgressBar {
	if !isatty.IsTerminal(os.Stderr.Fd()) && !isatty.IsCygwinTerminal(os.Stderr.Fd()) {
		return nil
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

func cmdBenchAgentic(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("bench agentic")
	var sf serverFlags
	sf.register(fs, "turn-timeout")
	dataset := fs.String("dataset", "", "the agentic trace (JSONL, MLCommons row format), e.g. agentic_coding_2.5h.jsonl")
	tokenizerPath := fs.String("tokenizer", "", "the model's GGUF (or a tokenizer.json with tokenizer_config.json beside it): client-side token counts and the ideal cache figures")
	conversations := fs.Int("conversations", 0, "replay only the first N conversations (0 = all)")
	turns := fs.Int("turns", 0, "replay only the first N requests of each conversation (0 = all)")
	fromTrace := fs.Bool("max-tokens-from-trace", false, "set each request's max_completion_tokens to the recorded answer's token length and send ignore_eos (needs --tokenizer)")
	toolDelay := fs.Bool("inject-tool-delay", false, "sleep each row's recorded delay_seconds before sending it")
	dryRun := fs.Bool("dry-run", false, "send nothing: count the selected workload's tokens and ideal prefix-cache hits (needs --tokenizer)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if err := sf.check(); err != nil {
		return err
	}
	if *dataset == "" {
		return fmt.Errorf("%w: --dataset TRACE.jsonl is required (the MLPerf trace is agentic_coding_2.5h.jsonl)", errUsage)
	}
	if *conversations < 0 || *turns < 0 {
		return fmt.Errorf("%w: --conversations and --turns must be >= 0", errUsage)
	}
	if (*fromTrace || *dryRun) && *tokenizerPath == "" {
		return fmt.Errorf("%w: --max-tokens-from-trace and --dry-run need --tokenizer MODEL.gguf", errUsage)
	}
	trace, err := bench.LoadTrace(*dataset)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := bench.Config{
		Trace: trace, Conversations: *conversations, Turns: *turns, Concurrency: sf.concurrency,
		TurnTimeout: sf.timeout, MaxTokensFromTrace: *fromTrace, InjectToolDelay: *toolDelay,
	}
	if *tokenizerPath != "" {
		if cfg.Counter, err = bench.LoadTokenCounter(*tokenizerPath, sf.reasoning == "on"); err != nil {
			return err
		}
	}
	if *dryRun {
		w, err := bench.MeasureWorkload(ctx, cfg)
		if err != nil {
			return err
		}
		if sf.asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(w)
		}
		_, err = fmt.Fprintf(stdout, "%d conversations, %d requests, reasoning %s\n"+
			"prompt tokens        %d (longest %d)\n"+
			"ideal cached         %d (%.2f%%): each prompt's longest prefix shared with an earlier one\n"+
			"to prefill at least  %d (per request: median %.0f, p90 %.0f)\n"+
			"recorded answers     %d tokens\n",
			w.Conversations, w.Requests, sf.reasoning, w.PromptTokens, w.LongestPrompt,
			w.IdealCachedTokens, 100*float64(w.IdealCachedTokens)/float64(max(w.PromptTokens, 1)),
			w.PrefillTokens, w.PrefillP50, w.PrefillP90, w.RecordedAnswerTokens)
		return err
	}
	cfg.Client = sf.client()
	if cfg.Request, err = sf.requestOptions(ctx, cfg.Client); err != nil {
		return err
	}
	opts := cfg.Request
	total := 0
	for i, c := range trace.Conversations {
		if *conversations > 0 && i >= *conversations {
			break
		}
		n := len(c.Requests)
		if *turns > 0 {
			n = min(n, *turns)
		}
		total += n
	}
	what := "replay"
	if cfg.Counter != nil {
		what = "counting prompt tokens"
	}
	bar := newProgressBar(total, what)
	if bar != nil {
		_ = bar.RenderBlank()
	}
	cfg.Progress = func(p bench.Progress) {
		if bar == nil {
			return
		}
		r := p.Record
		state := fmt.Sprintf("TTFT %.0f ms", r.TTFTms)
		if r.Error != "" {
			state = "FAILED"
		}
		bar.Describe(fmt.Sprintf("%s %s, %.1f tok/s", r.ConversationID, state, float64(p.OutputTokens)/p.Elapsed.Seconds()))
		_ = bar.Add(1)
	}
	log.Info().Str("url", sf.url).Str("model", opts.Model).Int("conversations", len(trace.Conversations)).Msg("replay starts")
	res, err := bench.Run(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return err
	}
	if err := sf.report(stdout, res.Summary, func() error { return bench.WriteReport(sf.out, res) },
		func() error { return bench.WriteText(stdout, res) }); err != nil {
		return err
	}
	if !res.Summary.Valid {
		return fmt.Errorf("run invalid: %d of %d requests missing", res.Summary.MissingTurns, res.Summary.Turns)
	}
	return nil
}

func cmdBenchBFCL(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("bench bfcl")
	var sf serverFlags
	sf.register(fs, "timeout")
	dataset := fs.String("dataset", "", "BFCL-format JSONL (messages, tools, subset; possible_answer when scored), e.g. bfcl_calib.jsonl")
	limit := fs.Int("limit", 0, "send only the first N cases (0 = all)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if err := sf.check(); err != nil {
		return err
	}
	if *dataset == "" {
		return fmt.Errorf("%w: --dataset FILE.jsonl is required", errUsage)
	}
	cases, err := bench.LoadBFCL(*dataset)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	client := sf.client()
	opts, err := sf.requestOptions(ctx, client)
	if err != nil {
		return err
	}
	total := len(cases)
	if *limit > 0 {
		total = min(total, *limit)
	}
	bar := newProgressBar(total, "bfcl")
	cfg := bench.BFCLConfig{Client: client, Cases: cases, Dataset: *dataset, Request: opts, Limit: *limit,
		Concurrency: sf.concurrency, Timeout: sf.timeout,
		Progress: func(done, total int, r *bench.BFCLRecord) {
			if bar != nil {
				bar.Describe(r.Subset)
				_ = bar.Add(1)
			}
		}}
	log.Info().Str("url", sf.url).Str("model", opts.Model).Int("cases", len(cases)).Msg("BFCL run starts")
	res, err := bench.RunBFCL(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return err
	}
	if err := sf.report(stdout, res.Summary, func() error { return bench.WriteBFCLReport(sf.out, res) },
		func() error { return bench.WriteBFCLText(stdout, res) }); err != nil {
		return err
	}
	if res.Summary.Errors > 0 {
		return fmt.Errorf("%d of %d requests failed (see the error field of %s)", res.Summary.Errors, res.Summary.Cases, bench.BFCLResultsFile)
	}
	return nil
}
