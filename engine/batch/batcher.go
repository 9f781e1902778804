package batch

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/model"
)

// gatherWait bounds how long a pass waits for the running sequences that
// have not asked for theirs yet (they are sampling, or doing other work
// between steps) before it runs without them.
const gatherWait = 2 * time.Millisecond

// MaxStatSize is the largest batch size Stats counts by itself.
const MaxStatSize = 16

type Batcher struct {
	m  model.Model
	mg MultiGreedy // m, when it picks greedy tokens on the device
	// slowdown is Options.DecodeSlowdown (0: no budget); cost predicts
	// passes for it.
	slowdown            float64
	cost                *passCost
	credit              float64   // seconds of prompt work the passes a chunk sat out saved for it (budget)
	keep                []*fwdReq // budget's scratch: the requests a pass runs, and those it holds back
	held                []*fwdReq
	reqs                chan *fwdReq
	quit                chan struct{}
	done                chan struct{}
	active              atomic.Int32 // sequences in a generation: their next pass is coming
	free                sync.Pool    // of *fwdReq, with their reply channels: no allocation per pass
	seqs                []model.SeqBatch
	tops                [][]int32
	forwardFn, greedyFn func() error // forward and greedy, bound once
	stats               Stats
	statsMu             chan struct{} // a one-slot lock for stats (read by the metrics)
	// broken is the panic that broke the engine (broken.go): set once, by
	// guard; from then on every request is answered with it.
	broken atomic.Pointer[PassPanic]
	// hook, when set (Options.Hook), runs before each guarded call.
	hook func()
	log  zerolog.Logger
}

// Stats count the forward passes the batcher ran.
type Stats struct {
	Passes int64 // forward passes
	// BySize[n-1] counts the passes that served n sequences (the last
	// entry: MaxStatSize or more).
	BySize [MaxStatSize]int64
	// PrefillChunks are the prompt chunks run (each in a pass, possibly
	// beside other sequences' decode steps), PrefillTokens their tokens;
	// BudgetedChunks those the per-pass token budget cut short, HeldChunks
	// the passes a chunk sat out for it.
	PrefillChunks  int64
	PrefillTokens  int64
	BudgetedChunks int64
	HeldChunks     int64
}

type fwdReq struct {
	seq     model.SeqBatch
	top     []int32      // a greedy step's tokens, picked on the device (MultiGreedy); nil: logits
	fn      func() error // exclusive work instead of a pass
	prefill bool
	floor   int // a prompt chunk's smallest piece (MinPrefillChunk)
	ran     int // the tokens of seq that ran (a prompt chunk may be cut)
	err     chan error
}

// Options configure a Batcher.
type Options struct {
	// Slowdown bounds a pass that carries a prompt chunk beside other
	// sequences' decode steps to this multiple of a decode-only pass
	// (engine.Options.DecodeSlowdown); <= 1: no budget, chunks run whole.
	Slowdown float64
	// KeyCost is what attending to one key costs against a prompt token's
	// matrix products (KeyCost(hp, f)).
	KeyCost float64
	Log     zerolog.Logger
	// Hook, when set, is called on the batcher's goroutine before each
	// forward pass and each other piece of model work it runs, where a
	// panic is contained (broken.go): tests inject failures with it.
	Hook func()
}

// New starts the batcher's goroutine for m; Close stops it.
func New(m model.Model, o Options) *Batcher {
	slowdown := o.Slowdown
	if slowdown <= 1 {
		slowdown = 0
	}
	mg, _ := m.(MultiGreedy)
	b := &Batcher{m: m, mg: mg, slowdown: slowdown, cost: newPassCost(o.KeyCost), log: o.Log, hook: o.Hook,
		reqs: make(chan *fwdReq), quit: make(chan struct{}), done: make(chan struct{}), statsMu: make(chan struct{}, 1)}
	b.forwardFn, b.greedyFn = b.forward, b.greedy
	go b.run() // owned: Close waits for it
	return b
}

