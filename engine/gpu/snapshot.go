package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// A snapshot of a GPU state is the same model.Snapshot the CPU state makes
// (KV rows in the cache's type, recurrent state in ggml's layout), copied
// from the device; Restore copies it back. The arithmetic that wrote the
// rows is the GPU's, so the prefix cache's fingerprint names the engine.

func (s *gpuState) CopyKV(from, to int) (*model.KVRows, error) {
	if s.err != nil {
		return nil, s.err
	}
	if from < 0 || to < from || to > s.n {
		return nil, fmt.Errorf("GPU model: cannot copy KV rows [%d, %d) of a state of %d tokens", from, to, s.n)
	}
	kvt := s.m.w.KVType
	es := kvBytes(kvt)
	layers := make([]model.KVLayer, len(s.kv))
	for i := range s.kv {
		c := &s.kv[i]
		if c.dim == 0 {
			continue
		}
		n := (to - from) * c.dim
		off := int64(from*c.dim) * es
		l := &layers[i]
		var kb, vb []byte
		switch kvt {
		case tensor.F16:
			l.K16, l.V16 = make([]uint16, n), make([]uint16, n)
			kb, vb = u16Bytes(l.K16), u16Bytes(l.V16)
		case tensor.E4M3:
			l.K8, l.V8 = make([]byte, n), make([]byte, n)
			kb, vb = l.K8, l.V8
		default:
			l.K32, l.V32 = make([]float32, n), make([]float32, n)
			kb, vb = f32Bytes(l.K32), f32Bytes(l.V32)
		}
		if n == 0 {
			continue
		}
		if err := s.m.dev.Download(c.k.Slice(off, int64(len(kb))), kb); err != nil {
			return nil, err
		}
		if err := s.m.dev.Download(c.v.Slice(off, int64(len(vb))), vb); err != nil {
			return nil, err
		}
	}
	return model.NewKVRows(to-from, layers), nil
}

func (s *gpuState) Snapshot() (model.Snapshot, error) { return s.SnapshotWith(nil) }

func (s *gpuState) SnapshotWith(kv []*model.KVRows) (model.Snapshot, error) {
	if s.err != nil {
		return model.Snapshot{}, s.err
	}
	if s.pending > 0 {
		return model.Snapshot{}, fmt.Errorf("GPU model: cannot snapshot a state with a pending tree batch of %d tokens", s.pending)
	}
	m := 0
	for _, r := range kv {
		if err := s.checkRows(r); err != nil {
			return model.Snapshot{}, err
		}
		m += r.Len()
	}
	if m > s.n {
		return model.Snapshot{}, fmt.Errorf("GPU model: snapshot runs cover %d tokens, the state holds %d", m, s.n)
	}
	sn := model.Snapshot{Len: s.n, KV: append([]*model.KVRows(nil), kv...)}
	if m < s.n || len(sn.KV) == 0 {
		tail, err := s.CopyKV(m, s.n)
		if err != nil {
			return model.Snapshot{}, err
		}
		sn.KV = append(sn.KV, tail)
	}
	if s.hasRecurrent() {
		layers := make([]model.RecurrentLayer, len(s.rec))
		for i, st := range s.rec {
			if st.S.Buf == nil {
				continue
			}
			l := &layers[i]
			l.S = make([]float32, st.S.Size/4)
			l.Conv = make([]float32, st.Conv.Size/4)
			if err := s.m.dev.Download(st.S, f32Bytes(l.S)); err != nil {
				return model.Snapshot{}, err
			}
			if len(l.Conv) > 0 {
				if err := s.m.dev.Download(st.Conv, f32Bytes(l.Conv)); err != nil {
					return model.Snapshot{}, err
				}
			}
		}
		sn.Recurrent = model.NewRecurrent(layers)
	}
	return sn, nil
}

// checkRows checks that r has this state's layer shapes and KV type.
func (s *gpuState) checkRows(r *model.KVRows) error {
	dims := make([]int, len(s.kv))
	for i := range s.kv {
		dims[i] = s.kv[i].dim
	}
	return r.Check(s.m.w.KVType, dims)
}

func (s *gpuState) Restore(sn model.Snapshot) error {
	if s.err != nil {
		return s.err
	}
	if sn.Len < 0 || sn.Len > s.max {
		return fmt.Errorf("GPU model: snapshot of %d tokens does not fit a state of %d", sn.Len, s.max)
	}
	m := 0
	for _, r := range sn.KV {
		if err := s.checkRows(r); err != nil {
			return err
		}
		m += r.Len()
	}
	if m != sn.Len {
		return fmt.Errorf("GPU model: snapshot of %d tokens holds KV rows of %d", sn.Len, m)
	}
	if s.hasRecurrent() {
		if sn.Recurrent == nil || sn.Recurrent.Layers() != len(s.rec) {
			return fmt.Errorf("GPU model: snapshot has no recurrent state for this model's DeltaNet layers")
		}
		for i, st := range s.rec {
			l := sn.Recurrent.Layer(i)
			if int64(4*len(l.S)) != st.S.Size || int64(4*len(l.Conv)) != st.Conv.Size {
				return fmt.Errorf("GPU model: snapshot's recurrent state of layer %d does not fit this model", i)
			}
		}
	} else if sn.Recurrent != nil {
		return fmt.Errorf("GPU model: snapshot has recurrent state, this model has no DeltaNet layers")
	}
	es := kvBytes(s.m.w.KVType)
	pos := 0
	for _, r := range sn.KV {
		for i := range s.kv {
			c, l := &s.kv[i], r.Layer(i)
			if c.dim == 0 || r.Len() == 0 {
				continue
			}
			var kb, vb []byte
			switch {
			case l.K16 != nil:
				kb, vb = u16Bytes(l.K16), u16Bytes(l.V16)
			case l.K8 != nil:
				kb, vb = l.K8, l.V8
			default:
				kb, vb = f32Bytes(l.K32), f32Bytes(l.V32)
			}
			off := int64(pos*c.dim) * es
			if err := s.m.dev.Upload(c.k.Slice(off, int64(len(kb))), kb); err != nil {
				return err
			}
			if err := s.m.dev.Upload(c.v.Slice(off, int64(len(vb))), vb); err != nil {
				return err
			}
		}
		pos += r.Len()
	}
	if sn.Recurrent != nil {
		for i, st := range s.rec {
			if st.S.Buf == nil {
				continue
			}
			l := sn.Recurrent.Layer(i)
			if err := s.m.dev.Upload(st.S, f32Bytes(l.S)); err != nil {
				return err
			}
			if len(l.Conv) > 0 {
				if err := s.m.dev.Upload(st.Conv, f32Bytes(l.Conv)); err != nil {
					return err
				}
			}
		}
	}
	s.n = sn.Len
	s.pending = 0
	return nil
}
