package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/batch"
	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/logits"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
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
	// recurrent state, admit.go): a request starts only when its state fits
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

// Engine is one loaded model with its tokenizer and kernels' worker pool.
// Generate is called from one goroutine at a time (the daemon's engine worker).
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
	// The sequence slots: at most len(slots) generations run at once,
	// within the memory budget (admit.go).
	slots  []*seq
	size   stateSize     // of a sequence state, by the tokens it holds
	freeMu sync.Mutex    // guards free, freed, the slots' memory fields and the mem* fields
	free   []*seq        // free slots, the last used last: a lone client keeps its slot (its drafter's memory)
	freed  chan struct{} // closed (and replaced) when a slot is released
	// memBudget bounds memUsed, the bytes of the slots' states (0: no
	// bound); memWaiting are the requests waiting for memory now,
	// memWaits those that ever did.
	memBudget, memUsed int64
	memWaiting         int
	memWaits           int64
	// lastStep is when the last forward pass (prefill chunk or decode step)
	// ended, in unix nanoseconds: the scheduler's liveness signal.
	lastStep atomic.Int64
	draft    atomic.Pointer[speculative.Config] // set by SetDraft
	shapes   *logits.Vocab                      // what logit shaping needs of the tokenizer, built once
}

// seq is one sequence slot: its state and what a generation on it keeps.
// A slot is used by one generation (goroutine) at a time.
type seq struct {
	e     *Engine
	state model.State // the model's own state (seqState wraps it for the decoder)
	// capTokens is what state holds (made for the request that needed
	// it, nil until a request runs), stateBytes its memory, mtpBytes the
	// MTP drafter's; busy while a generation runs on the slot; collect
	// asks for a garbage collection before the next state is made (one was
	// let go). Guarded by the engine's freeMu.
	capTokens  int
	stateBytes int64
	mtpBytes   int64
	busy       bool
	collect    bool
	logits     []float32
	sampler    *sample.Sampler
	spec       *speculative.Decoder // made on first use; kept for its suffix memory
	specCfg    speculative.Config   // what spec is set to
	hidden     []float32            // the last prompt token's hidden state, for the MTP drafter
	top        [1]int32             // a greedy step's token (batch.MultiGreedy)
}

// sequence returns the slot's state, emptied: made for capTokens tokens
// when the slot has none (tryAcquire let the old one go).
func (q *seq) sequence() model.State {
	if q.state == nil {
		e := q.e
		e.freeMu.Lock()
		collect, n := q.collect, q.capTokens
		q.collect = false
		e.freeMu.Unlock()
		if collect {
			collectGarbage()
		}
		q.state = e.model.NewState(n)
		if q.logits == nil {
			q.logits = make([]float32, e.model.Hyper().Vocab)
		}
	}
	q.state.Reset()
	return q.state
}

// acquire takes a free sequence slot with a state of the whole context
// (for benchmarks), waiting as admit does.
func (e *Engine) acquire(ctx context.Context) (*seq, error) {
	return e.admit(ctx, Request{Prompt: []int32{0}})
}

