package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v3/mem"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Admission by memory. A sequence slot's state (engine/model: per
// attention layer K and V rows for every token it may hold, per DeltaNet
// layer the recurrent state and conv window) is made for the tokens a
// request will hold, prompt + max_tokens capped at the context, and kept
// by the slot for the next request that fits in it. The engine counts the
// bytes every slot holds, running or idle, and starts a request only when
// that sum, with the newcomer's state, stays within Options.MemoryBudget:
// when memory is short new work waits (idle slots' states are dropped
// first), a running sequence never fails for it. What is not counted: the
// per-pass scratch (activation rows, a verify tree's recurrent copies),
// the logits rows, the Go runtime; the budget's safety margin covers them.

// ErrMemory is what a request whose sequence state alone is larger than
// the engine's memory budget fails with (as a *MemoryError): it can never
// run; a shorter prompt or a smaller max_tokens can.
var ErrMemory = errors.New("request does not fit the sequence memory budget")

// MemoryError says which request could never fit the memory budget and by
// how much. It is ErrMemory and also ErrContextFull: as for a prompt longer
// than the context, the client has to ask for fewer tokens.
type MemoryError struct {
	Tokens, Prompt, Context int // the tokens the sequence may hold: prompt + output, at most the context
	NeedBytes, BudgetBytes  int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%v: %d tokens (%d prompt + %d max_tokens, context %d) need %s of KV and recurrent state; the budget (engine.memory_budget) is %s; a smaller max_tokens or a shorter prompt fits",
		ErrMemory, e.Tokens, e.Prompt, e.Tokens-e.Prompt, e.Context, fmtBytes(e.NeedBytes), fmtBytes(e.BudgetBytes))
}

// Is makes errors.Is(err, ErrMemory) and errors.Is(err, ErrContextFull)
// hold (the web layer answers both with a 400).
func (e *MemoryError) Is(target error) bool { return target == ErrMemory || target == ErrContextFull }

// stateGranule rounds a slot's state up to a multiple of this many tokens,
// so that requests of similar sizes reuse a slot's state.
const stateGranule = 256

// stateSize is what a sequence state takes, from the model's shape: the
// arithmetic of engine/model's newState (tested against its allocations).
type stateSize struct {
	kvPerToken  int64 // K and V rows of every attention layer, one token
	recurrent   int64 // every DeltaNet layer's S and conv window
	mtpPerToken int64 // the MTP head's K and V rows, one token
}

func newStateSize(hp model.Hyper, kv tensor.DType) stateSize {
	elem := int64(4) // F32, newState's default
	switch kv {
	case tensor.F16:
		elem = 2
	case tensor.E4M3:
		elem = 1
	}
	row := 2 * elem * int64(hp.KVHeads*hp.HeadDim) // K and V
	var z stateSize
	for i := range hp.Layers {
		if i < len(hp.Recurrent) && hp.Recurrent[i] {
			dk, hv := int64(hp.StateDim), int64(hp.ValueHeads)
			conv := 2*int64(hp.KeyHeads)*dk + hv*dk // q, k and v channels
			z.recurrent += 4 * (hv*dk*dk + int64(hp.ConvKernel-1)*conv)
			continue
		}
		z.kvPerToken += row
	}
	z.mtpPerToken = int64(hp.MTPLayers) * row
	return z
}

// bytes is a state of tokens tokens.
func (z stateSize) bytes(tokens int) int64 { return z.kvPerToken*int64(tokens) + z.recurrent }

// mtpStateTokens is the MTP drafter's state (engine/speculative makes it
// for the whole context and a verify step's feed, its maxFeed).
func mtpStateTokens(ctxLen int) int { return ctxLen + 65 }

// MemoryStats are the sequence memory's figures.
type MemoryStats struct {
	// BudgetBytes bounds InUseBytes (Options.MemoryBudget, or derived from
	// the memory available at start); 0: no bound (a GPU's one sequence,
	// whose state was made at start).
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
}

