package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgellmd/edgellmd/engine/model"
)

// The model, its kernels' worker pool and (on a GPU) its queue serve one
// caller at a time. Each sequence slot runs its generation on its own
// goroutine; the batcher is the one goroutine that touches the model: it
// gathers the forward passes the running sequences ask for and runs them
// as one (model.ForwardMulti), so that a decode step reads the weights
// once for every sequence, and it runs their other model work (state
// commits, the MTP head, snapshots) one at a time between passes.

// gatherWait bounds how long a pass waits for the running sequences that
// have not asked for theirs yet (they are sampling, or doing other work
// between steps) before it runs without them.
const gatherWait = 2 * time.Millisecond

// maxBatchStat is the largest batch size BatchStats counts by itself.
const maxBatchStat = 16

type batcher struct {
	m       model.Model
	reqs    chan *fwdReq
	quit    chan struct{}
	done    chan struct{}
	active  atomic.Int32 // sequences in a generation: their next pass is coming
	free    sync.Pool    // of *fwdReq, with their reply channels: no allocation per pass
	seqs    []model.SeqBatch
	stats   BatchStats
	statsMu chan struct{} // a one-slot lock for stats (read by the metrics)
}

// BatchStats count the forward passes the batcher ran.
type BatchStats struct {
	Passes int64 // forward passes
	// BySize[n-1] counts the passes that served n sequences (the last
	// entry: maxBatchStat or more).
	BySize [maxBatchStat]int64
	// PrefillChunks are the prompt chunks run (each in a pass, possibly
	// beside other sequences' decode steps).
	PrefillChunks int64
}

type fwdReq struct {
	seq     model.SeqBatch
	fn      func() error // exclusive work instead of a pass
	prefill bool
	err     chan error
}

func newBatcher(m model.Model) *batcher {
	b := &batcher{m: m, reqs: make(chan *fwdReq), quit: make(chan struct{}), done: make(chan struct{}), statsMu: make(chan struct{}, 1)}
	go b.run() // owned: close waits for it
	return b
}

func (b *batcher) close() {
	close(b.quit)
	<-b.done
}

// errEngineClosed answers work sent after close.
var errEngineClosed = errors.New("engine: closed")

func (b *batcher) send(seq model.SeqBatch, prefill bool, fn func() error) error {
	r, _ := b.free.Get().(*fwdReq)
	if r == nil {
		r = &fwdReq{err: make(chan error, 1)}
	}
	r.seq, r.prefill, r.fn = seq, prefill, fn
	var err error
	select {
	case b.reqs <- r:
		err = <-r.err
	case <-b.quit:
		err = errEngineClosed
	}
	*r = fwdReq{err: r.err}
	b.free.Put(r)
	return err
}

// pass runs one sequence's forward pass, with those of the others that are
// ready.
func (b *batcher) pass(sb model.SeqBatch, prefill bool) error { return b.send(sb, prefill, nil) }

// do runs fn on the batcher's goroutine, between passes.
func (b *batcher) do(fn func() error) error { return b.send(model.SeqBatch{}, false, fn) }

func (b *batcher) run() {
	defer close(b.done)
	var pending []*fwdReq
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case r := <-b.reqs:
			if r.fn != nil {
				r.err <- r.fn()
				continue
			}
			pending = append(pending, r)
		case <-b.quit:
			return
		}
		// Wait for the other running sequences' passes, a little.
		timer.Reset(gatherWait)
	gather:
		for len(pending) < int(b.active.Load()) {
			select {
			case r := <-b.reqs:
				if r.fn != nil {
					r.err <- r.fn()
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
		b.runPass(pending)
		clear(pending)
		pending = pending[:0]
	}
}

// runPass runs the pending sequences' batches in one pass. A sequence
// whose batch is refused (nothing of the pass ran) gets its error and the
// others run without it.
func (b *batcher) runPass(reqs []*fwdReq) {
	for len(reqs) > 0 {
		b.seqs = b.seqs[:0]
		for _, r := range reqs {
			b.seqs = append(b.seqs, r.seq)
		}
		err := model.ForwardMulti(b.m, b.seqs)
		var se *model.SeqError
		if errors.As(err, &se) && se.Index >= 0 && se.Index < len(reqs) && len(reqs) > 1 {
			reqs[se.Index].err <- se.Err
			reqs = append(reqs[:se.Index], reqs[se.Index+1:]...)
			continue
		}
		if se != nil {
			err = se.Err
		}
		b.count(reqs)
		for _, r := range reqs {
			r.err <- err
		}
		clear(b.seqs) // drop the states and buffers until the next pass
		return
	}
}

func (b *batcher) count(reqs []*fwdReq) {
	b.statsMu <- struct{}{}
	b.stats.Passes++
	b.stats.BySize[min(len(reqs), maxBatchStat)-1]++
	for _, r := range reqs {
		if r.prefill {
			b.stats.PrefillChunks++
		}
	}
	<-b.statsMu
}

func (b *batcher) snapshotStats() BatchStats {
	b.statsMu <- struct{}{}
	defer func() { <-b.statsMu }()
	return b.stats
}

// batchedModel is the model as a sequence's goroutine sees it: every call
// that runs the model goes through the batcher. The speculative decoder
// takes it as its target.
type batchedModel struct {
	model.Model
	b *batcher
}

func (p batchedModel) Forward(st model.State, bt model.Batch, logits []float32) error {
	return p.ForwardHidden(st, bt, logits, nil)
}

func (p batchedModel) ForwardHidden(st model.State, bt model.Batch, logits, hidden []float32) error {
	return p.b.pass(model.SeqBatch{State: rawState(st), Batch: bt, Logits: logits, Hidden: hidden}, false)
}

func (p batchedModel) NewState(n int) model.State {
	var st model.State
	_ = p.b.do(func() error { st = p.Model.NewState(n); return nil })
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
	b *batcher
}

func (h batchedHead) NewState(n int) model.State {
	var st model.State
	_ = h.b.do(func() error { st = h.MTPHead.NewState(n); return nil })
	return st
}

func (h batchedHead) Forward(st model.State, bt model.Batch, hidden, logits, hiddenOut []float32) error {
	return h.b.do(func() error { return h.MTPHead.Forward(st, bt, hidden, logits, hiddenOut) })
}

// seqState is a sequence's state as its goroutine hands it to the
// speculative decoder: Commit (which replays recurrent steps on the
// model's pool) goes through the batcher.
type seqState struct {
	model.State
	b *batcher
}

func (s seqState) Commit(path []int) error {
	return s.b.do(func() error { return s.State.Commit(path) })
}

// rawState is the model's own state inside a seqState.
func rawState(st model.State) model.State {
	if s, ok := st.(seqState); ok {
		return s.State
	}
	return st
}
