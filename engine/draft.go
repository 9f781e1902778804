package engine

import (
	"context"
	"time"

	"github.com/edgellmd/edgellmd/engine/logits"
	"github.com/edgellmd/edgellmd/engine/speculative"
)

// SetDraft sets the speculative decoding parameters used from the next
// request on; a generation under way keeps the ones it started with. It may
// be called from any goroutine.
func (e *Engine) SetDraft(cfg speculative.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.CheckModel(e.model.MTP() != nil); err != nil {
		return err
	}
	c := cfg.Clone()
	if c.Mode == "" {
		c.Mode = "off" // the zero value, as Draft and the status page say it
	}
	e.draft.Store(&c)
	return nil
}

// Draft returns the speculative decoding parameters in force.
func (e *Engine) Draft() speculative.Config {
	if c := e.draft.Load(); c != nil {
		return *c
	}
	return speculative.Config{Mode: "off"}
}

// drafter returns the speculative decoder set to cfg, made on first use;
// nil when drafting is off or cfg cannot run on this model (logged).
func (q *seq) drafter(cfg speculative.Config) *speculative.Decoder {
	if !cfg.Enabled() {
		return nil
	}
	if q.spec != nil && q.specCfg.Equal(cfg) {
		return q.spec
	}
	var err error
	if q.spec == nil {
		q.spec, err = speculative.New(q.e.model, cfg, q.e.ctxLen)
	} else {
		err = q.spec.SetConfig(cfg)
	}
	if err != nil {
		q.e.log.Error().Err(err).Str("draft", cfg.String()).Msg("speculative decoding off for this request: the draft parameters cannot run on this model")
		q.specCfg = speculative.Config{}
		return nil
	}
	q.specCfg = cfg
	return q.spec
}

// decodeSpeculative is Generate's decoding loop with a drafter, after the
// first output token (the last of res.Tokens, not yet run through the
// model): each step verifies a draft tree in one forward pass and emits
// the accepted tokens and the model's own next one.
func (q *seq) decodeSpeculative(ctx context.Context, dec *speculative.Decoder, req Request, sh *logits.Shaper, maxTokens int, res *Result, emit func(Token) error) error {
	e := q.e
	st := e.bat.State(q.state) // its Commit goes through the batcher
	var shape speculative.Shaper
	if sh != nil {
		shape = sh
	}
	var rows [][]float32
	pending := res.Tokens[len(res.Tokens)-1]
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// With this room a step never emits more than the tokens left.
		room := min(e.ctxLen-q.state.Len(), maxTokens-len(res.Tokens))
		toks, err := dec.StepShaped(st, pending, room, q.sampler, shape)
		e.lastStep.Store(time.Now().UnixNano())
		if err != nil {
			return err
		}
		rows = dec.Rows(rows)
		for i, id := range toks {
			if done, err := e.emitToken(req, res, sh, id, rows[i], maxTokens, emit); done || err != nil {
				return err
			}
		}
		pending = toks[len(toks)-1]
	}
}
