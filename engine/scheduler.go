package engine

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgellmd/edgellmd/engine/slots"
)

// ErrQueueFull is returned by Submit when the queue in front of the engine
// worker holds its maximum of waiting requests.
var ErrQueueFull = errors.New("engine queue is full")

// ErrStopped is returned by Submit after the scheduler has stopped.
var ErrStopped = errors.New("engine is stopping")

// ErrStop, returned by an emit callback, ends the generation normally with
// finish reason "stop" (a stop sequence was seen).
var ErrStop = errors.New("stop")

// Scheduler puts the engine behind a bounded FIFO queue: requests start in
// arrival order, up to the engine's MaxSequences at once (their steps
// share forward passes) and as many as the sequence memory budget holds
// (engine/slots); when the queue is full, Submit fails at once with
// ErrQueueFull rather than letting clients wait without bound. A request
// whose client leaves while it waits (its context ends) leaves the queue
// at once, freeing its place.
//
// Fairness when memory is short: the oldest request that does not fit now
// waits at the head; requests behind it that do fit may start before it
// (a big prompt does not leave the box idle), but at most MaxSequences of
// them while it waits there; after that nothing starts before it. As it
// fits the budget alone (else it failed with ErrMemory at once), it starts
// once enough running sequences end: no request waits forever.
type Scheduler struct {
	eng      *Engine
	depth    int
	ready    chan struct{} // a job was queued or left the queue (buffered: one wake-up waits); a slot's release wakes Run too
	done     chan struct{}
	running  atomic.Int32
	lastBeat atomic.Int64 // unix nanoseconds of the worker's last sign of life
	wg       sync.WaitGroup

	mu      sync.Mutex
	queue   list.List // of *job, oldest first
	stopped bool      // Run has ended: Submit refuses
	// memShort are the queued jobs the last dispatch found short of
	// memory (its share of the pool's requests waiting for memory).
	memShort int
}

type job struct {
	ctx  context.Context
	req  Request
	emit func(Token) error
	res  chan jobResult
	elem *list.Element // in the queue; nil once the worker took it or it left
	// passed counts the requests that started before this one while it
	// waited for memory; short: it did wait for memory (guarded by the
	// scheduler's mu).
	passed int
	short  bool
}

type jobResult struct {
	res Result
	err error
}

// NewScheduler returns a scheduler for e whose queue holds queueDepth
// waiting requests (at least 1). Run must be called to start the worker.
func NewScheduler(e *Engine, queueDepth int) *Scheduler {
	s := &Scheduler{eng: e, depth: max(queueDepth, 1), ready: make(chan struct{}, 1), done: make(chan struct{})}
	s.lastBeat.Store(time.Now().UnixNano())
	return s
}

// Run is the engine worker: it starts queued requests, each on its own
// goroutine and sequence slot, until ctx ends; then it fails the requests
// still queued with ErrStopped and waits for the running ones. The caller
// owns the goroutine that runs it.
func (s *Scheduler) Run(ctx context.Context) {
	defer close(s.done)
	defer s.wg.Wait()
	defer s.stop()
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	for {
		released := s.eng.seqs.Released() // before dispatch: a slot freed meanwhile wakes the select
		s.dispatch()
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			s.lastBeat.Store(time.Now().UnixNano())
		case <-s.ready:
		case <-released:
		}
	}
}

// dispatch starts the queued jobs that get a sequence slot and memory, in
// arrival order but for the fairness rule (Scheduler), and fails those
// that can never fit.
func (s *Scheduler) dispatch() {
	e := s.eng
	s.mu.Lock()
	defer s.mu.Unlock()
	e.seqs.Locked(func(t slots.Txn) {
		var head *job // the oldest job waiting for memory
		short := 0
		for el := s.queue.Front(); el != nil; {
			j, next := el.Value.(*job), el.Next()
			if j.ctx.Err() != nil { // its Submit takes it out
				el = next
				continue
			}
			sl, memShort, err := t.TryAcquire(e.needTokens(j.req), len(j.req.Prompt))
			if sl == nil && err == nil && !memShort {
				break // no slot free: nobody behind starts either
			}
			if memShort {
				if !j.short {
					j.short = true
					t.Waited()
				}
				short++
				if head == nil {
					head = j
				}
				if head.passed >= e.MaxSequences() {
					break
				}
				el = next
				continue
			}
			s.queue.Remove(el)
			j.elem = nil
			if err != nil {
				j.res <- jobResult{res: Result{Prompt: j.req.Prompt, Draft: "off"}, err: err}
				el = next
				continue
			}
			if head != nil {
				head.passed++
			}
			q := e.slots[sl.Index]
			s.running.Add(1)
			s.wg.Add(1)
			go func() { // owned: Run waits for it
				defer s.wg.Done()
				s.run(j, q)
			}()
			el = next
		}
		t.AddWaiting(short - s.memShort)
		s.memShort = short
	})
}

