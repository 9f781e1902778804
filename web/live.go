package web

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgellmd/edgellmd/engine"
)

// The generations in flight, for the status page's per-sequence view:
// each request's tokens so far, its time to first token and its rate.

type liveSeq struct {
	id     string
	start  time.Time
	prompt int
	tokens atomic.Int64
	first  atomic.Int64 // unix nanoseconds of the first output token; 0 before
}

func (l *liveSeq) token() {
	if l.tokens.Add(1) == 1 {
		l.first.Store(time.Now().UnixNano())
	}
}

type liveBook struct {
	mu   sync.Mutex
	seqs map[*liveSeq]struct{}
}

func (b *liveBook) add(l *liveSeq) {
	b.mu.Lock()
	if b.seqs == nil {
		b.seqs = map[*liveSeq]struct{}{}
	}
	b.seqs[l] = struct{}{}
	b.mu.Unlock()
}

func (b *liveBook) remove(l *liveSeq) {
	b.mu.Lock()
	delete(b.seqs, l)
	b.mu.Unlock()
}

// sequenceStatus is one entry of /status.json's "sequences".
type sequenceStatus struct {
	RequestID       string  `json:"request_id"`
	State           string  `json:"state"` // "queued or prefilling" until the first token, then "decoding"
	PromptTokens    int     `json:"prompt_tokens"`
	Tokens          int64   `json:"tokens"`
	ElapsedSeconds  float64 `json:"elapsed_seconds"`
	TTFTms          float64 `json:"ttft_ms,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second,omitempty"` // after the first token
}

func (b *liveBook) snapshot(now time.Time) []sequenceStatus {
	b.mu.Lock()
	out := make([]sequenceStatus, 0, len(b.seqs))
	for l := range b.seqs {
		st := sequenceStatus{RequestID: l.id, State: "queued or prefilling", PromptTokens: l.prompt, Tokens: l.tokens.Load(),
			ElapsedSeconds: now.Sub(l.start).Seconds()}
		if f := l.first.Load(); f != 0 {
			first := time.Unix(0, f)
			st.State = "decoding"
			st.TTFTms = float64(first.Sub(l.start).Microseconds()) / 1000
			if d := now.Sub(first).Seconds(); d > 0 && st.Tokens > 1 {
				st.TokensPerSecond = float64(st.Tokens-1) / d
			}
		}
		out = append(out, st)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, b sequenceStatus) int {
		switch {
		case a.ElapsedSeconds > b.ElapsedSeconds:
			return -1
		case a.ElapsedSeconds < b.ElapsedSeconds:
			return 1
		}
		return 0
	})
	return out
}

// memoryStatus is the sequence memory as /status.json shows it beside the
// sequences: the budget, what the sequence states hold (the running ones
// and those idle slots keep), the requests waiting for memory.
type memoryStatus struct {
	BudgetBytes      int64 `json:"budget_bytes"` // 0: no bound
	InUseBytes       int64 `json:"in_use_bytes"`
	RunningBytes     int64 `json:"running_bytes"`
	WaitingForMemory int   `json:"waiting_for_memory"`
	MemoryWaits      int64 `json:"memory_waits"` // requests that ever waited
}

// memoryStatusOf reads the engine's sequence memory; nil without one.
func memoryStatusOf(sched *engine.Scheduler) *memoryStatus {
	if sched == nil {
		return nil
	}
	m := sched.Engine().MemoryStats()
	return &memoryStatus{BudgetBytes: m.BudgetBytes, InUseBytes: m.InUseBytes, RunningBytes: m.RunningBytes,
		WaitingForMemory: m.WaitingForMemory, MemoryWaits: m.MemoryWaits}
}
