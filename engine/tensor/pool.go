package tensor

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs data-parallel loops on a fixed set of worker goroutines started
// once by NewPool. A loop over [0,n) is cut into chunks that the workers, and
// the calling goroutine, take in turn from a shared counter, so a slow core
// does not hold the others back. No goroutine is started and nothing is
// allocated per call.
//
// A Pool is driven by one goroutine at a time (the engine's worker); its
// methods are not safe for concurrent use. It owns the scratch buffers of
// MatVec and MatMul, grown on demand and then reused.
type Pool struct {
	threads int
	wake    []chan struct{} // one per helper goroutine (threads-1 of them)
	parked  []atomic.Bool   // per helper: it sleeps on its wake channel
	busy    sync.WaitGroup  // helpers still working on the current loop
	exited  sync.WaitGroup  // helpers that have not returned yet
	closed  bool

	// loop announces each loop to the helpers: a generation number in the
	// high 32 bits, the number of helpers that take part in the low ones
	// (loopClosing: the pool is closing). A helper that finished a loop watches it for a while
	// (spinWait) before it parks on its channel: a decode step is a
	// hundred loops of tens of microseconds each, and waking a parked
	// goroutine takes about as long as one of them.
	loop atomic.Uint64

	// The current loop, written before the helpers are woken.
	task      func(worker, lo, hi int)
	n         int
	chunk     int
	next      atomic.Int64
	userFn    func(lo, hi int) // Run's fn, reached through runUser
	runUserFn func(worker, lo, hi int)

	// fault is the first panic of a helper during the current loop, which
	// parallel raises again on the calling goroutine: a panic in a kernel
	// reaches whoever can contain it (the engine's batcher) instead of
	// ending the process from a goroutine nobody can recover in.
	fault atomic.Pointer[helperPanic]

	// Matrix-product state, see matmul.go.
	mm mmJob
}

// helperPanic is a panic caught on a helper goroutine, with its stack.
type helperPanic struct {
	value any
	stack []byte
}

// HelperPanic is what a Pool panics with on the calling goroutine when a
// loop's function panicked on one of its helper goroutines: the helper's
// panic value and its stack.
type HelperPanic struct {
	Value any
	Stack []byte
}

func (h HelperPanic) Error() string { return fmt.Sprintf("%v (in a worker goroutine)", h.Value) }

// NewPool starts a pool of threads workers (the caller of each loop counts as
// one of them); threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1), parked: make([]atomic.Bool, threads-1)}
	p.runUserFn = p.runUser
	p.mm.init(p)
	for i := range p.wake {
		ch := make(chan struct{}, 1)
		p.wake[i] = ch
		p.exited.Add(1)
		go p.helper(i+1, ch)
	}
	return p
}

// Threads is the number of workers, the caller included.
func (p *Pool) Threads() int { return p.threads }

// Close stops the helper goroutines and waits for them to return. The pool
// must not be used afterwards; closing twice is harmless.
func (p *Pool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	p.loop.Store(nextGen(p.loop.Load()) | loopClosing)
	for _, ch := range p.wake {
		close(ch)
	}
	p.exited.Wait()
}

// testAfterAnnounce, when set by a test, runs between a loop's
// announcement and the wake-ups: a caller held up there by the scheduler.
var testAfterAnnounce func()

// nextGen is the generation after loop's, its helper count cleared.
func nextGen(loop uint64) uint64 { return (loop>>32 + 1) << 32 }

const (
	loopClosing = 1<<32 - 1
	// spinWait is how long a helper watches for the next loop before it
	// parks: longer than the gaps between a forward pass's loops, short
	// enough that an idle engine sleeps.
	spinWait = 200 * time.Microsecond
)

// helper runs the loops it takes part in. worker is 1..threads-1, its
// index in wake and parked is worker-1.
func (p *Pool) helper(worker int, wake <-chan struct{}) {
	defer p.exited.Done()
	i := worker - 1
	var seen uint64 // the pool's starting value: its first loop differs
	for {
		cur, ok := p.nextLoop(i, seen, wake)
		if !ok || cur&loopClosing == loopClosing {
			return
		}
		seen = cur
		if uint64(i) < cur&loopClosing { // taking part: the caller waits for busy
			p.guardedWork(worker)
			p.busy.Done()
		}
	}
}