// run generates j on slot q, which dispatch took for it, and releases q.
func (s *Scheduler) run(j *job, q *seq) {
	s.lastBeat.Store(time.Now().UnixNano())
	var res Result
	err := j.ctx.Err() // the client left as the worker took it
	if err == nil {
		emit := func(t Token) error {
			s.lastBeat.Store(time.Now().UnixNano())
			return j.emit(t)
		}
		res, err = s.eng.generateOn(j.ctx, q, j.req, emit)
	}
	s.running.Add(-1) // before the slot is free: Running never exceeds the slots in use
	s.eng.release(q)
	s.lastBeat.Store(time.Now().UnixNano())
	j.res <- jobResult{res, err}
}

// stop refuses new jobs and fails the queued ones with ErrStopped.
func (s *Scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for s.queue.Len() > 0 {
		j := s.queue.Remove(s.queue.Front()).(*job)
		j.elem = nil
		j.res <- jobResult{err: ErrStopped}
	}
	s.eng.seqs.Locked(func(t slots.Txn) { t.AddWaiting(-s.memShort) })
	s.memShort = 0
}

// Done is closed when Run has returned.
func (s *Scheduler) Done() <-chan struct{} { return s.done }

// Submit queues req and waits for its result; emit is called from the
// worker goroutine for every output token. Cancelling ctx takes a waiting
// request out of the queue at once and stops a running generation within
// one decode step.
func (s *Scheduler) Submit(ctx context.Context, req Request, emit func(Token) error) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	j := &job{ctx: ctx, req: req, emit: emit, res: make(chan jobResult, 1)}
	s.mu.Lock()
	switch {
	case s.stopped:
		s.mu.Unlock()
		return Result{}, ErrStopped
	case s.queue.Len() >= s.depth+s.idleSlots():
		// A request that a free sequence slot will take at once does not
		// wait: it counts against the queue's depth only while every slot
		// is taken. Under a burst the dispatcher may not have run yet (one
		// CPU: the submitters run first), and the queue then holds the
		// requests about to start besides those that wait.
		s.mu.Unlock()
		return Result{}, ErrQueueFull
	}
	j.elem = s.queue.PushBack(j)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default: // a wake-up is pending already
	}
	select {
	case r := <-j.res:
		return r.res, r.err
	case <-ctx.Done():
		s.mu.Lock()
		queued := j.elem != nil
		if queued {
			s.queue.Remove(j.elem)
			j.elem = nil
		}
		s.mu.Unlock()
		if queued {
			select { // it may have held back the ones behind it
			case s.ready <- struct{}{}:
			default:
			}
			return Result{}, ctx.Err()
		}
		// The worker took it (and stops it within a step) or Run failed it.
		r := <-j.res
		return r.res, r.err
	}
}

// idleSlots are the sequence slots no running request holds.
func (s *Scheduler) idleSlots() int {
	return max(0, s.eng.MaxSequences()-int(s.running.Load()))
}

// Running is the number of requests being generated (at most the engine's
// MaxSequences).
func (s *Scheduler) Running() int { return int(s.running.Load()) }

// Waiting is the number of requests queued behind the running ones.
func (s *Scheduler) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.Len()
}

// LastBeat is when the worker last showed it was alive (idle ticks, each
// prefill chunk and decode step, request boundaries): a systemd watchdog
// pings only while this is recent. A broken engine (engine/batch) beats no
// more after the panic: the watchdog then has systemd restart edgellmd.
func (s *Scheduler) LastBeat() time.Time {
	if p := s.eng.bat.Broken(); p != nil {
		return p.At
	}
	return time.Unix(0, max(s.lastBeat.Load(), s.eng.lastStep.Load()))
}

// Depth is how many requests may wait in the queue while every slot is
// taken (api.queue_depth).
func (s *Scheduler) Depth() int { return s.depth }

// Engine returns the engine the scheduler runs.
func (s *Scheduler) Engine() *Engine { return s.eng }
