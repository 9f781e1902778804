package engine

import (
	"context"
	"errors"
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

// Scheduler puts one engine worker behind a bounded FIFO queue: requests run
// one at a time, in arrival order; when the queue is full, Submit fails at
// once with ErrQueueFull rather than letting clients wait without bound.
type Scheduler struct {
	eng      *Engine
	queue    chan *job
	done     chan struct{}
	running  atomic.Int32
	waiting  atomic.Int32
	lastBeat atomic.Int64 // unix nanoseconds of the worker's last sign of life
}

type job struct {
	ctx  context.Context
	req  Request
	emit func(Token) error
	res  chan jobResult
}

type jobResult struct {
	res Result
	err error
}

// NewScheduler returns a scheduler for e whose queue holds queueDepth
// waiting requests (at least 1). Run must be called to start the worker.
func NewScheduler(e *Engine, queueDepth int) *Scheduler {
	queueDepth = max(queueDepth, 1)
	s := &Scheduler{eng: e, queue: make(chan *job, queueDepth), done: make(chan struct{})}
	s.lastBeat.Store(time.Now().UnixNano())
	return s
}

// Run is the engine worker: it runs queued requests until ctx ends, then
// fails the requests still queued with ErrStopped. The caller owns the
// goroutine that runs it.
func (s *Scheduler) Run(ctx context.Context) {
	defer close(s.done)
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case j := <-s.queue:
					s.waiting.Add(-1)
					j.res <- jobResult{err: ErrStopped}
				default:
					return
				}
			}
		case <-beat.C:
			s.lastBeat.Store(time.Now().UnixNano())
		case j := <-s.queue:
			s.waiting.Add(-1)
			s.lastBeat.Store(time.Now().UnixNano())
			if j.ctx.Err() != nil { // the client left while queued
				j.res <- jobResult{err: j.ctx.Err()}
				continue
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
	}
}

// Done is closed when Run has returned.
func (s *Scheduler) Done() <-chan struct{} { return s.done }

// Submit queues req and waits for its result; emit is called from the
// worker goroutine for every output token. Cancelling ctx stops the
// generation within one decode step.
func (s *Scheduler) Submit(ctx context.Context, req Request, emit func(Token) error) (Result, error) {
	j := &job{ctx: ctx, req: req, emit: emit, res: make(chan jobResult, 1)}
	select {
	case <-s.done:
		return Result{}, ErrStopped
	default:
	}
	s.waiting.Add(1)
	select {
	case s.queue <- j:
	default:
		s.waiting.Add(-1)
		return Result{}, ErrQueueFull
	}
	select {
	case r := <-j.res:
		return r.res, r.err
	case <-s.done:
		// The worker stopped; it answers every job it took or drained.
		select {
		case r := <-j.res:
			return r.res, r.err
		default:
			return Result{}, ErrStopped
		}
	}
}

// Running is the number of requests the worker is generating (0 or 1).
func (s *Scheduler) Running() int { return int(s.running.Load()) }

// Waiting is the number of requests queued behind the running one.
func (s *Scheduler) Waiting() int { return int(s.waiting.Load()) }

// LastBeat is when the worker last showed it was alive (idle ticks, each
// prefill chunk and decode step, request boundaries): a systemd watchdog
// pings only while this is recent.
func (s *Scheduler) LastBeat() time.Time {
	return time.Unix(0, max(s.lastBeat.Load(), s.eng.lastStep.Load()))
}

// Engine returns the engine the scheduler runs.
func (s *Scheduler) Engine() *Engine { return s.eng }