// admit takes a free sequence slot whose state for req fits the memory
// budget, waiting while every slot runs a generation or memory is short.
// The scheduler does not wait here: it picks what to start from its own
// queue (Scheduler.dispatch).
func (e *Engine) admit(ctx context.Context, req Request) (*seq, error) {
	waiting := false
	defer func() {
		if waiting {
			e.freeMu.Lock()
			e.memWaiting--
			e.freeMu.Unlock()
		}
	}()
	for {
		e.freeMu.Lock()
		q, short, err := e.tryAcquire(req)
		if short != waiting {
			waiting = short
			if short {
				e.memWaiting++
				e.memWaits++
			} else {
				e.memWaiting--
			}
		}
		freed := e.freed
		e.freeMu.Unlock()
		if q != nil || err != nil {
			return q, err
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (e *Engine) release(q *seq) {
	e.freeMu.Lock()
	q.busy = false
	if q.spec == nil && q.mtpBytes > 0 { // no drafter was made after all
		e.memUsed -= q.mtpBytes
		q.mtpBytes = 0
	}
	e.free = append(e.free, q)
	close(e.freed)
	e.freed = make(chan struct{})
	e.freeMu.Unlock()
}

// released returns a channel closed at the next release of a slot.
func (e *Engine) released() <-chan struct{} {
	e.freeMu.Lock()
	defer e.freeMu.Unlock()
	return e.freed
}

// MaxSequences is how many generations the engine runs at once.
func (e *Engine) MaxSequences() int { return len(e.slots) }

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
		prefillChunk: prefillChunk, size: newStateSize(m.Hyper(), opt.KVType), freed: make(chan struct{})}
	for range nseq {
		q := &seq{e: e}
		e.slots = append(e.slots, q)
		e.free = append(e.free, q)
	}
	var memAvailable int64
	if pl.dev == nil {
		e.memBudget, memAvailable, err = memoryBudget(opt, e.weightBytes(), e.size.bytes(ctxLen))
		if err != nil {
			e.Close()
			return nil, err
		}
	}
	if pl.dev != nil {
		// The sequences' KV caches and scratch on the device, made now,
		// each for the whole context: a context that does not fit is a
		// start-up error, not every request's.
		for i, q := range e.slots {
			q.state = m.NewState(ctxLen)
			q.capTokens = ctxLen
			q.logits = make([]float32, m.Hyper().Vocab)
			if se, ok := q.state.(interface{ Err() error }); ok && se.Err() != nil {
				e.Close()
				return nil, &DeviceError{Selector: pl.info.Selector, Model: path, Err: fmt.Errorf("sequence %d of %d (engine.max_sequences), %d tokens each: %w (fewer sequences or a smaller model.context_length may fit)", i+1, nseq, ctxLen, se.Err())}
			}
		}
	}
	dev := e.Device()
	ev := opt.Log.Info().Str("model", path).Str("arch", m.Arch()).Str("file_type", f.FileType()).Str("engine", dev.Engine).Str("device", dev.Name)
	if dev.Engine != EngineCPU {
		ev = ev.Str("driver", dev.Driver).Int64("device_memory_bytes", dev.MemoryTotalBytes).
			Int64("device_memory_used_bytes", dev.MemoryUsedBytes)
	}
	ev = ev.Int("threads", pool.Threads()).Int("context", ctxLen).Int64("cache_max_bytes", max(opt.CacheMaxBytes, 0)).Int("max_sequences", nseq)
	if e.memBudget > 0 {
		ev = ev.Int64("memory_budget_bytes", e.memBudget).Int64("sequence_bytes_full_context", e.size.bytes(ctxLen))
		if memAvailable > 0 {
			ev = ev.Int64("memory_available_bytes", memAvailable)
		}
	}
	ev.Msg("model loaded")
	if full := e.size.bytes(ctxLen); e.memBudget > 0 && full*int64(nseq) > e.memBudget {
		opt.Log.Info().Int64("memory_budget_bytes", e.memBudget).Int64("sequence_bytes_full_context", full).
			Int("full_context_sequences", int(e.memBudget/full)).Int("max_sequences", nseq).
			Msg("memory budget: fewer sequences of the whole context than max_sequences fit at once; requests wait for memory (shorter ones fit more)")
	}
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
			fp, err := cacheFingerprint(path, opt.KVType, opt.Activations, dev)
			if err != nil {
				e.Close()
				return nil, err
			}
			so.Dir, so.MaxDiskBytes, so.Fingerprint = opt.CacheDir, opt.CacheMaxDiskBytes, fp
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

// Request is one generation.
type Request struct {
	Prompt    []int32 // prompt tokens, BOS included where the model wants it
	MaxTokens int     // output tokens at most; <= 0 means until EOS or the context is full
	Sample    sample.Params
	IgnoreEOS bool // keep generating past end-of-generation tokens
	// PublishAt are prompt positions (token counts, 0 < p <= len(Prompt))
	// where the prefill stops to publish a snapshot to the prefix cache: the
	// stable boundary of a chat prompt, where the next turn's prompt still
	// agrees with this one. Output tokens are never published.
	PublishAt []int
	// Constraint, when not nil, limits the output to a grammar's language.
	Constraint *Constraint
	// Penalties shape the logits by what the sequence holds (penalties,
	// logit bias).
	Penalties sample.Penalties
	// Logprobs asks for each output token's log-probability, with the
	// TopLogprobs (0-20) most likely alternatives.
	Logprobs    bool
	TopLogprobs int
}

// MaxTopLogprobs bounds Request.TopLogprobs (OpenAI's limit).
const MaxTopLogprobs = 20

// Token is one generated token as it streams out.
type Token struct {
	ID    int32
	Piece []byte // raw bytes of the token; may be part of a UTF-8 character
	// Logprob and Top, when the request asks for them: the token's
	// log-probability in the distribution it was drawn from (the logits
	// after grammar mask and penalties, at the request's temperature, 1
	// when greedy), and the most likely tokens of that distribution.
	Logprob float32
	Top     []TokenLogprob
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob = logits.TokenLogprob

// Constraint limits a generation's output to a grammar's language.
type Constraint = logits.Constraint

// Result summarises a finished generation.
type Result struct {
	Prompt       []int32
	Tokens       []int32
	FinishReason string // "stop" (end-of-generation token) or "length"
	CachedTokens int    // prompt tokens restored from the prefix cache, not prefilled
	// TargetSteps are the model's forward passes while decoding (one per
	// output token after the first without drafting, fewer with it);
	// DraftTokens the draft tokens verified, AcceptedTokens those accepted.
	TargetSteps    int
	DraftTokens    int
	AcceptedTokens int
	Draft          string // the draft parameters used: "off", or e.g. "tree 8/2/16 mtp,suffix"
	// DraftSteps are the verify steps that had a draft; AcceptedAt[i] the
	// steps whose accepted path reached depth i+1.
	DraftSteps  int
	AcceptedAt  [speculative.MaxStatDepth]int
	PrefillTime time.Duration
	DecodeTime  time.Duration // from the first output token to the last
}

// ErrContextFull is returned when the prompt does not fit the context.
var ErrContextFull = errors.New("prompt does not fit the context")

// Generate runs req, calling emit for every output token as it is decoded.
// An error from emit or ctx stops the generation and is returned, except
// ErrStop, which ends it with finish reason "stop".
func (e *Engine) Generate(ctx context.Context, req Request, emit func(Token) error) (Result, error) {
	q, err := e.admit(ctx, req)
	if err != nil {
		return Result{Prompt: req.Prompt, Draft: "off"}, err
	}
	defer e.release(q)
	return e.generateOn(ctx, q, req, emit)
}

// generateOn is Generate on slot q, which tryAcquire took for req; the
// caller releases q.
func (e *Engine) generateOn(ctx context.Context, q *seq, req Request, emit func(Token) error) (Result, error) {
	e.bat.Begin()
	defer e.bat.End()
	return q.generate(ctx, req, emit)
}

// generate is Generate on slot q.
func (q *seq) generate(ctx context.Context, req Request, emit func(Token) error) (res Result, err error) {
	e := q.e
	res = Result{Prompt: req.Prompt, Draft: "off"}
	if len(req.Prompt) == 0 {
		return res, errors.New("empty prompt")
	}
	if len(req.Prompt) >= e.ctxLen {
		return res, fmt.Errorf("%w: %d prompt tokens, context %d", ErrContextFull, len(req.Prompt), e.ctxLen)
	}
	vocab := e.model.Hyper().Vocab
	for _, t := range req.Prompt {
		if t < 0 || int(t) >= vocab {
			return res, fmt.Errorf("prompt token %d is outside the vocabulary of %d tokens", t, vocab)
		}
	}
	if err := req.Sample.Validate(); err != nil {
		return res, err
	}
	if err := req.Penalties.Validate(vocab); err != nil {
		return res, err
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs {
		return res, fmt.Errorf("top_logprobs must be in [0, %d], got %d", MaxTopLogprobs, req.TopLogprobs)
	}
	sh := e.shapes.Shaper(req.Constraint, req.Penalties, req.Prompt)
	st := q.sequence()
	q.sampler = sample.New(req.Sample) // seeded per request: same seed, same output
	maxTokens := req.MaxTokens
	if room := e.ctxLen - len(req.Prompt); maxTokens <= 0 || maxTokens > room {
		maxTokens = room
	}

	draft := e.Draft()
	dec := q.drafter(draft)
	if dec != nil {
		res.Draft = draft.String()
	}

	t0 := time.Now()
	res.CachedTokens = q.restore(st, req.Prompt)
	var hidden []float32
	if dec != nil && e.model.MTP() != nil {
		q.hidden = growF32(q.hidden, e.model.Hyper().Embd)
		hidden = q.hidden
	}
	if err := q.prefill(ctx, req.Prompt, req.PublishAt, hidden); err != nil {
		return res, err
	}
	res.PrefillTime = time.Since(t0)
	res.FinishReason = "length"
	if dec != nil {
		dec.Begin(req.Prompt, hidden)
	}
	var tFirst time.Time
	defer func() {
		if !tFirst.IsZero() {
			res.DecodeTime = time.Since(tFirst)
		}
	}()
	one := make([]int32, 1)
	// greedy steps pick their token on the device, unless the logits are
	// needed on the host
	greedy := e.bat.Greedy() && req.Sample.Greedy() && sh == nil && !req.Logprobs
	next := int32(-1) // the token a greedy step already picked on the device
	for len(res.Tokens) < maxTokens {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		id := next
		var row []float32
		if id < 0 {
			if sh != nil {
				sh.Shape(q.logits)
			}
			id = q.sampler.Pick(q.logits)
			row = q.logits
		}
		if len(res.Tokens) == 0 {
			tFirst = time.Now()
		}
		if done, err := e.emitToken(req, &res, sh, id, row, maxTokens, emit); done || err != nil {
			return res, err
		}
		if dec != nil {
			err := q.decodeSpeculative(ctx, dec, req, sh, maxTokens, &res, emit)
			s := dec.Stats()
			res.TargetSteps, res.DraftTokens, res.AcceptedTokens = int(s.TargetSteps), int(s.Drafted), int(s.Accepted)
			res.DraftSteps = int(s.Drafts)
			for i, n := range s.AcceptedAt {
				res.AcceptedAt[i] = int(n)
			}
			return res, err
		}
		one[0] = id
		if greedy {
			top := q.top[:1]
			err := e.bat.GreedyPass(model.SeqBatch{State: q.state, Batch: model.ChainBatch(one, q.state.Len(), false)}, top)
			e.lastStep.Store(time.Now().UnixNano())
			if err != nil {
				return res, err
			}
			next = top[0]
		} else if err := q.decode(one); err != nil {
			return res, err
		}
		res.TargetSteps++
	}
	return res, nil
}

// emitToken appends id to the result and hands it to emit; done reports
// that the generation ended (an end-of-generation token, ErrStop from
// emit, or maxTokens reached).
func (e *Engine) emitToken(req Request, res *Result, sh *logits.Shaper, id int32, row []float32, maxTokens int, emit func(Token) error) (done bool, err error) {
	res.Tokens = append(res.Tokens, id)
	if !req.IgnoreEOS && e.tok.IsEOG(id) {
		res.FinishReason = "stop"
		return true, nil
	}
	if sh != nil {
		if err := sh.Accept(id); err != nil {
			return true, fmt.Errorf("constrained decoding: %w", err)
		}
	}
	tok := Token{ID: id, Piece: e.tok.Piece(id)}
	if req.Logprobs && row != nil {
		temp := 1.0 // a greedy pick's distribution
		if !req.Sample.Greedy() {
			temp = float64(req.Sample.Temperature)
		}
		tok.Logprob, tok.Top = e.shapes.Logprobs(row, temp, id, req.TopLogprobs)
	}
	if err := emit(tok); err != nil {
		if errors.Is(err, ErrStop) {
			res.FinishReason = "stop"
			return true, nil
		}
		return true, err
	}
	if sh != nil && sh.Finished() {
		res.FinishReason = "stop" // the grammar's sentence is complete
		return true, nil
	}
	return len(res.Tokens) >= maxTokens, nil
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
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
// prompt prefilling at 0.47x its speed alone (README).
const DefaultDecodeSlowdown = 2.0

// DefaultMaxSequences is Options.MaxSequences's default.
const DefaultMaxSequences = 4

// restore puts into st the longest cached prefix of prompt that leaves at
// least one token to prefill (its logits start the decoding) and returns
// its length; 0 when the cache is off or holds none.
func (q *seq) restore(st model.State, prompt []int32) int {
	e := q.e
	if e.cache == nil {
		return 0
	}
	sn, ok := e.cache.Lookup(prompt, len(prompt)-1)
	if !ok {
		return 0
	}
	if err := e.bat.Do(func() error { return st.Restore(sn) }); err != nil {
		e.log.Error().Err(err).Int("tokens", sn.Len).Msg("prefix cache: restore failed; prefilling the whole prompt")
		st.Reset()
		return 0
	}
	return sn.Len
}

// prefill runs prompt from the state's length on, in chunks of at most
// prefillChunk tokens (fewer where the batcher's budget cuts them) that
// also end at each publish position, where it publishes a snapshot to the
// prefix cache. hidden, when not nil, receives the last prompt token's
// final hidden state (for the MTP drafter).
func (q *seq) prefill(ctx context.Context, prompt []int32, publishAt []int, hidden []float32) error {
	e := q.e
	var stops []int
	if e.cache != nil {
		for _, p := range publishAt {
			if p > q.state.Len() && p <= len(prompt) {
				stops = append(stops, p)
			}
		}
		slices.Sort(stops)
	}
	// The chunks are those of prefillChunk tokens from the state's length
	// on, ending at the publish positions too (as without a budget: output
	// does not depend on the other sequences); the batcher may run one in
	// pieces (its per-pass budget beside other sequences' decode steps) of
	// batch.MinPrefillChunk tokens or more, each sent with the whole chunk's
	// length (model.Batch.Chunk), so that its tokens are computed as in
	// the whole chunk.
	refStart, refEnd := q.state.Len(), q.state.Len()
	for start := q.state.Len(); start < len(prompt); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if start == refEnd {
			refStart, refEnd = start, min(start+e.prefillChunk, len(prompt))
			if len(stops) > 0 && stops[0] < refEnd {
				refEnd = stops[0]
			}
		}
		var h []float32
		if refEnd == len(prompt) {
			h = hidden
		}
		b := model.ChainBatch(prompt[start:refEnd], start, false)
		b.Chunk = refEnd - refStart
		ran, err := e.bat.Prefill(model.SeqBatch{State: q.state, Batch: b, Logits: q.logits, Hidden: h}, batch.MinPrefillChunk)
		if err != nil {
			return err
		}
		end := start + ran
		e.lastStep.Store(time.Now().UnixNano())
		publish := len(stops) > 0 && stops[0] == end
		for len(stops) > 0 && stops[0] <= end {
			stops = stops[1:]
		}
		if publish {
			if err := e.bat.Do(func() error { _, err := e.cache.Publish(prompt[:end], q.state); return err }); err != nil {
				e.log.Error().Err(err).Int("tokens", end).Msg("prefix cache: publish failed")
			}
		}
		start = end
	}
	return nil
}

// CacheStats returns the prefix cache's counters; ok is false when the
// cache is off.
func (e *Engine) CacheStats() (st state.Stats, ok bool) {
	if e.cache == nil {
		return state.Stats{}, false
	}
	return e.cache.Stats(), true
}

// decode runs one token (one[0]) after the sequence and leaves its logits.
func (q *seq) decode(one []int32) error {
	err := q.e.model.Forward(q.state, model.ChainBatch(one, q.state.Len(), false), q.logits)
	q.e.lastStep.Store(time.Now().UnixNano())
	return err
}
