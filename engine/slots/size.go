package slots

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v3/mem"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// ErrContextFull is returned when the prompt does not fit the context.
var ErrContextFull = errors.New("prompt does not fit the context")

// ErrMemory is what a request whose sequence state alone is larger than
// the memory budget fails with (as a *MemoryError): it can never run; a
// shorter prompt or a smaller max_tokens can.
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

// StateGranule rounds a slot's state up to a multiple of this many tokens,
// so that requests of similar sizes reuse a slot's state.
const StateGranule = 256

// Size is what a sequence state takes, from the model's shape: the
// arithmetic of engine/model's newState (tested against its allocations).
type Size struct {
	KVPerToken  int64 // K and V rows of every attention layer, one token
	Recurrent   int64 // every DeltaNet layer's S and conv window
	MTPPerToken int64 // the MTP head's K and V rows, one token
}

// SizeOf is the Size of a model of shape hp with KV cache type kv.
func SizeOf(hp model.Hyper, kv tensor.DType) Size {
	elem := int64(4) // F32, newState's default
	switch kv {
	case tensor.F16:
		elem = 2
	case tensor.E4M3:
		elem = 1
	}
	row := 2 * elem * int64(hp.KVHeads*hp.HeadDim) // K and V
	var z Size
	for i := range hp.Layers {
		if i < len(hp.Recurrent) && hp.Recurrent[i] {
			dk, hv := int64(hp.StateDim), int64(hp.ValueHeads)
			conv := 2*int64(hp.KeyHeads)*dk + hv*dk // q, k and v channels
			z.Recurrent += 4 * (hv*dk*dk + int64(hp.ConvKernel-1)*conv)
			continue
		}
		z.KVPerToken += row
	}
	z.MTPPerToken = int64(hp.MTPLayers) * row
	return z
}

// Bytes is a state of tokens tokens.
func (z Size) Bytes(tokens int) int64 { return z.KVPerToken*int64(tokens) + z.Recurrent }

// MTPStateTokens is the MTP drafter's state (engine/speculative makes it
// for the whole context and a verify step's feed, its maxFeed).
func MTPStateTokens(ctxLen int) int { return ctxLen + 65 }

// Budget is engine.Options.MemoryBudget as Load applies it: given when > 0;
// none (0) when < 0; else what the machine has available now, less the
// model's mapped weights (they count as available page cache but the model
// needs them), the prefix cache's bound and a margin for the rest
// (scratch, runtime), yet at least oneSeq bytes, one sequence of the whole
// context (a tight machine still serves, one sequence at a time).
// available is the memory found available (0 when given).
func Budget(given, cacheMaxBytes, weights, oneSeq int64) (budget, available int64, err error) {
	switch {
	case given > 0:
		return given, 0, nil
	case given < 0:
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
	budget = available - weights - max(cacheMaxBytes, 0) - margin
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
