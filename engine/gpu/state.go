package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// gpuState is one sequence on the device: the KV cache of every attention
// layer, the recurrent state of every DeltaNet layer, and the scratch of
// one forward pass. Committed tokens first in the cache, then the pending
// nodes of a tree batch, as in the CPU state.
type gpuState struct {
	m      *gpuModel
	mtp    bool // the MTP head's state
	layers []gpuLayer
	err    error // why the state could not be made
	max    int
	n      int // committed tokens
	cap    int // tokens one pass holds

	pending      int
	parent       []int32
	chain        bool // the batch in flight is a chain
	pendingBatch bool // it stays pending until Commit

	kv  []kvCache
	rec []DeltaState

	// device scratch, cap tokens each
	x, h, y, g         *Buffer
	qf, q, gate, k, v  *Buffer
	o, ffa, ffb        *Buffer
	mix, z, beta, alph *Buffer
	dout               *Buffer
	cat                *Buffer // MTP: [norm(embed) | norm(h)] per token
	mmScratch          *Buffer
	attnScratch        *Buffer
	deltaScratch       *Buffer
	saved              []*Buffer // per DeltaNet layer: a pending batch's replay inputs

	// host-visible parameters and results
	ids, cs, anc, outIdx, parents, path *Buffer
	logits, hidden, hin                 *Buffer // results; the MTP head's input hidden states
	logitsDev, top                      *Buffer // greedy steps: logits on the device, top tokens back

	owned          []*Buffer
	ancOff, ancIdx []int32 // scratch for a tree's ancestry lists
}

// kvCache is one attention layer's keys and values on the device.
type kvCache struct {
	dim  int // KV heads × head size
	k, v *Buffer
}

func kvBytes(t tensor.DType) int64 {
	switch t {
	case tensor.F16:
		return 2
	case tensor.E4M3:
		return 1
	}
	return 4
}

func newState(m *gpuModel, layers []gpuLayer, maxTokens int, mtp bool) (s *gpuState, err error) {
	if maxTokens <= 0 {
		return nil, fmt.Errorf("GPU model: a state of %d tokens", maxTokens)
	}
	st := &gpuState{m: m, mtp: mtp, layers: layers, max: maxTokens, cap: min(maxTokens, chunkTokens)}
	st.cap = max(st.cap, min(maxTokens, maxTreeNodes))
	s = st
	defer func() {
		if err != nil {
			st.free() // what was made before the failure
			s = nil
		}
	}()
	d := m.dev
	buf := func(size int64) *Buffer {
		if err != nil {
			return nil
		}
		var b *Buffer
		if b, err = d.NewBuffer(size); err == nil {
			s.owned = append(s.owned, b)
		}
		return b
	}
	host := func(size int64) *Buffer {
		if err != nil {
			return nil
		}
		var b *Buffer
		if b, err = d.NewHostBuffer(size); err == nil {
			s.owned = append(s.owned, b)
		}
		return b
	}
	hp := m.hp
	C := int64(s.cap)
	E := int64(hp.Embd)
	kvt := m.w.KVType
	var qFull, qDim, kvDim, convDim, valueDim, vHeads, ffn, rd int64
	ffn = int64(hp.FFN)
	var mmBytes, attnBytes, deltaBytes int64
	linears := []*gpuLinear{&m.output}
	s.kv = make([]kvCache, len(layers))
	s.rec = make([]DeltaState, len(layers))
	s.saved = make([]*Buffer, len(layers))
	for i := range layers {
		L := &layers[i]
		ffn = max(ffn, int64(L.gate.m.Rows))
		linears = append(linears, &L.gate, &L.up, &L.down)
		if a := L.w.Attn; a != nil {
			qFull = max(qFull, int64(L.q.m.Rows))
			qDim = max(qDim, int64(a.Heads*a.HeadDim))
			dim := a.KVHeads * a.HeadDim
			kvDim = max(kvDim, int64(dim))
			rd = max(rd, int64(a.Rope.Dims()))
			c := &s.kv[i]
			c.dim = dim
			c.k = buf(int64(maxTokens) * int64(dim) * kvBytes(kvt))
			c.v = buf(int64(maxTokens) * int64(dim) * kvBytes(kvt))
			attnBytes = max(attnBytes, AttnScratchBytes(AttnParams{Tokens: s.cap, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Base: maxTokens}))
			linears = append(linears, &L.q, &L.k, &L.v, &L.o)
		}
		if dn := L.w.Delta; dn != nil {
			convDim = max(convDim, int64(dn.ConvDim))
			valueDim = max(valueDim, int64(dn.ValueDim))
			vHeads = max(vHeads, int64(dn.VHeads))
			s.rec[i] = DeltaState{
				S:    buf(int64(dn.VHeads*dn.HeadDim*dn.HeadDim) * 4).All(),
				Conv: buf(int64((dn.Kernel-1)*dn.ConvDim) * 4).All(),
			}
			s.saved[i] = buf(DeltaSavedBytes(L.delta, maxTreeNodes))
			deltaBytes = max(deltaBytes, DeltaScratchBytes(L.delta, s.cap))
			linears = append(linears, &L.qkv, &L.z, &L.beta, &L.alpha, &L.out)
		}
	}
	if mtp {
		linears = append(linears, &m.mtp.ehProj, &m.mtp.head)
	}
	for _, l := range linears {
		mmBytes = max(mmBytes, MatMulScratchBytes(l.m, s.cap, m.act))
	}
	s.x, s.h, s.y, s.g = buf(C*E*4), buf(C*E*4), buf(C*E*4), buf(C*E*4)
	s.qf, s.q, s.gate, s.o = buf(C*qFull*4), buf(C*qDim*4), buf(C*qDim*4), buf(C*qDim*4)
	s.k, s.v = buf(C*kvDim*4), buf(C*kvDim*4)
	s.ffa, s.ffb = buf(C*ffn*4), buf(C*ffn*4)
	s.mix, s.z, s.dout = buf(C*convDim*4), buf(C*valueDim*4), buf(C*valueDim*4)
	s.beta, s.alph = buf(C*vHeads*4), buf(C*vHeads*4)
	if mtp {
		s.cat = buf(C * 2 * E * 4)
	}
	s.mmScratch, s.attnScratch, s.deltaScratch = buf(mmBytes), buf(attnBytes), buf(deltaBytes)
	s.ids, s.outIdx, s.parents, s.path = host(C*4), host(C*4), host(C*4), host(C*4)
	s.cs = host(C * max(rd, 2) * 4)
	nodes := int64(maxTreeNodes)
	s.anc = host((nodes + 1 + nodes*(nodes+1)/2) * 4)
	if err != nil {
		return nil, err
	}
	if err := s.zeroRecurrent(); err != nil {
		return nil, err
	}
	return s, nil
}