// MultiGreedy is a model whose multi-sequence pass can take greedy decode
// steps picking the tokens where the logits are (engine/gpu: argmax on
// the device, so a step reads back one token a sequence, not a vocabulary
// of logits; sample.Argmax's tie rule): top[i] receives sequence i's
// tokens, or is nil for a sequence that wants its logits in
// seqs[i].Logits.
type MultiGreedy interface {
	ForwardMultiGreedy(seqs []model.SeqBatch, top [][]int32) error
}

// Greedy reports whether the model picks greedy tokens on the device
// (MultiGreedy): GreedyPass may be used.
func (b *Batcher) Greedy() bool { return b.mg != nil }

// Begin and End bracket a sequence's generation: while it runs, a pass
// waits a little (gatherWait) for its next step before it runs without it.
func (b *Batcher) Begin() { b.active.Add(1) }
func (b *Batcher) End()   { b.active.Add(-1) }

// Close stops the batcher's goroutine; work sent after it fails.
func (b *Batcher) Close() {
	close(b.quit)
	<-b.done
}

// errEngineClosed answers work sent after close.
var errEngineClosed = errors.New("engine: closed")

func (b *Batcher) send(seq model.SeqBatch, top []int32, prefill bool, floor int, fn func() error) (ran int, err error) {
	r, _ := b.free.Get().(*fwdReq)
	if r == nil {
		r = &fwdReq{err: make(chan error, 1)}
	}
	if p := b.broken.Load(); p != nil {
		return 0, p
	}
	r.seq, r.top, r.prefill, r.floor, r.fn, r.ran = seq, top, prefill, floor, fn, len(seq.Batch.Tokens)
	select {
	case b.reqs <- r:
		err = <-r.err
		ran = r.ran
	case <-b.quit:
		err = errEngineClosed
	}
	*r = fwdReq{err: r.err}
	b.free.Put(r)
	return ran, err
}

// Pass runs one sequence's forward pass, with those of the others that are
// ready.
func (b *Batcher) Pass(sb model.SeqBatch) error {
	_, err := b.send(sb, nil, false, 0, nil)
	return err
}

// GreedyPass is Pass for a greedy step on a model that picks the tokens on
// the device (b.mg): top receives the most likely token of each row of sb
// that wants logits, and sb.Logits is not used.
func (b *Batcher) GreedyPass(sb model.SeqBatch, top []int32) error {
	_, err := b.send(sb, top, false, 0, nil)
	return err
}

// Prefill runs a prompt chunk (a chain) in a pass, with the others' steps
// that are ready, and returns how many of its tokens ran: its first ones,
// all of them unless the pass's token budget cut the chunk, into pieces of
// floor tokens at least (the one that ran and the rest).
func (b *Batcher) Prefill(sb model.SeqBatch, floor int) (ran int, err error) {
	return b.send(sb, nil, true, floor, nil)
}

// Do runs fn on the batcher's goroutine, between passes.
func (b *Batcher) Do(fn func() error) error {
	_, err := b.send(model.SeqBatch{}, nil, false, 0, fn)
	return err
}

func (b *Batcher) run() {
	defer close(b.done)
	var pending []*fwdReq
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if len(pending) == 0 { // else a prompt chunk held back from the last pass
			select {
			case r := <-b.reqs:
				if r.fn != nil {
					r.err <- b.guard(r.fn)
					continue
				}
				pending = append(pending, r)
			case <-b.quit:
				return
			}
		}
		// Wait for the other running sequences' passes, a little.
		timer.Reset(gatherWait)
	gather:
		for len(pending) < int(b.active.Load()) {
			select {
			case r := <-b.reqs:
				if r.fn != nil {
					r.err <- b.guard(r.fn)
					continue
				}
				pending = append(pending, r)
			case <-timer.C:
				break gather
			case <-b.quit:
				for _, r := range pending {
					r.err <- errEngineClosed
				}
				return
			}
		}
		timer.Stop()
		held := b.runPass(pending)
		clear(pending)
		pending = append(pending[:0], held...)
	}
}

