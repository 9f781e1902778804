package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgellmd/edgellmd/engine/batch"
	"github.com/edgellmd/edgellmd/engine/logits"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/slots"
	"github.com/edgellmd/edgellmd/engine/speculative"
)

// Request is one generation.
type Request struct {
	Prompt    []int32 // prompt tokens, BOS included where the model wants it
	MaxTokens int     // output tokens at most; <= 0 means until EOS or the context is full
	Sample    sample.Params
	IgnoreEOS bool // keep generating past end-of-generation tokens
	// PublishAt are prompt positions (token counts, 0 < p <= len(Prompt))
	// where the prefill stops to publish a snapshot to the prefix cache: the
	// stable boundary of a chat prompt, where the next turn's prompt still
	// agrees with this one. Output tokens are never published.
	PublishAt []int
	// Constraint, when not nil, limits the output to a grammar's language.
	Constraint *Constraint
	// Penalties shape the logits by what the sequence holds (penalties,
	// logit bias).
	Penalties sample.Penalties
	// Logprobs asks for each output token's log-probability, with the
	// TopLogprobs (0-20) most likely alternatives.
	Logprobs    bool
	TopLogprobs int
	// OnPrefix, when set, is called once, on the engine worker's
	// goroutine, as soon as the prompt's cached prefix is restored: before
	// the prefill and before the first token, with the prompt tokens
	// restored from the prefix cache (what Result.CachedTokens will say).
	// It is a callback, not a field of the first Token, because an answer
	// may have no token to carry it (the model ends its turn at once) and
	// an API's usage may be due before the prefill's seconds have passed.
	OnPrefix func(cached int)
}

// MaxTopLogprobs bounds Request.TopLogprobs (OpenAI's limit).
const MaxTopLogprobs = 20

