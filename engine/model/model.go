package model

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Model is a loaded architecture: it runs batches of tokens on a State.
// Its methods are called from one goroutine at a time (the engine worker).
// The models of Load also run several sequences in one pass
// (MultiForwarder; call them through ForwardMulti).
type Model interface {
	Arch() string
	Hyper() Hyper
	// NewState makes an empty sequence state with room for maxTokens tokens
	// (KV slots); its scratch buffers for the forward pass live in it.
	NewState(maxTokens int) State
	// Forward runs b on st. logits receives one row of Hyper().Vocab floats
	// per token with Logits[i] set, in order. A chain batch (every Parent[i]
	// == i-1) is committed to the state at once, unless b.Verify is set. A
	// tree batch (or a Verify chain) is kept pending until st.Commit(path)
	// keeps the listed batch indices (a root-to-node path) and drops the rest.
	Forward(st State, b Batch, logits []float32) error
	// ForwardHidden is Forward that also writes, for each token with logits,
	// the final normed hidden state (Hyper().Embd floats: the h_t an MTP head
	// takes) into hidden. hidden may be nil.
	ForwardHidden(st State, b Batch, logits, hidden []float32) error
	// MTP returns the model's multi-token-prediction head, or nil when the
	// file has none.
	MTP() MTPHead
}

// Hyper are a model's dimensions, read from its GGUF metadata.
type Hyper struct {
	Arch     string
	Vocab    int
	Context  int // context length the model was trained with
	Embd     int
	Layers   int // decoder layers, MTP layers not counted
	Heads    int // query heads of the attention layers
	KVHeads  int
	HeadDim  int
	FFN      int
	RopeDims int // leading dimensions of each head that RoPE rotates
	RopeBase float32
	NormEps  float32

	// qwen35 only.
	Recurrent    []bool // per layer: Gated DeltaNet (true) or full attention
	ConvKernel   int    // DeltaNet causal conv width (ssm.conv_kernel)
	KeyHeads     int    // DeltaNet q/k heads (ssm.group_count)
	ValueHeads   int    // DeltaNet v heads (ssm.time_step_rank)
	StateDim     int    // DeltaNet head size d_k = d_v (ssm.state_size)
	RopeSections [4]int // rope.dimension_sections
	MTPLayers    int    // nextn_predict_layers
}

// Options choose how a model runs.
type Options struct {
	// KVType is the KV cache element type. tensor.F16 is llama.cpp's default
	// and runs attention as llama.cpp's flash attention does on a CPU (its
	// default there). tensor.F32 runs it as llama.cpp's attention without
	// flash attention, the only llama.cpp setting in which an F32 cache is
	// not cast to F16. tensor.E4M3 is an FP8 cache (K/k_scale and V/v_scale
	// as E4M3 codes, the scales per layer from the file or 1; see
	// attendFP8), which llama.cpp does not have. Beware: the zero value is
	// tensor.F32 (ggml type id 0).
	KVType tensor.DType
	// Pool runs the matrix products; nil makes one with a thread per CPU
	// (never closed).
	Pool *tensor.Pool
	// Observe, when set, sees the input of every weight matrix product
	// before it runs: the weight's base name (e.g. "blk.0.attn_q"), n rows
	// of cols values. Calibration (engine/quantize) records activation
	// ranges with it; it must not keep or change x.
	Observe func(name string, x []float32, n, cols int)
	// SgemmF32 computes F32 weight products of two or more rows as
	// llama.cpp's CPU backend does (llamafile's tinyBLAS sgemm, where it
	// takes the shape: columns a multiple of 8, rows of 4), so that a prefill
	// over F32 weights (qwen35's ssm_alpha and ssm_beta, which NVFP4 files
	// keep in F32) has llama.cpp's bits. Off (the default) every F32 row
	// takes ggml_vec_dot_f32, llama.cpp's one-token product, whatever the
	// number of rows: a token's bits then do not depend on the rows beside
	// it, which speculative verification (identical to greedy decoding),
	// chunked prefill and ForwardMulti rely on. On, ForwardMulti is not bit
	// for bit each sequence alone.
	SgemmF32 bool
}

// Load builds the model a GGUF file holds, chosen by general.architecture.
// The weights stay in f's mapping: f must stay open while the model is used.
func Load(f *gguf.File, opt Options) (Model, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		return nil, fmt.Errorf("model %s: metadata key \"general.architecture\" missing (want \"llama\" or \"qwen35\")", f.Path)
	}
	switch opt.KVType {
	case tensor.F16, tensor.F32, tensor.E4M3:
	default:
		return nil, fmt.Errorf("model %s: KV cache type %v not supported (want F16, F32 or E4M3)", f.Path, opt.KVType)
	}
	if err := CheckTypes(f, "the CPU engine", func(t *gguf.TensorInfo) bool { return tensor.CPUSupports(t.Type) }, tensor.CPUTypes()); err != nil {
		return nil, err
	}
	if opt.Pool == nil {
		opt.Pool = tensor.NewPool(0)
	}
	l := &loader{f: f, arch: arch}
	switch arch {
	case "llama":
		return loadLlama(l, opt)
	case "qwen35":
		return loadQwen35(l, opt)
	default:
		return nil, fmt.Errorf("model %s: architecture %q not supported (want \"llama\" or \"qwen35\")", f.Path, arch)
	}
}

