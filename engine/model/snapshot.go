package model

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// KVRows is a copy of the attention keys and values of a run of tokens, in
// every attention layer of a model. It is immutable once made, so several
// snapshots may share it (a prefix cache keeps one per page).
type KVRows struct {
	n      int
	layers []kvRows // per layer; empty for layers without attention
}

// kvRows is one layer's rows: one pair of slices is set, as in kvCache (k8
// and v8 hold E4M3 codes, to be multiplied by the layer's k_scale and
// v_scale, which come from the model file and are not copied).
type kvRows struct {
	k16, v16 []uint16
	k32, v32 []float32
	k8, v8   []byte
}

// Len is the number of tokens the rows hold.
func (r *KVRows) Len() int { return r.n }

// Bytes is the memory the rows take.
func (r *KVRows) Bytes() int64 {
	var b int64
	for i := range r.layers {
		l := &r.layers[i]
		b += 2*int64(len(l.k16)+len(l.v16)) + 4*int64(len(l.k32)+len(l.v32)) + int64(len(l.k8)+len(l.v8))
	}
	return b
}

// Recurrent is a copy of the per-DeltaNet-layer recurrent state and conv
// window after a sequence's last token.
type Recurrent struct {
	layers []recCopy // per layer; empty for attention layers
}

type recCopy struct{ s, conv []float32 }

// Bytes is the memory the copy takes.
func (r *Recurrent) Bytes() int64 {
	var b int64
	for i := range r.layers {
		b += 4 * int64(len(r.layers[i].s)+len(r.layers[i].conv))
	}
	return b
}

// Snapshot is what a state needs to resume at Len tokens: the KV rows of
// tokens [0, Len), as consecutive runs (which may be shared with other
// snapshots), and the recurrent state at Len (nil for a model without
// DeltaNet layers).
type Snapshot struct {
	Len       int
	KV        []*KVRows
	Recurrent *Recurrent
}

// Bytes is the memory the snapshot's own parts take, shared runs counted.
func (sn *Snapshot) Bytes() int64 {
	var b int64
	for _, r := range sn.KV {
		b += r.Bytes()
	}
	if sn.Recurrent != nil {
		b += sn.Recurrent.Bytes()
	}
	return b
}

// CopyKV copies the KV rows of tokens [from, to) of a committed sequence.
func (s *state) CopyKV(from, to int) (*KVRows, error) {
	if from < 0 || to < from || to > s.n {
		return nil, fmt.Errorf("model: CopyKV [%d, %d) of a state of %d tokens", from, to, s.n)
	}
	r := &KVRows{n: to - from, layers: make([]kvRows, len(s.kv))}
	for i := range s.kv {
		c := &s.kv[i]
		if c.dim == 0 {
			continue
		}
		a, b := from*c.dim, to*c.dim
		switch {
		case c.k16 != nil:
			r.layers[i].k16 = append([]uint16(nil), c.k16[a:b]...)
			r.layers[i].v16 = append([]uint16(nil), c.v16[a:b]...)
		case c.k8 != nil:
			r.layers[i].k8 = append([]byte(nil), c.k8[a:b]...)
			r.layers[i].v8 = append([]byte(nil), c.v8[a:b]...)
		default:
			r.layers[i].k32 = append([]float32(nil), c.k32[a:b]...)
			r.layers[i].v32 = append([]float32(nil), c.v32[a:b]...)
		}
	}
	return r, nil
}

// Snapshot copies the state at Len(): all its KV rows in one run and its
// recurrent state.
func (s *state) Snapshot() (Snapshot, error) {
	return s.SnapshotWith(nil)
}

// SnapshotWith is Snapshot reusing shared runs for the first tokens: the
// runs in kv (which the caller copied from this very sequence) cover
// tokens [0, m), m <= Len(); the rows [m, Len()) are copied into one more
// run.
func (s *state) SnapshotWith(kv []*KVRows) (Snapshot, error) {
	if s.pending > 0 {
		return Snapshot{}, fmt.Errorf("model: cannot snapshot a state with a pending tree batch of %d tokens", s.pending)
	}
	m := 0
	for _, r := range kv {
		if err := s.checkRows(r); err != nil {
			return Snapshot{}, err
		}
		m += r.n
	}
	if m > s.n {
		return Snapshot{}, fmt.Errorf("model: snapshot runs cover %d tokens, the state holds %d", m, s.n)
	}
	sn := Snapshot{Len: s.n, KV: append([]*KVRows(nil), kv...)}
	if m < s.n || len(sn.KV) == 0 {
		tail, err := s.CopyKV(m, s.n)
		if err != nil {
			return Snapshot{}, err
		}
		sn.KV = append(sn.KV, tail)
	}
	if s.hasRecurrent() {
		rc := &Recurrent{layers: make([]recCopy, len(s.rec))}
		for i := range s.rec {
			if s.rec[i].s == nil {
				continue
			}
			rc.layers[i].s = append([]float32(nil), s.rec[i].s...)
			rc.layers[i].conv = append([]float32(nil), s.rec[i].conv...)
		}
		sn.Recurrent = rc
	}
	return sn, nil
}

