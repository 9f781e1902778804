package engine

import (
	"context"
	"runtime"
	"slices"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/slots"
	"github.com/edgellmd/edgellmd/engine/speculative"
)

// seq is one sequence slot: its state and what a generation on it keeps.
// A slot is used by one generation (goroutine) at a time; the pool
// (engine/slots) decides which, and when its state is let go.
type seq struct {
	e    *Engine
	slot *slots.Slot
	// state is the model's own state (the batcher's State wraps it for the
	// decoder), made for the request that needed it; nil until a request
	// runs, and again once the pool let it go (slots.Config.Drop, with the
	// pool's lock held while the slot is idle).
	state   model.State
	logits  []float32
	sampler *sample.Sampler
	spec    *speculative.Decoder // made on first use; kept for its suffix memory
	specCfg speculative.Config   // what spec is set to
	hidden  []float32            // the last prompt token's hidden state, for the MTP drafter
	top     [1]int32             // a greedy step's token (batch.MultiGreedy)
}

// ErrMemory is what a request whose sequence state alone is larger than
// the engine's memory budget fails with (as a *MemoryError): it can never
// run; a shorter prompt or a smaller max_tokens can.
var ErrMemory = slots.ErrMemory

// MemoryError says which request could never fit the memory budget and by
// how much; it is ErrMemory and ErrContextFull.
type MemoryError = slots.MemoryError

// MemoryStats are the sequence memory's figures.
type MemoryStats = slots.MemoryStats

// newSlots makes the engine's sequence slots and their pool.
func (e *Engine) newSlots(n int, budget int64, made int) {
	for range n {
		e.slots = append(e.slots, &seq{e: e})
	}
	e.seqs = slots.New(slots.Config{Slots: n, ContextLen: e.ctxLen, Size: e.size, Budget: budget, Made: made,
		MTPBytes: e.mtpBytes, Drop: func(i int) bool {
			held := e.slots[i].state != nil
			e.slots[i].state = nil
			return held
		}})
	for i, q := range e.slots {
		q.slot = e.seqs.Slot(i)
	}
}

// sequence returns the slot's state, emptied: made for the tokens the pool
// gave the slot when it has none (the pool let the old one go).
func (q *seq) sequence() model.State {
	if q.state == nil {
		e := q.e
		n, collect := e.seqs.Prepare(q.slot)
		if collect {
			// Without it the heap would hold both states until the
			// collector's goal (twice the live heap by default) is reached.
			runtime.GC()
		}
		q.state = e.model.NewState(n)
		if q.logits == nil {
			q.logits = make([]float32, e.model.Hyper().Vocab)
		}
	}
	q.state.Reset()
	return q.state
}

// acquire takes a free sequence slot with a state of the whole context
// (for benchmarks), waiting as admit does.
func (e *Engine) acquire(ctx context.Context) (*seq, error) {
	return e.admit(ctx, Request{Prompt: []int32{0}})
}

// admit takes a free sequence slot whose state for req fits the memory
// budget, waiting while every slot runs a generation or memory is short.
// The scheduler does not wait here: it picks what to start from its own
// queue (Scheduler.dispatch).
func (e *Engine) admit(ctx context.Context, req Request) (*seq, error) {
	s, err := e.seqs.Acquire(ctx, e.needTokens(req), len(req.Prompt))
	if err != nil {
		return nil, err
	}
	return e.slots[s.Index], nil
}

func (e *Engine) release(q *seq) { e.seqs.Release(q.slot, q.spec != nil) }

// MaxSequences is how many generations the engine runs at once.
func (e *Engine) MaxSequences() int { return len(e.slots) }

// MemoryStats returns the sequence memory's figures.
func (e *Engine) MemoryStats() MemoryStats { return e.seqs.Stats() }

// SequenceBytes is the memory a sequence state for req takes: KV rows for
// the tokens it may hold (prompt + max_tokens, capped at the context) and
// the recurrent state.
func (e *Engine) SequenceBytes(req Request) int64 { return e.size.Bytes(e.seqTokens(req)) }

// seqTokens are the tokens a sequence for req may hold: the prompt and its
// output, at most the context. A generation never commits its last output
// token, and a verify tree never reaches past maxTokens (draft.go's
// room), so this is enough for both.
func (e *Engine) seqTokens(req Request) int {
	n := e.ctxLen
	if req.MaxTokens > 0 {
		n = min(n, len(req.Prompt)+req.MaxTokens)
	}
	return max(n, 1)
}

// needTokens is seqTokens as the pool takes it: 1 for a request that
// generate refuses at once (ErrContextFull or empty), which has no memory
// to wait for.
func (e *Engine) needTokens(req Request) int {
	if len(req.Prompt) >= e.ctxLen || len(req.Prompt) == 0 {
		return 1
	}
	return e.seqTokens(req)
}

// mtpBytes is the MTP drafter's state when the draft parameters in force
// make one (a slot makes it on first use and keeps it), else 0.
func (e *Engine) mtpBytes() int64 {
	d := e.Draft()
	if e.size.MTPPerToken == 0 || e.model.MTP() == nil || !d.Enabled() || !slices.Contains(d.Drafters, "mtp") {
		return 0
	}
	return e.size.MTPPerToken * int64(slots.MTPStateTokens(e.ctxLen))
}

// weightBytes are the model's tensors as mapped from the file.
func (e *Engine) weightBytes() int64 {
	var n int64
	for i := range e.file.Tensors {
		n += e.file.Tensors[i].Size
	}
	return n
}