// CheckTypes refuses a file with a tensor whose type engine (its name in
// words) cannot run: every tensor is checked at load, used or not, so that
// a model that loads can run (a type found unsupported in the middle of a
// forward pass would fail every request instead). The error names the
// first such tensor, its type, how many tensors share the problem, and
// the supported types.
func CheckTypes(f *gguf.File, engine string, supports func(*gguf.TensorInfo) bool, supported string) error {
	var first *gguf.TensorInfo
	bad := 0
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if supports(t) {
			continue
		}
		if first == nil {
			first = t
		}
		bad++
	}
	if first == nil {
		return nil
	}
	more := ""
	if bad > 1 {
		more = fmt.Sprintf(" (and %d more tensors of unsupported types)", bad-1)
	}
	return fmt.Errorf("model %s: tensor %q has type %s, which %s cannot run%s; supported types: %s",
		f.Path, first.Name, first.Type, engine, more, supported)
}

// layer is one pre-norm residual decoder block:
// x += mixer(norm(x)); x += mlp(norm2(x)). The mixer is full attention or a
// Gated DeltaNet.
type layer struct {
	attnNorm []float32
	attn     *attention
	delta    *deltaNet
	ffnNorm  []float32 // llama's ffn_norm, qwen35's post_attention_norm
	mlp      mlp
}

// decoder is the shared body of both architectures and implements Model.
type decoder struct {
	hp      Hyper
	pool    *tensor.Pool
	kvType  tensor.DType
	eps     float32
	embed   tensor.Matrix
	layers  []layer
	outNorm []float32
	output  linear
	mtp     *mtpHead
	// gatherEarly drops the rows without logits before the last block's
	// feed-forward part (llama) rather than after the last block (qwen35).
	gatherEarly bool
	sgemmF32    bool                                        // Options.SgemmF32
	observe     func(name string, x []float32, n, cols int) // Options.Observe
	multi       multiPass                                   // ForwardMulti's scratch (multi.go)
}

// silu applies SiLU to one row (ggml's SIMD blocks start at a row's first
// value, so rows are never concatenated).
func (d *decoder) silu(row []float32) { tensor.SiLU(row) }

func (d *decoder) Arch() string { return d.hp.Arch }
func (d *decoder) Hyper() Hyper { return d.hp }

func (d *decoder) MTP() MTPHead {
	if d.mtp == nil {
		return nil
	}
	return d.mtp
}

func (d *decoder) NewState(maxTokens int) State {
	return newState(d, d.layers, d.shape(), d.kvType, maxTokens)
}

func (d *decoder) Forward(st State, b Batch, logits []float32) error {
	return d.ForwardHidden(st, b, logits, nil)
}

func (d *decoder) ForwardHidden(st State, b Batch, logits, hidden []float32) error {
	s, nOut, err := d.begin(d, st, &b, logits, hidden)
	if err != nil {
		return err
	}
	p := s.alone()
	d.embedRows(p)
	rows := d.runLayers(p, d.layers, nOut)
	E := d.hp.Embd
	d.head(p.rows, p.rows.x[:rows*E], rows, d.outNorm, &d.output, logits, hidden)
	s.finish()
	return nil
}

// embedRows writes the token embeddings of every sequence of p into its
// rows of x.
func (d *decoder) embedRows(p *pass) {
	E := d.hp.Embd
	x := p.rows.x
	for _, s := range p.seqs {
		for i, t := range s.w.batch.Tokens {
			row := s.w.off + i
			d.embed.RowTo(x[row*E:(row+1)*E], int(t))
		}
	}
}

// begin checks a forward call on a state of owner and readies the state's
// scratch for b as the only batch of its pass. It returns the state and
// the number of tokens that want logits.
func (d *decoder) begin(owner stateOwner, st State, b *Batch, logits, hidden []float32) (*state, int, error) {
	s, chain, nOut, err := d.check(owner, st, b, logits, hidden)
	if err != nil {
		return nil, 0, err
	}
	s.begin(b, chain, 0)
	return s, nOut, nil
}