// MemoryStats returns the sequence memory's figures.
func (e *Engine) MemoryStats() MemoryStats {
	e.freeMu.Lock()
	defer e.freeMu.Unlock()
	st := MemoryStats{BudgetBytes: e.memBudget, InUseBytes: e.memUsed, WaitingForMemory: e.memWaiting, MemoryWaits: e.memWaits}
	for _, q := range e.slots {
		if q.busy {
			st.Running++
			st.RunningBytes += q.stateBytes + q.mtpBytes
		}
	}
	return st
}

// SequenceBytes is the memory a sequence state for req takes: KV rows for
// the tokens it may hold (prompt + max_tokens, capped at the context) and
// the recurrent state.
func (e *Engine) SequenceBytes(req Request) int64 { return e.size.bytes(e.seqTokens(req)) }

// seqTokens are the tokens a sequence for req may hold: the prompt and its
// output, at most the context. A generation never commits its last output
// token, and a verify tree never reaches past maxTokens (speculate.go's
// room), so this is enough for both.
func (e *Engine) seqTokens(req Request) int {
	n := e.ctxLen
	if req.MaxTokens > 0 {
		n = min(n, len(req.Prompt)+req.MaxTokens)
	}
	return max(n, 1)
}

// mtpBytes is the MTP drafter's state when the draft parameters in force
// make one (a slot makes it on first use and keeps it), else 0.
func (e *Engine) mtpBytes() int64 {
	d := e.Draft()
	if e.size.mtpPerToken == 0 || e.model.MTP() == nil || !d.Enabled() || !slices.Contains(d.Drafters, "mtp") {
		return 0
	}
	return e.size.mtpPerToken * int64(mtpStateTokens(e.ctxLen))
}

// tryAcquire takes a free slot for req whose state fits the budget now,
// and accounts its memory. It returns nil with short false when no slot is
// free, nil with short true when memory is short (a running sequence must
// end first), and an ErrMemory error when req can never fit.
// Called with freeMu held.
func (e *Engine) tryAcquire(req Request) (q *seq, short bool, err error) {
	tokens := e.seqTokens(req)
	if len(req.Prompt) >= e.ctxLen || len(req.Prompt) == 0 {
		tokens = 1 // generate refuses it at once (ErrContextFull or empty): no memory to wait for
	}
	if e.memBudget > 0 {
		need := e.size.bytes(tokens) + e.mtpBytes()
		if need > e.memBudget {
			return nil, false, &MemoryError{Tokens: tokens, Prompt: len(req.Prompt), Context: e.ctxLen, NeedBytes: need, BudgetBytes: e.memBudget}
		}
	}
	if len(e.free) == 0 {
		return nil, false, nil
	}
	i := e.pickSlot(tokens)
	q = e.free[i]
	// What q's state becomes: kept when it holds enough tokens, else made
	// anew, a granule larger when that fits.
	capTokens, stateBytes := q.capTokens, q.stateBytes
	if capTokens < tokens {
		capTokens = min(roundUp(tokens, stateGranule), e.ctxLen)
		if e.memBudget > 0 && e.size.bytes(capTokens) > e.memBudget {
			capTokens = tokens
		}
		stateBytes = e.size.bytes(capTokens)
	}
	var mtpBytes int64
	if q.mtpBytes == 0 {
		mtpBytes = e.mtpBytes()
	}
	grow := stateBytes - q.stateBytes + mtpBytes
	if e.memBudget > 0 && e.memUsed+grow > e.memBudget {
		// Idle slots' states go first, the largest first, when that is enough.
		var idle int64
		for j, o := range e.free {
			if j != i {
				idle += o.stateBytes
			}
		}
		if e.memUsed-idle+grow > e.memBudget {
			return nil, true, nil
		}
		for e.memUsed+grow > e.memBudget {
			k := -1
			for j, o := range e.free {
				if j != i && o.stateBytes > 0 && (k < 0 || o.stateBytes > e.free[k].stateBytes) {
					k = j
				}
			}
			e.free[k].drop()
			q.collect = true
		}
	}
	if capTokens != q.capTokens {
		if q.state != nil {
			q.collect = true
		}
		q.drop()
		q.capTokens, q.stateBytes = capTokens, stateBytes
		e.memUsed += stateBytes
	}
	q.mtpBytes += mtpBytes
	e.memUsed += mtpBytes
	e.free = append(e.free[:i], e.free[i+1:]...)
	q.busy = true
	return q, false, nil
}