// checkRows checks that r has this state's layer shapes.
func (s *state) checkRows(r *KVRows) error {
	dims := make([]int, len(s.kv))
	kvType := tensor.F32
	for i := range s.kv {
		c := &s.kv[i]
		dims[i] = c.dim
		switch {
		case c.k16 != nil:
			kvType = tensor.F16
		case c.k8 != nil:
			kvType = tensor.E4M3
		}
	}
	return r.Check(kvType, dims)
}

// Check reports whether r fits a state whose attention layers hold dims[i]
// values a token (0: no attention) in a cache of kvType: the same layers,
// the KV type's slices and nothing else, r.Len() rows each.
func (r *KVRows) Check(kvType tensor.DType, dims []int) error {
	if r == nil || len(r.layers) != len(dims) {
		return fmt.Errorf("model: KV rows were not made by a state of this model")
	}
	for i, dim := range dims {
		l := &r.layers[i]
		want := r.n * dim
		var ok bool
		switch kvType {
		case tensor.F16:
			ok = len(l.k16) == want && len(l.v16) == want && l.k32 == nil && l.k8 == nil
		case tensor.E4M3:
			ok = len(l.k8) == want && len(l.v8) == want && l.k16 == nil && l.k32 == nil
		default:
			ok = len(l.k32) == want && len(l.v32) == want && l.k16 == nil && l.k8 == nil
		}
		if !ok {
			return fmt.Errorf("model: KV rows of layer %d do not fit this state (other model or KV type)", i)
		}
	}
	return nil
}

// Restore sets the state to sn: its KV rows and recurrent state. A pending
// tree batch is dropped.
func (s *state) Restore(sn Snapshot) error {
	if sn.Len < 0 || sn.Len > s.max {
		return fmt.Errorf("model: snapshot of %d tokens does not fit a state of %d", sn.Len, s.max)
	}
	m := 0
	for _, r := range sn.KV {
		if err := s.checkRows(r); err != nil {
			return err
		}
		m += r.n
	}
	if m != sn.Len {
		return fmt.Errorf("model: snapshot of %d tokens holds KV rows of %d", sn.Len, m)
	}
	if s.hasRecurrent() {
		if sn.Recurrent == nil || len(sn.Recurrent.layers) != len(s.rec) {
			return fmt.Errorf("model: snapshot has no recurrent state for this model's DeltaNet layers")
		}
		for i := range s.rec {
			if l := &sn.Recurrent.layers[i]; len(l.s) != len(s.rec[i].s) || len(l.conv) != len(s.rec[i].conv) {
				return fmt.Errorf("model: snapshot's recurrent state of layer %d does not fit this model", i)
			}
		}
	} else if sn.Recurrent != nil {
		return fmt.Errorf("model: snapshot has recurrent state, this model has no DeltaNet layers")
	}
	pos := 0
	for _, r := range sn.KV {
		for i := range s.kv {
			c, l := &s.kv[i], &r.layers[i]
			if c.dim == 0 {
				continue
			}
			a := pos * c.dim
			switch {
			case c.k16 != nil:
				copy(c.k16[a:], l.k16)
				copy(c.v16[a:], l.v16)
			case c.k8 != nil:
				copy(c.k8[a:], l.k8)
				copy(c.v8[a:], l.v8)
			default:
				copy(c.k32[a:], l.k32)
				copy(c.v32[a:], l.v32)
			}
		}
		pos += r.n
	}
	if sn.Recurrent != nil {
		for i := range s.rec {
			copy(s.rec[i].s, sn.Recurrent.layers[i].s)
			copy(s.rec[i].conv, sn.Recurrent.layers[i].conv)
		}
	}
	s.n = sn.Len
	s.pending = 0
	return nil
}

// AbsMax returns, per layer, the largest magnitude among the keys and
// among the values the rows hold (E4M3 codes decoded without the layer's
// scale); 0 for layers without attention. Calibration of FP8 KV scales
// (engine/quantize) reads it from rows of an F32 or F16 cache.
func (r *KVRows) AbsMax() (k, v []float32) {
	k, v = make([]float32, len(r.layers)), make([]float32, len(r.layers))
	amax := func(x float32, m float32) float32 {
		if x < 0 {
			x = -x
		}
		return max(x, m)
	}
	for i := range r.layers {
		l := &r.layers[i]
		for j := range l.k32 {
			k[i], v[i] = amax(l.k32[j], k[i]), amax(l.v32[j], v[i])
		}
		for j := range l.k16 {
			k[i], v[i] = amax(tensor.F16ToF32(l.k16[j]), k[i]), amax(tensor.F16ToF32(l.v16[j]), v[i])
		}
		for j := range l.k8 {
			k[i], v[i] = amax(tensor.E4M3ToF32(l.k8[j]), k[i]), amax(tensor.E4M3ToF32(l.v8[j]), v[i])
		}
	}
	return k, v
}
