package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// gpuState is one sequence on the device: the KV cache of every attention
// layer, the recurrent state of every DeltaNet layer, and the scratch of
// the forward passes it runs alone. Committed tokens first in the cache,
// then the pending nodes of a tree batch, as in the CPU state.
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

	// per sequence on the device: attention's and DeltaNet's scratch
	// (sized for cap tokens), a pending batch's DeltaNet replay inputs
	attnScratch  *Buffer
	deltaScratch *Buffer
	saved        []*Buffer // per DeltaNet layer

	// host-visible: a pending batch's parents and ancestry, a Commit's path
	anc, parents, path *Buffer

	p    *passBufs  // the scratch of the passes it runs alone, cap tokens
	solo [1]segment // the one segment of such a pass

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
	C := int64(s.cap)
	kvt := m.w.KVType
	var attnBytes, deltaBytes int64
	s.kv = make([]kvCache, len(layers))
	s.rec = make([]DeltaState, len(layers))
	s.saved = make([]*Buffer, len(layers))
	for i := range layers {
		L := &layers[i]
		if a := L.w.Attn; a != nil {
			dim := a.KVHeads * a.HeadDim
			c := &s.kv[i]
			c.dim = dim
			c.k = buf(int64(maxTokens) * int64(dim) * kvBytes(kvt))
			c.v = buf(int64(maxTokens) * int64(dim) * kvBytes(kvt))
			attnBytes = max(attnBytes, AttnScratchBytes(AttnParams{Tokens: s.cap, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Base: maxTokens}))
		}
		if dn := L.w.Delta; dn != nil {
			s.rec[i] = DeltaState{
				S:    buf(int64(dn.VHeads*dn.HeadDim*dn.HeadDim) * 4).All(),
				Conv: buf(int64((dn.Kernel-1)*dn.ConvDim) * 4).All(),
			}
			s.saved[i] = buf(DeltaSavedBytes(L.delta, maxTreeNodes))
			deltaBytes = max(deltaBytes, DeltaScratchBytes(L.delta, s.cap))
		}
	}
	s.attnScratch, s.deltaScratch = buf(attnBytes), buf(deltaBytes)
	s.parents, s.path = host(C*4), host(C*4)
	nodes := int64(maxTreeNodes)
	s.anc = host((nodes + 1 + nodes*(nodes+1)/2) * 4)
	if err != nil {
		return nil, err
	}
	if s.p, err = m.newPassBufs(layers, s.cap, mtp); err != nil {
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
	s.p.free()
	s.p = nil
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
