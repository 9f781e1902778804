package slots

import (
	"context"
	"sync"
)

// Config configure a Pool.
type Config struct {
	Slots      int   // sequence slots: generations at once
	ContextLen int   // the most tokens a sequence holds
	Size       Size  // a state's bytes by its tokens
	Budget     int64 // bounds the states' bytes; 0: no bound
	// Made, when > 0, is the tokens of the states every slot holds from
	// the start (a GPU's, made at load and never counted): none is
	// dropped or remade.
	Made int
	// MTPBytes is the MTP drafter's state a slot makes on first use under
	// the draft parameters in force (0: none); nil: never.
	MTPBytes func() int64
	// Drop is called, with the pool's lock held, when idle slot i's state
	// is let go: its owner forgets the state (and returns whether it held
	// one), so that the memory is free before the next state is made.
	Drop func(i int) bool
}

// Pool is the sequence slots and the memory their states take, behind its
// own lock. A slot's state is made for the tokens a request will hold,
// prompt + max_tokens capped at the context, and kept by the slot for the
// next request that fits in it. The pool counts the bytes every slot
// holds, running or idle, and hands a slot out only when that sum, with
// the newcomer's state, stays within the budget: when memory is short new
// work waits (idle slots' states are dropped first), a running sequence
// never fails for it. What is not counted: the per-pass scratch
// (activation rows, a verify tree's recurrent copies), the logits rows,
// the Go runtime; the budget's safety margin covers them.
type Pool struct {
	cfg Config

	mu    sync.Mutex
	slots []*Slot
	free  []*Slot       // free slots, the last used last: a lone client keeps its slot (its drafter's memory)
	freed chan struct{} // closed (and replaced) when a slot is released
	// used are the bytes of the slots' states (within cfg.Budget);
	// waiting the requests waiting for memory now, waits those that ever
	// did.
	used    int64
	waiting int
	waits   int64
	peak    MemoryStats // the high-water marks (peaked)
}

// Slot is one sequence slot as the pool accounts it. Its fields are the
// pool's (guarded by its lock); the engine keeps the state itself.
type Slot struct {
	Index int // in [0, Config.Slots)
	// capTokens is what the slot's state holds (or will, once made),
	// stateBytes its memory, mtpBytes the MTP drafter's; busy while a
	// generation runs on it; collect asks for a garbage collection before
	// the next state is made (one was let go).
	capTokens  int
	stateBytes int64
	mtpBytes   int64
	busy       bool
	collect    bool
}

// New returns a pool of cfg.Slots free slots.
func New(cfg Config) *Pool {
	p := &Pool{cfg: cfg, freed: make(chan struct{})}
	for i := range cfg.Slots {
		s := &Slot{Index: i, capTokens: max(cfg.Made, 0)}
		p.slots = append(p.slots, s)
		p.free = append(p.free, s)
	}
	return p
}

// Len is the number of slots.
func (p *Pool) Len() int { return len(p.slots) }

// Slot returns slot i.
func (p *Pool) Slot(i int) *Slot { return p.slots[i] }

// BudgetBytes is the memory budget (0: none).
func (p *Pool) BudgetBytes() int64 { return p.cfg.Budget }

