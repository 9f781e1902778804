package model

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// State is one sequence's memory: attention KV and DeltaNet recurrent state.
type State interface {
	// Len is the number of committed tokens.
	Len() int
	// Commit keeps, of the pending tree batch, the nodes listed in path (a
	// root-to-node path of batch indices) and drops the rest.
	Commit(path []int) error
	// Truncate cuts the sequence to its first n tokens. Recurrent state
	// cannot be cut: for a model with DeltaNet layers it is an error unless
	// n == Len(). A pending tree batch is dropped.
	Truncate(n int) error
	// Reset empties the state.
	Reset()
	// Snapshot copies what the state needs to resume at Len(): the KV rows
	// of its tokens and, for DeltaNet layers, the recurrent state and conv
	// window. It fails while a tree batch is pending.
	Snapshot() (Snapshot, error)
	// SnapshotWith is Snapshot reusing runs of KV rows copied earlier from
	// this sequence (CopyKV) for its first tokens; only the rest is copied.
	SnapshotWith(kv []*KVRows) (Snapshot, error)
	// CopyKV copies the KV rows of committed tokens [from, to).
	CopyKV(from, to int) (*KVRows, error)
	// Restore sets the state to a snapshot made by a state of the same
	// model and KV type; it continues exactly as the snapshotted one would.
	Restore(Snapshot) error
}

// stateOwner is the model part whose layers a state serves (the decoder or
// its MTP head); it replays recurrent layers on Commit.
type stateOwner interface {
	commitRecurrent(s *state, path []int)
}

// kvCache holds one attention layer's keys (after norm and RoPE) and
// values, one slot of dim values per token: committed tokens first, then
// the pending nodes of a tree batch. Exactly one pair of slices is set, by
// the KV type: F16, F32, or E4M3 codes of K/kScale and V/vScale.
type kvCache struct {
	dim            int // KV heads × head size
	k16, v16       []uint16
	k32, v32       []float32
	k8, v8         []byte
	kScale, vScale float32 // E4M3: the layer's k_scale and v_scale
}

func (c *kvCache) moveSlot(dst, src int) {
	d, s := dst*c.dim, src*c.dim
	switch {
	case c.k16 != nil:
		copy(c.k16[d:d+c.dim], c.k16[s:s+c.dim])
		copy(c.v16[d:d+c.dim], c.v16[s:s+c.dim])
	case c.k8 != nil:
		copy(c.k8[d:d+c.dim], c.k8[s:s+c.dim])
		copy(c.v8[d:d+c.dim], c.v8[s:s+c.dim])
	default:
		copy(c.k32[d:d+c.dim], c.k32[s:s+c.dim])
		copy(c.v32[d:d+c.dim], c.v32[s:s+c.dim])
	}
}

// recurrent is one Gated DeltaNet layer's state after the last committed
// token.
type recurrent struct {
	s    []float32 // per value head d_v rows of d_k: s[j*d_k+i] = S[i][j], ggml's layout
	conv []float32 // the last K-1 conv inputs, oldest first, conv channels each
	// saved holds a pending tree's per-node layer inputs (conv input, g,
	// beta), from which Commit replays the accepted path.
	saved []float32
}

// state implements State for both architectures and for the MTP head.
type state struct {
	owner   stateOwner
	max     int
	n       int // committed tokens
	kv      []kvCache
	rec     []recurrent
	pending int     // nodes of an uncommitted tree batch
	parent  []int32 // their parents
	w       work
}