// budget cuts the prompt chunks of a pass while other sequences decode
// (the pass's own, or running ones that missed it: their next step waits
// for this pass all the same) to what the cost model says keeps the pass
// within slowdown times a decode-only pass; a cut leaves pieces of at
// least the request's floor, the one that runs and the rest.
//
// When even the smallest piece costs more than a pass may add (on a CPU:
// a few tokens deep in a long prompt, whose attention is long), the
// chunk sits out passes of the others' decode steps, each adding its
// allowance to credit, until the allowance of this pass and the credit
// cover the piece: the decoding sequences' mean time per token stays
// within slowdown, their slowest steps do not. Before any decode-only
// pass was measured the chunks sit one pass out (it measures one).
// Chunks held back are returned, the rest of reqs kept in place.
func (b *Batcher) budget(reqs []*fwdReq) (run, held []*fwdReq) {
	prefills := 0
	for _, r := range reqs {
		if r.prefill {
			prefills++
		}
	}
	decoders := max(len(reqs)-prefills, int(b.active.Load())-prefills)
	if b.slowdown == 0 || prefills == 0 || decoders <= 0 {
		b.credit = 0
		return reqs, nil
	}
	held = b.held[:0]
	canHold := len(reqs) > prefills // the pass has decode steps to run without the chunks
	fixed := b.cost.fixed(decoders)
	allow := (b.slowdown - 1) * fixed
	left := allow + b.credit
	for _, r := range reqs {
		if !r.prefill {
			continue
		}
		bt := &r.seq.Batch
		n, pos := len(bt.Tokens), 0
		if n > 0 {
			pos = int(bt.Pos[0])
		}
		k := b.cost.chunk(n, pos, max(r.floor, 1), left)
		cost, known := b.cost.extra(k, pos)
		if canHold && (fixed == 0 || known && cost > left) {
			held = append(held, r)
			b.held = held
			continue
		}
		if k < n {
			bt.Tokens, bt.Pos, bt.Parent = bt.Tokens[:k], bt.Pos[:k], bt.Parent[:k]
			r.ran = k
			b.stats.BudgetedChunks++ // the batcher's goroutine; count() takes the lock for readers
		}
		left -= cost
	}
	if len(held) == 0 {
		b.credit = 0 // what a piece left unused is not saved: the pass took less
		return reqs, nil
	}
	b.credit = max(left, 0)
	b.stats.HeldChunks += int64(len(held))
	run = b.keep[:0]
	for _, r := range reqs {
		if !slices.Contains(held, r) {
			run = append(run, r)
		}
	}
	b.keep = run
	return run, held
}

// runPass runs the pending sequences' batches in one pass and returns the
// prompt chunks held back for the next one (budget). A sequence whose
// batch is refused (nothing of the pass ran) gets its error and the others
// run without it.
func (b *Batcher) runPass(reqs []*fwdReq) (held []*fwdReq) {
	b.statsMu <- struct{}{}
	reqs, held = b.budget(reqs)
	<-b.statsMu
	for len(reqs) > 0 {
		b.seqs, b.tops = b.seqs[:0], b.tops[:0]
		tokens, keys, prefills, greedy := 0, 0.0, 0, false
		for _, r := range reqs {
			b.seqs = append(b.seqs, r.seq)
			b.tops = append(b.tops, r.top)
			greedy = greedy || r.top != nil
			if r.prefill && len(r.seq.Batch.Tokens) > 0 {
				prefills++
				tokens += len(r.seq.Batch.Tokens)
				keys += chunkKeys(len(r.seq.Batch.Tokens), int(r.seq.Batch.Pos[0]))
			}
		}
		t0 := time.Now()
		var err error
		if greedy {
			err = b.guard(b.greedyFn)
		} else {
			err = b.guard(b.forwardFn)
		}
		el := time.Since(t0)
		var se *model.SeqError
		if errors.As(err, &se) && se.Index >= 0 && se.Index < len(reqs) && len(reqs) > 1 {
			reqs[se.Index].err <- se.Err
			reqs = append(reqs[:se.Index], reqs[se.Index+1:]...)
			continue
		}
		if se != nil {
			err = se.Err
		}
		if err == nil {
			b.cost.observe(len(reqs)-prefills, tokens, keys, el)
		}
		b.count(reqs)
		for _, r := range reqs {
			r.err <- err
		}
		clear(b.seqs) // drop the states and buffers until the next pass
		clear(b.tops)
		return held
	}
	return held
}