// Token is one generated token as it streams out.
type Token struct {
	ID    int32
	Piece []byte // raw bytes of the token; may be part of a UTF-8 character
	// Logprob and Top, when the request asks for them: the token's
	// log-probability in the distribution it was drawn from (the logits
	// after grammar mask and penalties, at the request's temperature, 1
	// when greedy), and the most likely tokens of that distribution.
	Logprob float32
	Top     []TokenLogprob
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob = logits.TokenLogprob

// Constraint limits a generation's output to a grammar's language.
type Constraint = logits.Constraint

// Result summarises a finished generation.
type Result struct {
	Prompt       []int32
	Tokens       []int32
	FinishReason string // "stop" (end-of-generation token) or "length"
	CachedTokens int    // prompt tokens restored from the prefix cache, not prefilled
	Draft        string // the draft parameters used: "off", or e.g. "tree 8/2/16 mtp,suffix"
	// Spec counts the decoding: Spec.TargetSteps are the model's forward
	// passes while decoding (one per output token after the first without
	// drafting, fewer with it), the rest the drafting's figures (zero
	// without it).
	Spec        speculative.Stats
	PrefillTime time.Duration
	DecodeTime  time.Duration // from the first output token to the last
}

// ErrContextFull is returned when the prompt does not fit the context.
var ErrContextFull = slots.ErrContextFull

// Generate runs req, calling emit for every output token as it is decoded.
// An error from emit or ctx stops the generation and is returned, except
// ErrStop, which ends it with finish reason "stop".
func (e *Engine) Generate(ctx context.Context, req Request, emit func(Token) error) (Result, error) {
	q, err := e.admit(ctx, req)
	if err != nil {
		return Result{Prompt: req.Prompt, Draft: "off"}, err
	}
	defer e.release(q)
	return e.generateOn(ctx, q, req, emit)
}

// generateOn is Generate on slot q, which the pool gave req; the
// caller releases q.
func (e *Engine) generateOn(ctx context.Context, q *seq, req Request, emit func(Token) error) (Result, error) {
	e.bat.Begin()
	defer e.bat.End()
	return q.generate(ctx, req, emit)
}

// generate is Generate on slot q.
func (q *seq) generate(ctx context.Context, req Request, emit func(Token) error) (res Result, err error) {
	e := q.e
	res = Result{Prompt: req.Prompt, Draft: "off"}
	if len(req.Prompt) == 0 {
		return res, errors.New("empty prompt")
	}
	if len(req.Prompt) >= e.ctxLen {
		return res, fmt.Errorf("%w: %d prompt tokens, context %d", ErrContextFull, len(req.Prompt), e.ctxLen)
	}
	vocab := e.model.Hyper().Vocab
	for _, t := range req.Prompt {
		if t < 0 || int(t) >= vocab {
			return res, fmt.Errorf("prompt token %d is outside the vocabulary of %d tokens", t, vocab)
		}
	}
	if err := req.Sample.Validate(); err != nil {
		return res, err
	}
	if err := req.Penalties.Validate(vocab); err != nil {
		return res, err
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs {
		return res, fmt.Errorf("top_logprobs must be in [0, %d], got %d", MaxTopLogprobs, req.TopLogprobs)
	}
	sh := e.shapes.Shaper(req.Constraint, req.Penalties, req.Prompt)
	st := q.sequence()
	q.sampler = sample.New(req.Sample) // seeded per request: same seed, same output
	maxTokens := req.MaxTokens
	if room := e.ctxLen - len(req.Prompt); maxTokens <= 0 || maxTokens > room {
		maxTokens = room
	}

	draft := e.Draft()
	dec := q.drafter(draft)
	if dec != nil {
		res.Draft = draft.String()
	}

	t0 := time.Now()
	res.CachedTokens = q.restore(st, req.Prompt)
	if req.OnPrefix != nil {
		req.OnPrefix(res.CachedTokens)
	}
	var hidden []float32
	if dec != nil && e.model.MTP() != nil {
		q.hidden = growF32(q.hidden, e.model.Hyper().Embd)
		hidden = q.hidden
	}
	if err := q.prefill(ctx, req.Prompt, req.PublishAt, hidden); err != nil {
		return res, err
	}
	res.PrefillTime = time.Since(t0)
	res.FinishReason = "length"
	if dec != nil {
		dec.Begin(req.Prompt, hidden)
	}
	var tFirst time.Time
	defer func() {
		if !tFirst.IsZero() {
			res.DecodeTime = time.Since(tFirst)
		}
	}()
	one := make([]int32, 1)
	// greedy steps pick their token on the device, unless the logits are
	// needed on the host
	greedy := e.bat.Greedy() && req.Sample.Greedy() && sh == nil && !req.Logprobs
	next := int32(-1) // the token a greedy step already picked on the device
	for len(res.Tokens) < maxTokens {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		id := next
		var row []float32
		if id < 0 {
			if sh != nil {
				sh.Shape(q.logits)
			}
			id = q.sampler.Pick(q.logits)
			row = q.logits
		}
		if len(res.Tokens) == 0 {
			tFirst = time.Now()
		}
		if done, err := e.emitToken(req, &res, sh, id, row, maxTokens, emit); done || err != nil {
			return res, err
		}
		if dec != nil {
			err := q.decodeSpeculative(ctx, dec, req, sh, maxTokens, &res, emit)
			res.Spec = dec.Stats()
			return res, err
		}
		one[0] = id
		if greedy {
			top := q.top[:1]
			err := e.bat.GreedyPass(model.SeqBatch{State: q.state, Batch: model.ChainBatch(one, q.state.Len(), false)}, top)
			e.lastStep.Store(time.Now().UnixNano())
			if err != nil {
				return res, err
			}
			next = top[0]
		} else if err := q.decode(one); err != nil {
			return res, err
		}
		res.Spec.TargetSteps++
	}
	return res, nil
}

// emitToken appends id to the result and hands it to emit; done reports
// that the generation ended (an end-of-generation token, ErrStop from
// emit, or maxTokens reached).
func (e *Engine) emitToken(req Request, res *Result, sh *logits.Shaper, id int32, row []float32, maxTokens int, emit func(Token) error) (done bool, err error) {
	res.Tokens = append(res.Tokens, id)
	if !req.IgnoreEOS && e.tok.IsEOG(id) {
		res.FinishReason = "stop"
		return true, nil
	}
	if sh != nil {
		if err := sh.Accept(id); err != nil {
			return true, fmt.Errorf("constrained decoding: %w", err)
		}
	}
	tok := Token{ID: id, Piece: e.tok.Piece(id)}
	if req.Logprobs && row != nil {
		temp := 1.0 // a greedy pick's distribution
		if !req.Sample.Greedy() {
			temp = float64(req.Sample.Temperature)
		}
		tok.Logprob, tok.Top = e.shapes.Logprobs(row, temp, id, req.TopLogprobs)
	}
	if err := emit(tok); err != nil {
		if errors.Is(err, ErrStop) {
			res.FinishReason = "stop"
			return true, nil
		}
		return true, err
	}
	if sh != nil && sh.Finished() {
		res.FinishReason = "stop" // the grammar's sentence is complete
		return true, nil
	}
	return len(res.Tokens) >= maxTokens, nil
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// restore puts into st the longest cached prefix of prompt that leaves at
// least one token to prefill (its logits start the decoding) and returns
// its length; 0 when the cache is off or holds none.
func (q *seq) restore(st model.State, prompt []int32) int {
	e := q.e
	if e.cache == nil {
		return 0
	}
	sn, ok := e.cache.Lookup(prompt, len(prompt)-1)
	if !ok {
		return 0
	}
	if err := e.bat.Do(func() error { return st.Restore(sn) }); err != nil {
		e.log.Error().Err(err).Int("tokens", sn.Len).Msg("prefix cache: restore failed; prefilling the whole prompt")
		st.Reset()
		return 0
	}
	return sn.Len
}

// prefill runs prompt from the state's length on, in chunks of at most
// prefillChunk tokens (fewer where the batcher's budget cuts them) that
// also end at each publish position, where it publishes a snapshot to the
// prefix cache. hidden, when not nil, receives the last prompt token's
// final hidden state (for the MTP drafter).
func (q *seq) prefill(ctx context.Context, prompt []int32, publishAt []int, hidden []float32) error {
	e := q.e
	var stops []int
	if e.cache != nil {
		for _, p := range publishAt {
			if p > q.state.Len() && p <= len(prompt) {
				stops = append(stops, p)
			}
		}
		slices.Sort(stops)
	}
	// The chunks are those of prefillChunk tokens from the state's length
	// on, ending at the publish positions too (as without a budget: output
	// does not depend on the other sequences); the batcher may run one in
	// pieces (its per-pass budget beside other sequences' decode steps) of
	// batch.MinPrefillChunk tokens or more, each sent with the whole chunk's
	// length (model.Batch.Chunk), so that its tokens are computed as in
	// the whole chunk.
	refStart, refEnd := q.state.Len(), q.state.Len()
	for start := q.state.Len(); start < len(prompt); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if start == refEnd {
			refStart, refEnd = start, min(start+e.prefillChunk, len(prompt))
			if len(stops) > 0 && stops[0] < refEnd {
				refEnd = stops[0]
			}
		}
		var h []float32
		if refEnd == len(prompt) {
			h = hidden
		}
		b := model.ChainBatch(prompt[start:refEnd], start, false)
		b.Chunk = refEnd - refStart
		ran, err := e.bat.Prefill(model.SeqBatch{State: q.state, Batch: b, Logits: q.logits, Hidden: h}, batch.MinPrefillChunk)
		if err != nil {
			return err
		}
		end := start + ran
		e.lastStep.Store(time.Now().UnixNano())
		publish := len(stops) > 0 && stops[0] == end
		for len(stops) > 0 && stops[0] <= end {
			stops = stops[1:]
		}
		if publish {
			if err := e.bat.Do(func() error { _, err := e.cache.Publish(prompt[:end], q.state); return err }); err != nil {
				e.log.Error().Err(err).Int("tokens", end).Msg("prefix cache: publish failed")
			}
		}
		start = end
	}
	return nil
}

// decode runs one token (one[0]) after the sequence and leaves its logits.
func (q *seq) decode(one []int32) error {
	err := q.e.model.Forward(q.state, model.ChainBatch(one, q.state.Len(), false), q.logits)
	q.e.lastStep.Store(time.Now().UnixNano())
	return err
}
