package engine

import (
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/batch"
	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/logits"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/slots"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/state"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// Options configure Load.
type Options struct {
	Threads int          // worker threads for the kernels; <= 0 means all cores
	KVType  tensor.DType // KV cache element type: tensor.F16 (llama.cpp's default), tensor.F32 (the zero value) or tensor.E4M3 (FP8)
	// Activations is how NVFP4 weights meet activations: tensor.NVFP4ActQ8
	// (W4A8, llama.cpp's arithmetic; the zero value), NVFP4ActF32 (W4A16)
	// or NVFP4ActFP4 (W4A4).
	Activations tensor.NVFP4Activations
	ContextLen  int // tokens a sequence may hold; <= 0 means the model's own context length
	// CacheMaxBytes bounds the in-memory prefix cache (engine/state); <= 0
	// turns it off: every request prefills its whole prompt.
	CacheMaxBytes int64
	// CacheDir keeps the prefix cache across restarts ("" = memory only),
	// within CacheMaxDiskBytes.
	CacheDir          string
	CacheMaxDiskBytes int64
	// Draft are the speculative decoding parameters to start with (see
	// SetDraft); the zero value is off.
	Draft speculative.Config
	// Device is where the forward passes run: "" or "cpu" the CPU (the
	// reference engine); "gpu" the first real GPU the Vulkan loader lists,
	// "gpu:N" its Nth device whatever its kind (lavapipe too); "auto" a
	// real GPU when there is one and the model runs on it, else the CPU.
	// A GPU asked for by name that cannot be used is a *DeviceError.
	Device string
	// GPUMatMul is how a GPU multiplies passes of several rows (prefill
	// chunks, verify trees): "auto" or "" (cooperative matrices, the tensor
	// cores, where the device has them; the scalar shaders elsewhere),
	// "scalar", or "coopmat" (an error on a device without them).
	GPUMatMul string
	// MaxSequences is how many generations run at once, their steps in
	// shared forward passes (<= 0: DefaultMaxSequences).
	MaxSequences int
	// PrefillChunk bounds the prompt tokens of one forward pass (<= 0:
	// DefaultPrefillChunk).
	PrefillChunk int
	// DecodeSlowdown bounds a pass that carries a prompt chunk beside other
	// sequences' decode steps to this multiple of a decode-only pass: the
	// chunk is cut to the prompt tokens that fit, as the passes measure,
	// in pieces that keep the output (model.Batch.Chunk); a piece that does not
	// fit waits for passes that save up for it, so that the others' mean
	// time per token stays within the multiple (engine/batch:
	// Batcher.budget). When nobody else decodes the chunk is PrefillChunk.
	// 0 (or <= 1): off, chunks of PrefillChunk always. Off on a GPU.
	DecodeSlowdown float64
	// MemoryBudget bounds the bytes of the sequence states (KV rows and
	// recurrent state, engine/slots): a request starts only when its state fits
	// beside the running ones', and one that can never fit fails with
	// ErrMemory. 0: derived at Load from the memory available then, less
	// the model's weights, CacheMaxBytes and a margin; < 0: no bound.
	// Not applied on a GPU (its sequences' states are made at Load).
	MemoryBudget int64
	Log          zerolog.Logger
	// PassHook, when set, is called on the batcher's goroutine before each
	// forward pass and each other piece of model work it runs, where a
	// panic is contained (engine/batch): tests inject failures with it.
	PassHook func()
}

// Engine is one loaded model with its tokenizer, kernels' worker pool,
// sequence slots and batcher. Any goroutine may call Generate: each
// generation takes a slot (waiting for one, and for memory), and the
// batcher runs the slots' steps in shared forward passes. The daemon calls
// it through a Scheduler, which queues requests in front of the slots.
type Engine struct {
	path   string
	file   *gguf.File
	pool   *tensor.Pool
	model  model.Model // the CPU model or its GPU twin, as sequences call it: through bat
	base   model.Model // the model itself (the batcher's)
	bat    *batch.Batcher
	placed placed // where model runs
	tok    *tokenizer.Tokenizer
	ctxLen int
	// prefillChunk bounds a prompt's tokens per pass (Options.PrefillChunk).
	prefillChunk int
	log          zerolog.Logger
	cache        *state.Cache // nil when off
	// The sequence slots (slots[i] is seqs' slot i): at most len(slots)
	// generations run at once, within the memory budget (engine/slots).
	slots []*seq
	seqs  *slots.Pool
	size  slots.Size // of a sequence state, by the tokens it holds
	// lastStep is when the last forward pass (prefill chunk or decode step)
	// ended, in unix nanoseconds: the scheduler's liveness signal.
	lastStep    atomic.Int64
	draft       atomic.Pointer[speculative.Config] // set by SetDraft
	fingerprint string                             // Fingerprint's, at Load
	shapes      *logits.Vocab                      // what logit shaping needs of the tokenizer, built once
}

// DefaultPrefillChunk is Options.PrefillChunk's default: the most prompt
// tokens of one forward pass, so that a long prompt shares the passes
// with the other sequences' decode steps and scratch stays small.
const DefaultPrefillChunk = 256

// DefaultDecodeSlowdown is engine.decode_slowdown's default (the daemon's;
// Options.DecodeSlowdown's zero value is off): a pass carrying a prompt
// chunk beside decode steps may take 2 times a decode-only pass. Beside a
// 16k-token prompt on the bench model that kept the others' mean TPOT at
// 2.7x their TPOT alone (2.5 gave 3.35x: their decode-only steps slow down
// too, as their context grows and the prompt's KV takes the caches), the
// prompt prefilling at 0.47x its speed alone (docs/performance/
// concurrency.md, "A long prompt beside running requests").
const DefaultDecodeSlowdown = 2.0

// DefaultMaxSequences is Options.MaxSequences's default.
const DefaultMaxSequences = 4

// BatchStats count the forward passes the batcher ran.
type BatchStats = batch.Stats

// BatchStats returns the counts of the forward passes run so far.
func (e *Engine) BatchStats() BatchStats { return e.bat.Stats() }

// ErrBroken is what every error of a broken engine matches (errors.Is): a
// forward pass panicked (batch.PassPanic) and the engine runs nothing
// more until it is loaded again (a restart, or a model swap).
var ErrBroken = batch.ErrBroken

// PassPanic is a panic caught on the batcher's goroutine.
type PassPanic = batch.PassPanic

// Broken returns the panic that broke the engine, or nil while it works.
// Any goroutine may call it.
func (e *Engine) Broken() error {
	if p := e.bat.Broken(); p != nil {
		return p
	}
	return nil
}

// Load maps the model file and builds the model and its tokenizer.
func Load(path string, opt Options) (*Engine, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	v, err := tokenizer.VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	pool := tensor.NewPool(opt.Threads)
	pool.SetNVFP4Activations(opt.Activations)
	m, err := model.Load(f, model.Options{KVType: opt.KVType, Pool: pool})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cpuModel := m
	pl, err := place(opt.Device, opt.GPUMatMul, f, m, opt.Activations, opt.Log) // errors are *DeviceError
	if err != nil {
		pool.Close()
		if de, ok := err.(*DeviceError); ok {
			de.Model = path
		}
		return nil, err
	}
	m = pl.m
	ctxLen := opt.ContextLen
	if ctxLen > m.Hyper().Context {
		// Said at start, never silently: a client told the configured
		// length would be refused past the model's.
		opt.Log.Warn().Int("context_length", ctxLen).Int("model_context_length", m.Hyper().Context).
			Msgf("model.context_length %d is more than the model's own context length %d (its training window and the positions it knows): serving %d tokens per sequence", ctxLen, m.Hyper().Context, m.Hyper().Context)
	}
	if ctxLen <= 0 || ctxLen > m.Hyper().Context {
		ctxLen = m.Hyper().Context
	}
	ok = true
	nseq := opt.MaxSequences
	if nseq <= 0 {
		nseq = DefaultMaxSequences
	}
	prefillChunk := opt.PrefillChunk
	if prefillChunk <= 0 {
		prefillChunk = DefaultPrefillChunk
	}
	slowdown := opt.DecodeSlowdown
	if pl.dev != nil {
		// The GPU's attention rounds by how many tokens a call has and
		// does not take model.Batch.Chunk: a chunk cut into pieces would
		// not give the whole chunk's bits. Its chunks stay whole (a pass
		// of a chunk beside decode steps costs a GPU little more).
		slowdown = 0
	}
	bat := batch.New(m, batch.Options{Slowdown: slowdown, KeyCost: batch.KeyCost(m.Hyper(), f), Log: opt.Log, Hook: opt.PassHook})
	e := &Engine{path: path, file: f, pool: pool, model: bat.Model(), base: m, bat: bat, placed: pl, tok: tok, shapes: logits.NewVocab(tok), ctxLen: ctxLen, log: opt.Log,
		prefillChunk: prefillChunk, size: slots.SizeOf(m.Hyper(), opt.KVType)}
	var memBudget, memAvailable int64
	made := 0
	if pl.dev == nil {
		memBudget, memAvailable, err = slots.Budget(opt.MemoryBudget, opt.CacheMaxBytes, e.weightBytes(), e.size.Bytes(ctxLen))
		if err != nil {
			e.Close()
			return nil, err
		}
	} else {
		made = ctxLen
	}
	e.newSlots(nseq, memBudget, made)
	if pl.dev != nil {
		// The sequences' KV caches and scratch on the device, made now,
		// each for the whole context: a context that does not fit is a
		// start-up error, not every request's.
		for i, q := range e.slots {
			q.state = m.NewState(ctxLen)
			q.logits = make([]float32, m.Hyper().Vocab)
			if se, ok := q.state.(interface{ Err() error }); ok && se.Err() != nil {
				e.Close()
				return nil, &DeviceError{Selector: pl.info.Selector, Model: path, Err: fmt.Errorf("sequence %d of %d (engine.max_sequences), %d tokens each: %w (fewer sequences or a smaller model.context_length may fit)", i+1, nseq, ctxLen, se.Err())}
			}
		}
	}
	dev := e.Device()
	ev := opt.Log.Info().Str("model", path).Str("arch", m.Arch()).Str("file_type", f.FileType()).Str("engine", dev.Engine).Str("device", dev.Name)
	kernels, simd := tensor.CPUKernels()
	if dev.Engine == EngineCPU {
		ev = ev.Str("cpu_kernels", kernels)
	}
	if dev.Engine != EngineCPU {
		ev = ev.Str("driver", dev.Driver).Int64("device_memory_bytes", dev.MemoryTotalBytes).
			Int64("device_memory_used_bytes", dev.MemoryUsedBytes)
	}
	ev = ev.Int("threads", pool.Threads()).Int("context", ctxLen).Int64("cache_max_bytes", max(opt.CacheMaxBytes, 0)).Int("max_sequences", nseq)
	if memBudget > 0 {
		ev = ev.Int64("memory_budget_bytes", memBudget).Int64("sequence_bytes_full_context", e.size.Bytes(ctxLen))
		if memAvailable > 0 {
			ev = ev.Int64("memory_available_bytes", memAvailable)
		}
	}
	ev.Msg("model loaded")
	if dev.Engine == EngineCPU && !simd {
		opt.Log.Warn().Str("cpu_kernels", kernels).Str("cpu", dev.Name).
			Msg("this CPU has none of the engine's SIMD kernels: every product runs its plain-Go twin (the same bits, several times slower)")
	}
	if full := e.size.Bytes(ctxLen); memBudget > 0 && full*int64(nseq) > memBudget {
		opt.Log.Info().Int64("memory_budget_bytes", memBudget).Int64("sequence_bytes_full_context", full).
			Int("full_context_sequences", int(memBudget/full)).Int("max_sequences", nseq).
			Msg("memory budget: fewer sequences of the whole context than max_sequences fit at once; requests wait for memory (shorter ones fit more)")
	}
	fileFP, err := f.Fingerprint()
	if err != nil {
		e.Close()
		return nil, err
	}
	e.fingerprint = fingerprint(fileFP, opt.KVType, opt.Activations, dev)
	if err := e.SetDraft(opt.Draft); err != nil {
		e.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if opt.CacheMaxBytes > 0 {
		// The cache checks records against the CPU model's state layout: a
		// GPU state snapshots into the same model.Snapshot (engine/gpu's
		// snapshot.go), and model.LayoutOf knows only the CPU's states.
		so := state.Options{MaxBytes: opt.CacheMaxBytes, Model: cpuModel, Log: opt.Log}
		if opt.CacheDir != "" {
			so.Dir, so.MaxDiskBytes, so.Fingerprint = opt.CacheDir, opt.CacheMaxDiskBytes, cacheFingerprint(e.fingerprint)
		}
		if e.cache, err = state.Open(so); err != nil && so.Dir != "" {
			// Serving matters more than persistence: a directory that
			// cannot be used (not writable, or held by another process)
			// leaves a memory-only cache, said loudly.
			opt.Log.Error().Err(err).Str("cache.dir", so.Dir).Msg("prefix cache: the directory cannot be used; the cache stays in memory and is lost at restart")
			so.Dir, so.Fingerprint = "", ""
			e.cache, err = state.Open(so)
		}
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("prefix cache: %w", err)
		}
	}
	return e, nil
}

// Close writes out and closes the prefix cache, releases the GPU device
// (when the model runs on one), unmaps the model and stops the worker pool.
func (e *Engine) Close() error {
	var cerr error
	if e.cache != nil {
		cerr = e.cache.Close()
	}
	e.bat.Close()
	for _, q := range e.slots {
		if c, ok := q.state.(interface{ Close() }); ok { // a GPU state's device buffers
			c.Close()
		}
		q.state = nil
	}
	e.placed.close()
	e.pool.Close()
	if err := e.file.Close(); err != nil {
		return err
	}
	return cerr
}

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Arch is the model architecture ("llama", "qwen35").
func (e *Engine) Arch() string { return e.model.Arch() }

// FileType is the model file's quantization preset as llama.cpp names it
// from general.file_type ("Q4_K_M"), "" when the file does not say.
func (e *Engine) FileType() string { return e.file.FileType() }

// ContextLen is the most tokens one sequence may hold.
func (e *Engine) ContextLen() int { return e.ctxLen }

// Threads is the number of kernel worker threads.
func (e *Engine) Threads() int { return e.pool.Threads() }

// CacheStats returns the prefix cache's counters; ok is false when the
// cache is off.
func (e *Engine) CacheStats() (st state.Stats, ok bool) {
	if e.cache == nil {
		return state.Stats{}, false
	}
	return e.cache.Stats(), true
}
