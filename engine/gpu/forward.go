package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// forward runs batch b on the state (begin checked it): a chain in passes of
// at most s.cap tokens, each committed at once (unless the batch is a
// verify chain); a tree, or a verify chain, in one pass that stays pending
// until Commit. inHidden is the MTP head's input (nil for the trunk).
func (s *gpuState) forward(b *model.Batch, logits, inHidden, hidden []float32, top []int32) error {
	n := len(b.Tokens)
	out := 0 // rows of logits written so far
	if s.pendingBatch {
		if err := s.pass(b, 0, n, &out, logits, inHidden, hidden, top); err != nil {
			return err
		}
		s.pending = n
		s.parent = append(s.parent[:0], b.Parent...)
		return nil
	}
	for c0 := 0; c0 < n; c0 += s.cap {
		c1 := min(n, c0+s.cap)
		if err := s.pass(b, c0, c1, &out, logits, inHidden, hidden, top); err != nil {
			return err
		}
		s.n += c1 - c0
	}
	return nil
}

// pass records and runs one forward pass over tokens [c0, c1) of b, whose
// KV rows go to the slots after the committed ones.
func (s *gpuState) pass(b *model.Batch, c0, c1 int, out *int, logits, inHidden, hidden []float32, top []int32) error {
	m := s.m
	E, V := m.hp.Embd, m.hp.Vocab
	nt := c1 - c0
	base := s.n

	// Parameters: token ids, RoPE tables, the rows that want logits, the
	// tree's parents and ancestry.
	ids := bytesI32(s.ids.Bytes())
	outIdx := bytesI32(s.outIdx.Bytes())
	nOut := 0
	for i := 0; i < nt; i++ {
		ids[i] = b.Tokens[c0+i]
		if b.WantsLogits(c0 + i) {
			outIdx[nOut] = int32(i)
			nOut++
		}
	}
	if rope, rd := s.rope(); rd > 0 {
		cs := bytesF32(s.cs.Bytes())
		for i := 0; i < nt; i++ {
			rope.Table(cs[i*rd:(i+1)*rd], b.Pos[c0+i])
		}
	}
	if s.pendingBatch {
		par := bytesI32(s.parents.Bytes())
		copy(par, b.Parent[c0:c1])
		if !s.chain {
			s.ancOff, s.ancIdx = model.AppendAncestry(s.ancOff[:0], s.ancIdx[:0], b.Parent[c0:c1])
			a := bytesI32(s.anc.Bytes())
			copy(a, s.ancOff)
			copy(a[len(s.ancOff):], s.ancIdx)
		}
	}
	var logitsBuf, hiddenBuf, topBuf *Buffer
	var err error
	if nOut > 0 && top != nil {
		// greedy: the logits stay on the device, the top tokens come back
		if logitsBuf, err = s.devBuf(&s.logitsDev, int64(nOut*V*4)); err != nil {
			return err
		}
		if topBuf, err = s.hostBuf(&s.top, int64(nOut*4)); err != nil {
			return err
		}
	} else if nOut > 0 {
		if logitsBuf, err = s.hostBuf(&s.logits, int64(nOut*V*4)); err != nil {
			return err
		}
	}
	if nOut > 0 {
		if hidden != nil {
			if hiddenBuf, err = s.hostBuf(&s.hidden, int64(nOut*E*4)); err != nil {
				return err
			}
		}
	}

	r := m.dev.Begin()
	x, h, y, g := s.x, s.h, s.y, s.g
	var layers []gpuLayer
	var norm *Buffer
	var head *gpuLinear
	if s.mtp {
		if err := s.mtpInput(r, nt, c0, inHidden); err != nil {
			r.Submit()
			return err
		}
		layers, norm, head = m.mtp.layers, m.mtp.headNorm, &m.mtp.head
	} else {
		r.GetRows(x.All(), m.embed, s.ids.All(), nt)
		r.Barrier()
		layers, norm, head = s.layers, m.norm, &m.output
	}
	rows := nt
	for li := range layers {
		L := &layers[li]
		r.RMSNorm(h.All(), x.All(), L.attnNorm.All(), rows, E, m.w.Eps)
		r.Barrier()
		if L.w.Attn != nil {
			s.attention(r, L, li, h, y, nt, base)
		} else {
			s.deltaNet(r, L, li, h, y, nt)
		}
		if m.w.GatherEarly && li == len(layers)-1 && nOut < nt {
			r.GatherRows(g.All(), x.All(), s.outIdx.All(), nOut, E)
			r.GatherRows(h.All(), y.All(), s.outIdx.All(), nOut, E)
			r.Barrier()
			x, g = g, x
			y, h = h, y
			rows = nOut
		}
		r.Add(x.All(), y.All(), rows*E)
		r.Barrier()
		r.RMSNorm(h.All(), x.All(), L.ffnNorm.All(), rows, E, m.w.Eps)
		r.Barrier()
		F := L.gate.m.Rows
		s.apply(r, &L.gate, s.ffa, h, rows)
		s.apply(r, &L.up, s.ffb, h, rows)
		r.SwiGLU(s.ffa.All(), s.ffa.All(), s.ffb.All(), rows*F)
		r.Barrier()
		s.apply(r, &L.down, y, s.ffa, rows)
		r.Add(x.All(), y.All(), rows*E)
		r.Barrier()
	}
	if rows > nOut {
		r.GatherRows(g.All(), x.All(), s.outIdx.All(), nOut, E)
		r.Barrier()
		x, g = g, x
	}
	if nOut > 0 {
		r.RMSNorm(h.All(), x.All(), norm.All(), nOut, E, m.w.Eps)
		r.Barrier()
		s.apply(r, head, logitsBuf, h, nOut)
		if topBuf != nil {
			r.Argmax(topBuf.All(), logitsBuf.All(), nOut, V)
		}
		if hiddenBuf != nil {
			r.Copy(hiddenBuf.All(), h.All(), int64(nOut*E*4))
		}
	}
	if _, err := r.Submit(); err != nil {
		return fmt.Errorf("GPU forward pass: %w", err)
	}
	if nOut > 0 {
		if topBuf != nil {
			copy(top[*out:*out+nOut], bytesI32(topBuf.Bytes()))
		} else {
			copy(logits[*out*V:(*out+nOut)*V], bytesF32(logitsBuf.Bytes()))
		}
		if hiddenBuf != nil {
			copy(hidden[*out*E:(*out+nOut)*E], bytesF32(hiddenBuf.Bytes()))
		}
		*out += nOut
	}
	return nil
}