// nextLoop waits for a loop announcement other than seen: first spinning,
// then parked on wake. A parker and the caller race for its parked flag:
// whoever clears it (the caller, who then sends on wake, or the helper,
// which saw the announcement before sleeping) decides who wakes it, so a
// wake-up is never lost and every token sent is taken. A token can come
// late: a caller held up between announcing a loop and clearing the flag
// finds this helper parked again after it ran that loop from its spin;
// the helper then finds no new loop and waits again. ok is false when the
// pool closed its channel.
func (p *Pool) nextLoop(i int, seen uint64, wake <-chan struct{}) (uint64, bool) {
	for {
		start := time.Now()
		for n := 0; ; n++ {
			if cur := p.loop.Load(); cur != seen {
				return cur, true
			}
			if n&255 == 255 {
				if time.Since(start) > spinWait {
					break
				}
				runtime.Gosched() // a goroutine waiting for this P runs first
			}
		}
		p.parked[i].Store(true)
		if cur := p.loop.Load(); cur != seen {
			if p.parked[i].CompareAndSwap(true, false) {
				return cur, true // the caller did not see it parked
			}
			_, ok := <-wake // the caller cleared it and sends: take that token
			return cur, ok
		}
		if _, ok := <-wake; !ok {
			return 0, false
		}
		if cur := p.loop.Load(); cur != seen {
			return cur, true
		}
	}
}

// guardedWork is work on a helper goroutine, with its panic kept for the
// caller of the loop.
func (p *Pool) guardedWork(worker int) {
	defer func() {
		if v := recover(); v != nil {
			p.fault.CompareAndSwap(nil, &helperPanic{value: v, stack: debug.Stack()})
			p.next.Store(int64(p.n)) // the others stop at their next chunk
		}
	}()
	p.work(worker)
}

// work takes chunks of the current loop until none is left.
func (p *Pool) work(worker int) {
	n, chunk, task := p.n, p.chunk, p.task
	for {
		lo := int(p.next.Add(1)-1) * chunk
		if lo >= n {
			return
		}
		task(worker, lo, min(lo+chunk, n))
	}
}

// Run calls fn on disjoint ranges [lo,hi) that together cover [0,n), in
// parallel, and returns when all calls have returned. fn must not call back
// into the pool.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	p.userFn = fn
	p.parallel(n, max(1, (n+4*p.threads-1)/(4*p.threads)), p.runUserFn)
	p.userFn = nil
}

func (p *Pool) runUser(_, lo, hi int) { p.userFn(lo, hi) }

// parallel runs task over [0,n) in chunks of chunk. task receives the worker
// index (0 is the calling goroutine) so it can use per-worker scratch.
func (p *Pool) parallel(n, chunk int, task func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	if p.closed {
		panic("tensor: Pool used after Close")
	}
	helpers := min(len(p.wake), (n+chunk-1)/chunk-1)
	if helpers <= 0 {
		for lo := 0; lo < n; lo += chunk {
			task(0, lo, min(lo+chunk, n))
		}
		return
	}
	p.task, p.n, p.chunk = task, n, chunk
	p.next.Store(0)
	p.busy.Add(helpers)
	p.loop.Store(nextGen(p.loop.Load()) | uint64(helpers))
	if testAfterAnnounce != nil {
		testAfterAnnounce()
	}
	for i := range helpers {
		if p.parked[i].CompareAndSwap(true, false) {
			p.wake[i] <- struct{}{}
		}
	}
	p.callerWork()
	p.task = nil
	if f := p.fault.Swap(nil); f != nil {
		panic(HelperPanic{Value: f.value, Stack: f.stack})
	}
}

// callerWork is the calling goroutine's share of a loop. It waits for the
// helpers even when its own share panics, so that no helper still runs the
// loop while the panic unwinds the caller's buffers.
func (p *Pool) callerWork() {
	defer p.busy.Wait()
	p.work(0)
}
