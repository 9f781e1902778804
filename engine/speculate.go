package engine

import (
	"context"
	"time"

	"github.com/edgellmd/edgellmd/engine/speculative"
)

// drafter returns the speculative decoder set to cfg, made on first use;
// nil when drafting is off or cfg cannot run on this model (logged).
func (e *Engine) drafter(cfg speculative.Config) *speculative.Decoder {
	if !cfg.Enabled() {
		return nil
	}
	if e.spec != nil && e.specCfg.Equal(cfg) {
		return e.spec
	}
	var err error
	if e.spec == nil {
		e.spec, err = speculative.New(e.model, cfg, e.ctxLen)
	} else {
		err = e.spec.SetConfig(cfg)
	}
	if err != nil {
		e.log.Error().Err(err).Str("draft", cfg.String()).Msg("speculative decoding off for this request: the draft parameters cannot run on this model")
		e.specCfg = speculative.Config{}
		return nil
	}
	e.specCfg = cfg
	return e.spec
}

// decodeSpeculative is Generate's decoding loop with a drafter, after the
// first output token (the last of res.Tokens, not yet run through the
// model): each step verifies a draft tree in one forward pass and emits
// the accepted tokens and the model's own next one.
func (e *Engine) decodeSpeculative(ctx context.Context, dec *speculative.Decoder, req Request, maxTokens int, res *Result, emit func(Token) error) error {
	pending := res.Tokens[len(res.Tokens)-1]
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// With this room a step never emits more than the tokens left.
		room := min(e.ctxLen-e.state.Len(), maxTokens-len(res.Tokens))
		toks, err := dec.Step(e.state, pending, room, e.sampler)
		e.lastStep.Store(time.Now().UnixNano())
		if err != nil {
			return err
		}
		for _, id := range toks {
			if done, err := e.emitToken(req, res, id, maxTokens, emit); done || err != nil {
				return err
			}
		}
		pending = toks[len(toks)-1]
	}
}