// rope returns the RoPE of the state's first attention layer and its
// table width (every layer of a model rotates alike); 0 without one.
func (s *gpuState) rope() (model.Rope, int) {
	for i := range s.layers {
		if a := s.layers[i].w.Attn; a != nil {
			return a.Rope, a.Rope.Dims()
		}
	}
	return model.Rope{}, 0
}

// apply records dst = l(x) for rows rows: the product, then the optional
// scale and bias, each followed by a barrier (products share the
// activation scratch).
func (s *gpuState) apply(r *Recorder, l *gpuLinear, dst, x *Buffer, rows int) {
	r.MatMul(dst.All(), l.m, x.All(), rows, s.m.act, s.mmScratch.All())
	r.Barrier()
	if l.scale != 0 || l.bias != nil {
		var bias Range
		if l.bias != nil {
			bias = l.bias.All()
		}
		r.ScaleBias(dst.All(), rows, l.m.Rows, l.scale, bias)
		r.Barrier()
	}
}

// attention records a full attention layer on the nt normed rows h; its
// output goes to y.
func (s *gpuState) attention(r *Recorder, L *gpuLayer, li int, h, y *Buffer, nt, base int) {
	a := L.w.Attn
	hd := a.HeadDim
	s.apply(r, &L.q, s.qf, h, nt)
	s.apply(r, &L.k, s.k, h, nt)
	s.apply(r, &L.v, s.v, h, nt)
	q := s.qf
	if a.Gated {
		r.SplitGated(s.q.All(), s.gate.All(), s.qf.All(), nt, a.Heads, hd)
		r.Barrier()
		q = s.q
	}
	if L.qNorm != nil {
		r.RMSNorm(q.All(), q.All(), L.qNorm.All(), nt*a.Heads, hd, a.Eps)
	}
	if L.kNorm != nil {
		r.RMSNorm(s.k.All(), s.k.All(), L.kNorm.All(), nt*a.KVHeads, hd, a.Eps)
	}
	r.Barrier()
	r.Rope(q.All(), s.cs.All(), nt, a.Heads, hd, a.Rope.Dims(), a.Rope.NeoX())
	r.Rope(s.k.All(), s.cs.All(), nt, a.KVHeads, hd, a.Rope.Dims(), a.Rope.NeoX())
	r.Barrier()
	c := &s.kv[li]
	kvt := s.m.w.KVType
	r.StoreKV(c.k.All(), c.v.All(), kvt, s.k.All(), s.v.All(), base, nt, c.dim, a.KScale, a.VScale)
	r.Barrier()
	p := AttnParams{Tokens: nt, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: hd, Base: base, Chain: s.chain,
		Anc: s.anc.All(), Scale: a.Scale, KScale: a.KScale, VScale: a.VScale}
	r.Attention(s.o.All(), q.All(), c.k.All(), c.v.All(), kvt, p, s.attnScratch.All())
	r.Barrier()
	if a.Gated {
		r.SigmoidMul(s.o.All(), s.gate.All(), nt*a.Heads*hd)
		r.Barrier()
	}
	s.apply(r, &L.o, y, s.o, nt)
}

// deltaNet records a Gated DeltaNet layer on the nt normed rows h; its
// output goes to y.
func (s *gpuState) deltaNet(r *Recorder, L *gpuLayer, li int, h, y *Buffer, nt int) {
	s.apply(r, &L.qkv, s.mix, h, nt)
	s.apply(r, &L.z, s.z, h, nt)
	s.apply(r, &L.beta, s.beta, h, nt)
	s.apply(r, &L.alpha, s.alph, h, nt)
	r.DeltaNet(s.dout.All(), s.mix.All(), s.z.All(), s.beta.All(), s.alph.All(), L.delta, s.rec[li], nt,
		s.parents.All(), !s.pendingBatch, s.saved[li].All(), s.deltaScratch.All())
	r.Barrier()
	s.apply(r, &L.out, y, s.dout, nt)
}