// Err is why the state could not be made (device memory), or nil.
func (s *gpuState) Err() error { return s.err }

// Close releases the state's device memory; the state is unusable after.
func (s *gpuState) Close() {
	s.free()
	s.err = fmt.Errorf("GPU model: the state was closed")
}

func (s *gpuState) free() {
	for _, b := range s.owned {
		b.Free()
	}
	s.owned = nil
	s.logits.Free()
	s.hidden.Free()
	s.hin.Free()
	s.logitsDev.Free()
	s.top.Free()
	s.logits, s.hidden, s.hin, s.logitsDev, s.top = nil, nil, nil, nil, nil
}

// devBuf returns *b grown to at least size bytes (device-local).
func (s *gpuState) devBuf(b **Buffer, size int64) (*Buffer, error) {
	if *b != nil && (*b).Size() >= size {
		return *b, nil
	}
	(*b).Free()
	*b = nil
	nb, err := s.m.dev.NewBuffer(size)
	if err != nil {
		return nil, err
	}
	*b = nb
	return nb, nil
}

// hostBuf returns *b grown to at least size bytes (host-visible).
func (s *gpuState) hostBuf(b **Buffer, size int64) (*Buffer, error) {
	if *b != nil && (*b).Size() >= size {
		return *b, nil
	}
	(*b).Free()
	*b = nil
	nb, err := s.m.dev.NewHostBuffer(size)
	if err != nil {
		return nil, err
	}
	*b = nb
	return nb, nil
}

func (s *gpuState) zeroRecurrent() error {
	if !s.hasRecurrent() {
		return nil
	}
	r := s.m.dev.Begin()
	for _, st := range s.rec {
		if st.S.Buf != nil {
			r.Fill(st.S, 0)
			r.Fill(st.Conv, 0)
		}
	}
	_, err := r.Submit()
	return err
}

func (s *gpuState) hasRecurrent() bool {
	for _, st := range s.rec {
		if st.S.Buf != nil {
			return true
		}
	}
	return false
}

func (s *gpuState) Len() int { return s.n }

func (s *gpuState) Commit(path []int) error {
	if s.err != nil {
		return s.err
	}
	if s.pending == 0 {
		if len(path) == 0 {
			return nil
		}
		return fmt.Errorf("GPU model: Commit of %d nodes, but no tree batch is pending", len(path))
	}
	if err := model.CheckPath(s.parent, s.pending, path); err != nil {
		return err
	}
	pb := bytesI32(s.path.Bytes())
	for k, idx := range path {
		pb[k] = int32(idx)
	}
	r := s.m.dev.Begin()
	es := kvBytes(s.m.w.KVType)
	for i := range s.kv {
		c := &s.kv[i]
		if c.dim == 0 {
			continue
		}
		row := int64(c.dim) * es
		for k, idx := range path {
			if idx != k {
				// Later copies may read a slot an earlier one wrote, and
				// write one an earlier one read: a barrier between each.
				r.Copy(c.k.Slice(int64(s.n+k)*row, row), c.k.Slice(int64(s.n+idx)*row, row), row)
				r.Copy(c.v.Slice(int64(s.n+k)*row, row), c.v.Slice(int64(s.n+idx)*row, row), row)
				r.Barrier()
			}
		}
	}
	for i := range s.layers {
		if L := &s.layers[i]; L.delta != nil && len(path) > 0 {
			r.DeltaReplay(L.delta, s.rec[i], s.saved[i].All(), s.path.All(), len(path), s.deltaScratch.All())
			r.Barrier()
		}
	}
	if _, err := r.Submit(); err != nil {
		return err
	}
	s.n += len(path)
	s.pending = 0
	return nil
}

func (s *gpuState) Truncate(n int) error {
	s.pending = 0
	if n < 0 || n > s.n {
		return fmt.Errorf("GPU model: cannot truncate a state of %d tokens to %d", s.n, n)
	}
	if n != s.n && s.hasRecurrent() {
		return fmt.Errorf("GPU model: cannot truncate %d tokens to %d: the recurrent (DeltaNet) state exists only at the end; restore a snapshot instead", s.n, n)
	}
	s.n = n
	return nil
}

func (s *gpuState) Reset() {
	s.n, s.pending = 0, 0
	if s.err == nil {
		if err := s.zeroRecurrent(); err != nil {
			s.err = err
		}
	}
}

var _ model.State = (*gpuState)(nil)