// pickSlot chooses among the free slots for a sequence of tokens: the one
// used last when it holds enough (a lone client keeps its drafter's
// memory), else the smallest state that holds enough, else the largest.
// Called with freeMu held and a free slot.
func (e *Engine) pickSlot(tokens int) int {
	last := len(e.free) - 1
	if e.free[last].capTokens >= tokens {
		return last
	}
	// Ties go to the later (more recently used) slot.
	best := -1
	for j, o := range e.free {
		if o.capTokens >= tokens && (best < 0 || o.capTokens <= e.free[best].capTokens) {
			best = j
		}
	}
	if best >= 0 {
		return best
	}
	for j, o := range e.free {
		if best < 0 || o.capTokens >= e.free[best].capTokens {
			best = j
		}
	}
	return best
}

// drop lets go of an idle slot's state (not its drafter). Called with the
// engine's freeMu held.
func (q *seq) drop() {
	q.e.memUsed -= q.stateBytes
	q.state, q.capTokens, q.stateBytes = nil, 0, 0
}

// memoryBudget is Options.MemoryBudget as Load applies it: given, or what
// the machine has available now, less the model's mapped weights (they
// count as available page cache but the model needs them), the prefix
// cache's bound and a margin for the rest (scratch, runtime), yet at least
// one sequence of the whole context (a tight machine still serves, one
// sequence at a time). 0: no bound.
func memoryBudget(opt Options, weights int64, oneSeq int64) (budget, available int64, err error) {
	switch {
	case opt.MemoryBudget > 0:
		return opt.MemoryBudget, 0, nil
	case opt.MemoryBudget < 0:
		return 0, 0, nil
	}
	vm, err := mem.VirtualMemory()
	if err != nil {
		return 0, 0, fmt.Errorf("engine: memory budget: %w (set engine.memory_budget)", err)
	}
	available = int64(vm.Available)
	if limit, used, ok := cgroupMemory(); ok && limit-used < available {
		available = limit - used
	}
	margin := max(512<<20, int64(vm.Total)/20)
	budget = available - weights - max(opt.CacheMaxBytes, 0) - margin
	return max(budget, oneSeq), available, nil
}

// cgroupMemory reads the cgroup v2 memory limit and usage of this process
// (a systemd MemoryMax=, a container's limit); ok is false without one.
func cgroupMemory() (limit, used int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.Lines(string(b)) {
		path, found := strings.CutPrefix(strings.TrimSpace(line), "0::")
		if !found {
			continue
		}
		dir := "/sys/fs/cgroup" + path
		read := func(name string) (int64, bool) {
			b, err := os.ReadFile(dir + "/" + name)
			if err != nil {
				return 0, false
			}
			v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // "max" fails: no limit
			return v, err == nil
		}
		limit, ok1 := read("memory.max")
		used, ok2 := read("memory.current")
		return limit, used, ok1 && ok2
	}
	return 0, 0, false
}

// weightBytes are the model's tensors as mapped from the file.
func (e *Engine) weightBytes() int64 {
	var n int64
	for i := range e.file.Tensors {
		n += e.file.Tensors[i].Size
	}
	return n
}

// collectGarbage runs before a slot makes a state after another was let
// go: without it the heap would hold both until the collector's goal
// (twice the live heap by default) is reached.
func collectGarbage() { runtime.GC() }

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// fmtBytes writes n for messages: bytes, and KiB, MiB or GiB above them.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%d bytes (%.2f GiB)", n, float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
