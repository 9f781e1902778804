package bench

import (
	"math"
	"sort"
	"time"
)

// Summary is summary.json: the run's figures with the harness's definitions.
type Summary struct {
	// Valid is true when every planned request completed and the run was not
	// interrupted (MLPerf's "no missing turns").
	Valid          bool `json:"valid"`
	Turns          int  `json:"turns"` // requests planned
	CompletedTurns int  `json:"completed_turns"`
	MissingTurns   int  `json:"missing_turns"`
	Conversations  int  `json:"conversations"`
	Interrupted    bool `json:"interrupted,omitempty"`

	// Token figures over the completed requests. PromptTokens and
	// OutputTokens are the client-side counts (the model's template and
	// tokenizer) when a tokenizer was given, else the server's; TokenSource
	// says which. The server's own counts are beside them.
	TokenSource             string `json:"token_source"`
	PromptTokens            int64  `json:"prompt_tokens"`
	CachedPromptTokens      int64  `json:"cached_prompt_tokens"`
	IdealCachedPromptTokens int64  `json:"ideal_cached_prompt_tokens"`
	OutputTokens            int64  `json:"output_tokens"`
	ServerPromptTokens      int64  `json:"server_prompt_tokens"`
	ServerOutputTokens      int64  `json:"server_output_tokens"`
	// CachedReported is false when the server gave no
	// usage.prompt_tokens_details.cached_tokens for some request.
	CachedReported   bool    `json:"cached_reported"`
	CachedRatio      float64 `json:"cached_ratio"`       // cached / server prompt tokens
	IdealCachedRatio float64 `json:"ideal_cached_ratio"` // ideal cached / client prompt tokens

	DurationS  float64 `json:"duration_s"`
	OutputTokS float64 `json:"output_tok_s"` // output tokens / wall time of the run

	TTFTmsP50  float64 `json:"ttft_ms_p50"`
	TTFTmsP90  float64 `json:"ttft_ms_p90"`
	TTFTmsP99  float64 `json:"ttft_ms_p99"`
	TTFTmsMean float64 `json:"ttft_ms_mean"`
	TPOTmsP50  float64 `json:"tpot_ms_p50"`
	TPOTmsP90  float64 `json:"tpot_ms_p90"`
	TPOTmsP99  float64 `json:"tpot_ms_p99"`
	TPOTmsMean float64 `json:"tpot_ms_mean"`

	// IoU is the mean inline accuracy over the issued requests whose recorded
	// answer has bash actions (IoUTurns of them); nil when there are none.
	IoU      *float64 `json:"iou"`
	IoUTurns int      `json:"iou_turns"`

	Model              string `json:"model"`
	URL                string `json:"url"`
	Dataset            string `json:"dataset"`
	Concurrency        int    `json:"concurrency"`
	MaxTokensFromTrace bool   `json:"max_tokens_from_trace"`
	Started            string `json:"started"`
}

func summarize(res *Result) Summary {
	cfg := res.Config
	s := Summary{
		Turns:              len(res.Records),
		Interrupted:        res.Interrupted,
		TokenSource:        "server",
		CachedReported:     true,
		DurationS:          res.Duration.Seconds(),
		Model:              cfg.Request.Model,
		URL:                cfg.Client.BaseURL,
		Dataset:            cfg.Trace.Path,
		Concurrency:        cfg.Concurrency,
		MaxTokensFromTrace: cfg.MaxTokensFromTrace,
		Started:            res.Started.UTC().Format(time.RFC3339),
	}
	if cfg.Counter != nil {
		s.TokenSource = "client"
	}
	convs := map[string]bool{}
	var ttft, tpot []float64
	var iouSum float64
	var clientPrompt, clientOutput int64
	for _, r := range res.Records {
		convs[r.ConversationID] = true
		if r.IoU != nil {
			iouSum += *r.IoU
			s.IoUTurns++
		}
		if !r.Completed {
			continue
		}
		s.CompletedTurns++
		clientPrompt += int64(r.PromptTokens)
		clientOutput += int64(r.OutputTokens)
		s.ServerPromptTokens += int64(r.ServerPromptTokens)
		s.ServerOutputTokens += int64(r.ServerOutputTokens)
		s.IdealCachedPromptTokens += int64(r.IdealCachedTokens)
		if r.CachedTokens >= 0 {
			s.CachedPromptTokens += int64(r.CachedTokens)
		} else {
			s.CachedReported = false
		}
		if r.OutputChunks > 0 {
			ttft = append(ttft, r.TTFTms)
		}
		if r.outputTokens() >= 2 {
			tpot = append(tpot, r.TPOTms)
		}
	}
	s.Conversations = len(convs)
	s.MissingTurns = s.Turns - s.CompletedTurns
	s.Valid = s.MissingTurns == 0 && !res.Interrupted
	if cfg.Counter != nil {
		s.PromptTokens, s.OutputTokens = clientPrompt, clientOutput
	} else {
		s.PromptTokens, s.OutputTokens = s.ServerPromptTokens, s.ServerOutputTokens
	}
	if s.ServerPromptTokens > 0 {
		s.CachedRatio = round4(float64(s.CachedPromptTokens) / float64(s.ServerPromptTokens))
	}
	if clientPrompt > 0 {
		s.IdealCachedRatio = round4(float64(s.IdealCachedPromptTokens) / float64(clientPrompt))
	}
	if s.DurationS > 0 {
		s.OutputTokS = round2(float64(s.OutputTokens) / s.DurationS)
	}
	s.DurationS = round2(s.DurationS)
	s.TTFTmsP50, s.TTFTmsP90, s.TTFTmsP99 = percentile(ttft, 50), percentile(ttft, 90), percentile(ttft, 99)
	s.TPOTmsP50, s.TPOTmsP90, s.TPOTmsP99 = percentile(tpot, 50), percentile(tpot, 90), percentile(tpot, 99)
	s.TTFTmsMean, s.TPOTmsMean = mean(ttft), mean(tpot)
	if s.IoUTurns > 0 {
		iou := round4(iouSum / float64(s.IoUTurns))
		s.IoU = &iou
	}
	return s
}

// percentile is numpy's default (linear interpolation between the two
// nearest ranks), rounded to 0.01; 0 for no values.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return round2(s[lo] + (s[hi]-s[lo])*(pos-float64(lo)))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return round2(sum / float64(len(xs)))
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