// Acquire takes a free slot for a sequence of tokens tokens (prompt of
// them the prompt's) whose state fits the budget, waiting while every slot
// runs a generation or memory is short; a sequence that can never fit
// fails at once with a *MemoryError.
func (p *Pool) Acquire(ctx context.Context, tokens, prompt int) (*Slot, error) {
	waiting := false
	defer func() {
		if waiting {
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
		}
	}()
	for {
		p.mu.Lock()
		s, short, err := p.tryAcquire(tokens, prompt)
		if short != waiting {
			waiting = short
			if short {
				p.waiting++
				p.waits++
			} else {
				p.waiting--
			}
			p.peaked()
		}
		freed := p.freed
		p.mu.Unlock()
		if s != nil || err != nil {
			return s, err
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Txn is the pool locked, for a caller that picks among several requests
// what to start (the scheduler's dispatch): Locked hands it out.
type Txn struct{ p *Pool }

// Locked runs fn with the pool's lock held.
func (p *Pool) Locked(fn func(Txn)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(Txn{p})
}

// TryAcquire is Acquire without waiting: nil with short false when no slot
// is free, nil with short true when memory is short (a running sequence
// must end first), and a *MemoryError when the sequence can never fit.
func (t Txn) TryAcquire(tokens, prompt int) (s *Slot, short bool, err error) {
	return t.p.tryAcquire(tokens, prompt)
}

// Waited counts a request that waits for memory (MemoryStats.MemoryWaits);
// AddWaiting moves the requests waiting for memory now by n.
func (t Txn) Waited() { t.p.waits++ }
func (t Txn) AddWaiting(n int) {
	t.p.waiting += n
	t.p.peaked()
}

// tryAcquire is TryAcquire, with p.mu held.
func (p *Pool) tryAcquire(tokens, prompt int) (s *Slot, short bool, err error) {
	if budget := p.cfg.Budget; budget > 0 {
		need := p.cfg.Size.Bytes(tokens) + p.mtpBytes()
		if need > budget {
			return nil, false, &MemoryError{Tokens: tokens, Prompt: prompt, Context: p.cfg.ContextLen, NeedBytes: need, BudgetBytes: budget}
		}
	}
	if len(p.free) == 0 {
		return nil, false, nil
	}
	i := p.pickSlot(tokens)
	s = p.free[i]
	// What s's state becomes: kept when it holds enough tokens, else made
	// anew, a granule larger when that fits.
	capTokens, stateBytes := s.capTokens, s.stateBytes
	if capTokens < tokens {
		capTokens = min(roundUp(tokens, StateGranule), p.cfg.ContextLen)
		if p.cfg.Budget > 0 && p.cfg.Size.Bytes(capTokens) > p.cfg.Budget {
			capTokens = tokens
		}
		stateBytes = p.cfg.Size.Bytes(capTokens)
	}
	var mtpBytes int64
	if s.mtpBytes == 0 {
		mtpBytes = p.mtpBytes()
	}
	grow := stateBytes - s.stateBytes + mtpBytes
	if budget := p.cfg.Budget; budget > 0 && p.used+grow > budget {
		// Idle slots' states go first, the largest first, when that is enough.
		var idle int64
		for j, o := range p.free {
			if j != i {
				idle += o.stateBytes
			}
		}
		if p.used-idle+grow > budget {
			return nil, true, nil
		}
		for p.used+grow > budget {
			k := -1
			for j, o := range p.free {
				if j != i && o.stateBytes > 0 && (k < 0 || o.stateBytes > p.free[k].stateBytes) {
					k = j
				}
			}
			p.drop(p.free[k])
			s.collect = true
		}
	}
	if capTokens != s.capTokens {
		if p.drop(s) {
			s.collect = true
		}
		s.capTokens, s.stateBytes = capTokens, stateBytes
		p.used += stateBytes
	}
	s.mtpBytes += mtpBytes
	p.used += mtpBytes
	p.free = append(p.free[:i], p.free[i+1:]...)
	s.busy = true
	p.peaked()
	return s, false, nil
}

// peaked raises the high-water marks to the figures now. Called with mu
// held after every change of them.
func (p *Pool) peaked() {
	pk := &p.peak
	pk.InUseBytes = max(pk.InUseBytes, p.used)
	pk.WaitingForMemory = max(pk.WaitingForMemory, p.waiting)
	running := 0
	var runningBytes int64
	for _, s := range p.slots {
		if s.busy {
			running++
			runningBytes += s.stateBytes + s.mtpBytes
		}
	}
	pk.Running = max(pk.Running, running)
	pk.RunningBytes = max(pk.RunningBytes, runningBytes)
}

func (p *Pool) mtpBytes() int64 {
	if p.cfg.MTPBytes == nil {
		return 0
	}
	return p.cfg.MTPBytes()
}

// pickSlot chooses among the free slots for a sequence of tokens: the one
// used last when it holds enough (a lone client keeps its drafter's
// memory), else the smallest state that holds enough, else the largest.
// Called with mu held and a free slot.
func (p *Pool) pickSlot(tokens int) int {
	last := len(p.free) - 1
	if p.free[last].capTokens >= tokens {
		return last
	}
	// Ties go to the later (more recently used) slot.
	best := -1
	for j, o := range p.free {
		if o.capTokens >= tokens && (best < 0 || o.capTokens <= p.free[best].capTokens) {
			best = j
		}
	}
	if best >= 0 {
		return best
	}
	for j, o := range p.free {
		if best < 0 || o.capTokens >= p.free[best].capTokens {
			best = j
		}
	}
	return best
}

// drop lets go of an idle slot's state (not its drafter) and reports
// whether the owner held one. Called with mu held.
func (p *Pool) drop(s *Slot) bool {
	p.used -= s.stateBytes
	s.capTokens, s.stateBytes = 0, 0
	return p.cfg.Drop != nil && p.cfg.Drop(s.Index)
}

// Prepare is what the state of s, just acquired, must be made for when
// its owner has none: tokens, and whether to collect garbage first
// (another state was let go).
func (p *Pool) Prepare(s *Slot) (tokens int, collect bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	collect, s.collect = s.collect, false
	return s.capTokens, collect
}

// Release frees s; drafter says whether its generation made an MTP
// drafter (else the drafter's memory counted at Acquire is given back).
func (p *Pool) Release(s *Slot, drafter bool) {
	p.mu.Lock()
	s.busy = false
	if !drafter && s.mtpBytes > 0 {
		p.used -= s.mtpBytes
		s.mtpBytes = 0
	}
	p.free = append(p.free, s)
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// Released returns a channel closed at the next release of a slot.
func (p *Pool) Released() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.freed
}

// Idle returns the free slots, the most recently used last (the one a
// lone client's next request takes when its state is large enough).
func (p *Pool) Idle() []*Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Slot(nil), p.free...)
}

// MemoryStats are the sequence memory's figures.
type MemoryStats struct {
	// BudgetBytes bounds InUseBytes (engine.Options.MemoryBudget, or
	// derived from the memory available at start); 0: no bound (a GPU's
	// sequences, whose states were made at start).
	BudgetBytes int64
	// InUseBytes are the sequence states the slots hold (KV rows and
	// recurrent state; running sequences and states idle slots keep for
	// reuse) plus the MTP drafters' states.
	InUseBytes int64
	// RunningBytes are the states of the running sequences alone.
	RunningBytes int64
	Running      int // sequences generating
	// WaitingForMemory are the requests that would start now but for the
	// memory (a free slot is there, the budget is not); MemoryWaits counts
	// the requests that ever waited so.
	WaitingForMemory int
	MemoryWaits      int64
	// PeakInUseBytes, PeakRunningBytes, PeakRunning and
	// PeakWaitingForMemory are the high-water marks of those figures since
	// start: what the budget had to hold at the busiest moment.
	PeakInUseBytes       int64
	PeakRunningBytes     int64
	PeakRunning          int
	PeakWaitingForMemory int
}

// Stats returns the sequence memory's figures.
func (p *Pool) Stats() MemoryStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := MemoryStats{BudgetBytes: p.cfg.Budget, InUseBytes: p.used, WaitingForMemory: p.waiting, MemoryWaits: p.waits,
		PeakInUseBytes: p.peak.InUseBytes, PeakRunningBytes: p.peak.RunningBytes, PeakRunning: p.peak.Running,
		PeakWaitingForMemory: p.peak.WaitingForMemory}
	for _, s := range p.slots {
		if s.busy {
			st.Running++
			st.RunningBytes += s.stateBytes + s.mtpBytes
		}
	}
	return st
}