// check validates a forward call on a state of owner, changing nothing.
// It returns the state, whether b is a chain and the number of tokens that
// want logits.
func (d *decoder) check(owner stateOwner, st State, b *Batch, logits, hidden []float32) (*state, bool, int, error) {
	s, ok := st.(*state)
	if !ok || s.owner != owner {
		return nil, false, 0, fmt.Errorf("model: state was not made by this model (or is the MTP head's)")
	}
	if s.pending > 0 {
		return nil, false, 0, fmt.Errorf("model: a tree batch of %d tokens is pending; Commit a path first", s.pending)
	}
	chain, err := b.check(d.hp.Vocab)
	if err != nil {
		return nil, false, 0, err
	}
	n := len(b.Tokens)
	if s.n+n > s.max {
		return nil, false, 0, fmt.Errorf("model: state holds %d of %d tokens; a batch of %d does not fit", s.n, s.max, n)
	}
	nOut := 0
	for i := range b.Tokens {
		if b.wantsLogits(i) {
			nOut++
		}
	}
	if len(logits) < nOut*d.hp.Vocab {
		return nil, false, 0, fmt.Errorf("model: logits has room for %d floats, %d tokens want %d", len(logits), nOut, nOut*d.hp.Vocab)
	}
	if hidden != nil && len(hidden) < nOut*d.hp.Embd {
		return nil, false, 0, fmt.Errorf("model: hidden has room for %d floats, %d tokens want %d", len(hidden), nOut, nOut*d.hp.Embd)
	}
	return s, chain, nOut, nil
}

// commitRecurrent replays the accepted path through every DeltaNet layer.
func (d *decoder) commitRecurrent(s *state, path []int) {
	for li := range d.layers {
		if dn := d.layers[li].delta; dn != nil {
			dn.replay(d, s, li, path)
		}
	}
}

// runLayers runs the decoder blocks over the rows of pass p (their
// embeddings in p.rows.x) and leaves in x only the rows that want logits,
// nOut of them, sequence after sequence; it returns nOut. Like llama.cpp's
// inp_out_ids, llama drops the other rows before the last block's
// feed-forward part, qwen35 (embeddings_nextn_masked off) only after the
// last block; a row's values are the same either way.
//
// The matrix products take every row of the pass at once (the weights are
// read once for all sequences); attention and the DeltaNet's conv and
// recurrence run per sequence on its own state. A row's bits do not depend
// on the other rows of the pass: engine/tensor's products give each (row,
// vector) pair the one-vector kernel's sum whatever the number of vectors,
// and every other step is per row or per sequence.
func (d *decoder) runLayers(p *pass, layers []layer, nOut int) int {
	E := d.hp.Embd
	r := p.rows
	x := r.x
	rows := p.n
	for li := range layers {
		L := &layers[li]
		h := r.h[:rows*E]
		y := r.y[:rows*E]
		rmsNormRows(h, x[:rows*E], L.attnNorm, rows, E, d.eps)
		if L.attn != nil {
			L.attn.forward(d, p, li, h, y)
		} else {
			L.delta.forward(d, p, li, h, y)
		}
		if d.gatherEarly && li == len(layers)-1 && nOut < rows {
			p.keepRows(x, E)
			p.keepRows(y, E)
			rows = nOut
		}
		tensor.Add(x[:rows*E], y[:rows*E])
		h = r.h[:rows*E]
		y = r.y[:rows*E]
		rmsNormRows(h, x[:rows*E], L.ffnNorm, rows, E, d.eps)
		L.mlp.forward(d, r, h, rows, y)
		tensor.Add(x[:rows*E], y[:rows*E])
	}
	if rows > nOut {
		p.keepRows(x, E)
	}
	return nOut
}

// head normalises the rows of x and projects them to logits; hidden, when
// not nil, receives the normed rows, which stay in r.h.
func (d *decoder) head(r *rowBufs, x []float32, rows int, norm []float32, out *linear, logits, hidden []float32) {
	if rows == 0 {
		return
	}
	E, V := d.hp.Embd, d.hp.Vocab
	h := r.h[:rows*E]
	rmsNormRows(h, x, norm, rows, E, d.eps)
	d.mm(out, logits[:rows*V], h, rows)
	if hidden != nil {
		copy(hidden[:rows*E], h)
	}
}

// mm applies l to n rows of x: one matrix-vector product per weight read
// for a single token, one matrix product for a batch.
func (d *decoder) mm(l *linear, dst, x []float32, n int) {
	if n == 0 {
		return
	}
	rows, cols := l.m.Rows, l.m.Cols
	dst, x = dst[:n*rows], x[:n*cols]
	if d.observe != nil {
		d.observe(l.name, x, n, cols)
	}
	switch {
	case d.sgemmF32 && n >= 2 && l.m.Type == tensor.F32 && cols%8 == 0 && rows%4 == 0:
		sgemmF32(dst, l.m, x, n)
	case n == 1:
		d.pool.MatVec(dst, l.m, x)
	default:
		d.pool.MatMul(dst, l.m, x, n)
	}
	if l.scale != 0 {
		tensor.Scale(dst, l.scale)
	}
	if l.bias != nil {
		for r := 0; r < n; r++ {
			tensor.Add(dst[r*rows:(r+1)*rows], l.bias)
		}
	}
}

// shape sizes the scratch buffers of a state for this model.
func (d *decoder) shape() workShape {
	ws := workShape{embd: d.hp.Embd, ffn: d.hp.FFN, ropeDims: d.hp.RopeDims}
	for i := range d.layers {
		ws.add(&d.layers[i])
	}
	if d.mtp != nil {
		ws.add(&d.mtp.layers[0])
		ws.cat = 2 * d.hp.Embd
	}
	return ws
}
