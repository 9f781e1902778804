package engine

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
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
// share forward passes); when the queue is full, Submit fails at once with
// ErrQueueFull rather than letting clients wait without bound. A request
// whose client leaves while it waits (its context ends) leaves the queue
// at once, freeing its place.
type Scheduler struct {
	eng      *Engine
	depth    int
	ready    chan struct{} // a job was queued (buffered: one wake-up waits)
	done     chan struct{}
	running  atomic.Int32
	lastBeat atomic.Int64  // unix nanoseconds of the worker's last sign of life
	slots    chan struct{} // one per running generation
	wg       sync.WaitGroup

	mu      sync.Mutex
	queue   list.List // of *job, oldest first
	stopped bool      // Run has ended: Submit refuses
	// observe, when set (tests, before Run), is called with mu held after
	// every change of the queue.
	observe func()
}

type job struct {
	ctx  context.Context
	req  Request
	emit func(Token) error
	res  chan jobResult
	elem *list.Element // in the queue; nil once the worker took it or it left
}

type jobResult struct {
	res Result
	err error
}

// NewScheduler returns a scheduler for e whose queue holds queueDepth
// waiting requests (at least 1). Run must be called to start the worker.
func NewScheduler(e *Engine, queueDepth int) *Scheduler {
	s := &Scheduler{eng: e, depth: max(queueDepth, 1), ready: make(chan struct{}, 1), done: make(chan struct{}),
		slots: make(chan struct{}, e.MaxSequences())}
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
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			s.lastBeat.Store(time.Now().UnixNano())
		case <-s.ready:
			for ctx.Err() == nil {
				select {
				case s.slots <- struct{}{}: // a slot is free
				case <-ctx.Done():
					return
				}
				j := s.next()
				if j == nil {
					<-s.slots
					break
				}
				s.wg.Add(1)
				go func() { // owned: Run waits for it
					defer s.wg.Done()
					s.run(j)
					<-s.slots
					select { // look at the queue again
					case s.ready <- struct{}{}:
					default:
					}
				}()
			}
		}
	}
}

// next takes the oldest queued job, or returns nil.
func (s *Scheduler) next() *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.queue.Front()
	if e == nil {
		return nil
	}
	j := s.queue.Remove(e).(*job)
	j.elem = nil
	s.changed()
	return j
}

func (s *Scheduler) run(j *job) {
	s.lastBeat.Store(time.Now().UnixNano())
	if j.ctx.Err() != nil { // the client left as the worker took it
		j.res <- jobResult{err: j.ctx.Err()}
		return
	}
	s.running.Add(1)
	emit := func(t Token) error {
		s.lastBeat.Store(time.Now().UnixNano())
		return j.emit(t)
	}
	res, err := s.eng.Generate(j.ctx, j.req, emit)
	s.running.Add(-1)
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
	s.changed()
}

// changed reports a change of the queue to observe. Called with mu held.
func (s *Scheduler) changed() {
	if s.observe != nil {
		s.observe()
	}
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
	case s.queue.Len() >= s.depth:
		s.mu.Unlock()
		return Result{}, ErrQueueFull
	}
	j.elem = s.queue.PushBack(j)
	s.changed()
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
			s.changed()
		}
		s.mu.Unlock()
		if queued {
			return Result{}, ctx.Err()
		}
		// The worker took it (and stops it within a step) or Run failed it.
		r := <-j.res
		return r.res, r.err
	}
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
// pings only while this is recent.
func (s *Scheduler) LastBeat() time.Time {
	return time.Unix(0, max(s.lastBeat.Load(), s.eng.lastStep.Load()))
}

// Engine returns the engine the scheduler runs.
// Depth is how many requests may wait behind the running one.
func (s *Scheduler) Depth() int { return s.depth }

func (s *Scheduler) Engine() *Engine { return s.eng }