// forward and greedy run the pass that runPass gathered in b.seqs (and
// b.tops); bound once, as forwardFn and greedyFn, so a pass does not
// allocate a closure.
func (b *Batcher) forward() error { return model.ForwardMulti(b.m, b.seqs) }
func (b *Batcher) greedy() error  { return b.mg.ForwardMultiGreedy(b.seqs, b.tops) }

func (b *Batcher) count(reqs []*fwdReq) {
	b.statsMu <- struct{}{}
	b.stats.Passes++
	b.stats.BySize[min(len(reqs), MaxStatSize)-1]++
	for _, r := range reqs {
		if r.prefill {
			b.stats.PrefillChunks++
			b.stats.PrefillTokens += int64(r.ran)
		}
	}
	<-b.statsMu
}

// Stats returns the counts of the passes run so far.
func (b *Batcher) Stats() Stats {
	b.statsMu <- struct{}{}
	defer func() { <-b.statsMu }()
	return b.stats
}

// Model is the model as a sequence's goroutine sees it (batchedModel).
func (b *Batcher) Model() model.Model { return batchedModel{b.m, b} }

// State is a sequence's state as its goroutine hands it to the speculative
// decoder (seqState).
func (b *Batcher) State(st model.State) model.State { return seqState{st, b} }

// batchedModel is the model as a sequence's goroutine sees it: every call
// that runs the model goes through the batcher. The speculative decoder
// takes it as its target.
type batchedModel struct {
	model.Model
	b *Batcher
}

func (p batchedModel) Forward(st model.State, bt model.Batch, logits []float32) error {
	return p.ForwardHidden(st, bt, logits, nil)
}

func (p batchedModel) ForwardHidden(st model.State, bt model.Batch, logits, hidden []float32) error {
	return p.b.Pass(model.SeqBatch{State: rawState(st), Batch: bt, Logits: logits, Hidden: hidden})
}

func (p batchedModel) NewState(n int) model.State {
	var st model.State
	_ = p.b.Do(func() error { st = p.Model.NewState(n); return nil })
	return st
}

func (p batchedModel) MTP() model.MTPHead {
	h := p.Model.MTP()
	if h == nil {
		return nil
	}
	return batchedHead{h, p.b}
}

// batchedHead is the MTP head through the batcher (one call at a time).
type batchedHead struct {
	model.MTPHead
	b *Batcher
}

func (h batchedHead) NewState(n int) model.State {
	var st model.State
	_ = h.b.Do(func() error { st = h.MTPHead.NewState(n); return nil })
	return st
}

func (h batchedHead) Forward(st model.State, bt model.Batch, hidden, logits, hiddenOut []float32) error {
	return h.b.Do(func() error { return h.MTPHead.Forward(st, bt, hidden, logits, hiddenOut) })
}

// seqState is a sequence's state as its goroutine hands it to the
// speculative decoder: Commit (which replays recurrent steps on the
// model's pool) goes through the batcher.
type seqState struct {
	model.State
	b *Batcher
}

func (s seqState) Commit(path []int) error {
	return s.b.Do(func() error { return s.State.Commit(path) })
}

// rawState is the model's own state inside a seqState.
func rawState(st model.State) model.State {
	if s, ok := st.(seqState); ok {
		return s.State
	}
	return st
}