func newState(owner stateOwner, layers []layer, ws workShape, kvType tensor.DType, maxTokens int) *state {
	s := &state{owner: owner, max: maxTokens}
	s.kv = make([]kvCache, len(layers))
	s.rec = make([]recurrent, len(layers))
	for i := range layers {
		L := &layers[i]
		if a := L.attn; a != nil {
			c := &s.kv[i]
			c.dim = a.kvHeads * a.headDim
			switch kvType {
			case tensor.F16:
				c.k16 = make([]uint16, maxTokens*c.dim)
				c.v16 = make([]uint16, maxTokens*c.dim)
			case tensor.E4M3:
				c.k8 = make([]byte, maxTokens*c.dim)
				c.v8 = make([]byte, maxTokens*c.dim)
				c.kScale, c.vScale = a.kScale, a.vScale
			default:
				c.k32 = make([]float32, maxTokens*c.dim)
				c.v32 = make([]float32, maxTokens*c.dim)
			}
		}
		if dn := L.delta; dn != nil {
			r := &s.rec[i]
			r.s = make([]float32, dn.vHeads*dn.headDim*dn.headDim)
			r.conv = make([]float32, (dn.kernel-1)*dn.convDim)
		}
	}
	s.w.init(s, ws, maxTokens)
	return s
}

func (s *state) Len() int { return s.n }

// begin readies the state's scratch for batch b, whose rows start at off
// in the pass.
func (s *state) begin(b *Batch, chain bool, off int) {
	s.w.prepare(b, chain, s.n, off)
}

// finish commits a chain batch or leaves a tree (or verify) batch pending.
func (s *state) finish() {
	b := s.w.batch
	n := len(b.Tokens)
	if !s.w.pending {
		s.n += n
		return
	}
	s.pending = n
	s.parent = append(s.parent[:0], b.Parent...)
}

func (s *state) Commit(path []int) error {
	if s.pending == 0 {
		if len(path) == 0 {
			return nil
		}
		return fmt.Errorf("model: Commit of %d nodes, but no tree batch is pending", len(path))
	}
	if err := CheckPath(s.parent, s.pending, path); err != nil {
		return err
	}
	for i := range s.kv {
		c := &s.kv[i]
		if c.dim == 0 {
			continue
		}
		for k, idx := range path {
			if idx != k {
				c.moveSlot(s.n+k, s.n+idx)
			}
		}
	}
	s.owner.commitRecurrent(s, path)
	s.n += len(path)
	s.pending = 0
	return nil
}

func (s *state) hasRecurrent() bool {
	for i := range s.rec {
		if s.rec[i].s != nil {
			return true
		}
	}
	return false
}

func (s *state) Truncate(n int) error {
	s.pending = 0
	if n < 0 || n > s.n {
		return fmt.Errorf("model: cannot truncate a state of %d tokens to %d", s.n, n)
	}
	if n != s.n && s.hasRecurrent() {
		return fmt.Errorf("model: cannot truncate %d tokens to %d: the recurrent (DeltaNet) state exists only at the end; restore a snapshot instead", s.n, n)
	}
	s.n = n
	return nil
}

func (s *state) Reset() {
	s.n = 0
	s.pending = 0
	for i := range s.rec {
		clear(s.rec[i].s)
		clear(s.rec[i].conv)
	}
}

// workShape sizes the per-token scratch of a model.
type workShape struct {
	embd, ffn, ropeDims, cat int
	qFull, q, kv             int // attention: query(+gate) rows, query rows, K or V rows per token
	convDim, valueDim        int // DeltaNet: conv channels, value rows per token
	vHeads, headDim, kernel  int
	rec                      bool
}

func (ws *workShape) add(L *layer) {
	if a := L.attn; a != nil {
		ws.qFull = max(ws.qFull, a.wq.m.Rows)
		ws.q = max(ws.q, a.heads*a.headDim)
		ws.kv = max(ws.kv, a.kvHeads*a.headDim)
	}
	if dn := L.delta; dn != nil {
		ws.rec = true
		ws.convDim = max(ws.convDim, dn.convDim)
		ws.valueDim = max(ws.valueDim, dn.valueDim)
		ws.vHeads = max(ws.vHeads, dn.vHeads)
		ws.headDim = max(ws.headDim, dn.headDim)
		ws.kernel = max(ws.kernel, dn.kernel)
	}
}

// rowBufs are the per-token buffers of a forward pass: the inputs and
// outputs of the matrix products and of the per-row steps around them, one
// row per token. A state's own hold its batch when it runs alone; a pass
// over several sequences (ForwardMulti) uses the decoder's, which hold
// every sequence's rows one after another. Buffers hold up to cap tokens
// and grow when a longer batch comes.
type rowBufs struct {
	cap          int
	x, y, h, cat []float32
	cs           []float32 // RoPE cos/sin per token
	qf, q, k, v  []float32
	gate, o      []float32
	q16, acc16   []float32 // F16 query and accumulator per (token, head), widened
	ffa, ffb     []float32

	mix, qkv, z, beta, g, do []float32
}

// grow sizes the buffers for n tokens.
func (r *rowBufs) grow(ws workShape, n int) {
	if n <= r.cap {
		return
	}
	r.cap = n
	r.x = make([]float32, n*ws.embd)
	r.y = make([]float32, n*ws.embd)
	r.h = make([]float32, n*ws.embd)
	r.cat = make([]float32, n*ws.cat)
	r.cs = make([]float32, n*ws.ropeDims)
	r.qf = make([]float32, n*ws.qFull)
	r.q = make([]float32, n*ws.q)
	r.k = make([]float32, n*ws.kv)
	r.v = make([]float32, n*ws.kv)
	r.gate = make([]float32, n*ws.q)
	r.o = make([]float32, n*ws.q)
	r.q16 = make([]float32, n*ws.q)
	r.acc16 = make([]float32, n*ws.q)
	r.ffa = make([]float32, n*ws.ffn)
	r.ffb = make([]float32, n*ws.ffn)
	r.mix = make([]float32, n*ws.convDim)
	r.qkv = make([]float32, n*ws.convDim)
	r.z = make([]float32, n*ws.valueDim)
	r.do = make([]float32, n*ws.valueDim)
	r.beta = make([]float32, n*ws.vHeads)
	r.g = make([]float32, n*ws.vHeads)
}

// rowsOf returns rows [off, off+n) of a buffer of width values per row,
// capped so that a sequence's code cannot reach another's rows.
func rowsOf(buf []float32, off, n, width int) []float32 {
	return buf[off*width : (off+n)*width : (off+n)*width]
}

// work is one sequence's scratch for the forward pass, owned by its state
// so that a decode step allocates nothing: the batch being run, what its
// attention and DeltaNet steps keep per sequence, and the rows it uses
// when it runs alone (rowBufs).
type work struct {
	ws        workShape
	maxTokens int // the state's KV slots
	rowBufs       // this state's own rows

	// the batch being run
	batch   Batch
	chain   bool // every token's parent is the one before it
	pending bool // the batch waits for Commit (a tree, or a chain to verify)
	base    int  // committed tokens before the batch: its first KV slot
	off     int  // the batch's first row in the pass
	anc     ancestry

	delta          []float32 // per value head d_v
	nodeS, nodeWin []float32 // tree batches: per-node recurrent state and conv window

	solo    pass // a pass over this state alone
	soloSeq [1]*state

	// parallel jobs, bound once so that starting one allocates nothing
	att   attnJob
	attFn func(lo, hi int)
	dn    deltaJob
	dnFn  func(lo, hi int)
}

func (w *work) init(s *state, ws workShape, maxTokens int) {
	w.ws = ws
	w.maxTokens = maxTokens
	w.attFn = w.runAttention
	w.dnFn = w.runDelta
	if ws.rec {
		w.delta = make([]float32, ws.vHeads*ws.headDim)
	}
	w.soloSeq[0] = s
	w.solo.seqs = w.soloSeq[:]
	w.solo.rows = &w.rowBufs
}

// prepare records b, the batch this state runs next, whose first row in
// the pass is off.
func (w *work) prepare(b *Batch, chain bool, base, off int) {
	w.batch, w.chain, w.base, w.off = *b, chain, base, off
	w.pending = !chain || b.Verify
	if !chain {
		w.anc.build(b.Parent)
	}
}

// treeScratch sizes the per-node recurrent buffers of a tree batch of n.
func (w *work) treeScratch(n int) {
	ws := w.ws
	w.nodeS = growF32(w.nodeS, n*ws.vHeads*ws.headDim*ws.headDim)
	w.nodeWin = growF32(w.nodeWin, n*(ws.kernel-1)*ws.convDim)
}
