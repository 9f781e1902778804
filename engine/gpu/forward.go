package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// forward runs batch b on the state alone (begin checked it), in its own
// scratch: a chain in passes of at most s.cap tokens, each committed at
// once (unless the batch is a verify chain); a tree, or a verify chain, in
// one pass that stays pending until Commit. inHidden is the MTP head's
// input (nil for the trunk).
func (s *gpuState) forward(b *model.Batch, logits, inHidden, hidden []float32, top []int32) error {
	V, E := s.m.hp.Vocab, s.m.hp.Embd
	n := len(b.Tokens)
	step := s.cap
	if s.pendingBatch {
		step = n
	}
	out := 0 // rows of logits written so far
	for c0 := 0; c0 < n; c0 += step {
		c1 := min(n, c0+step)
		g := &s.solo[0]
		*g = segment{s: s, b: b, c0: c0, c1: c1,
			logits: rowsFrom(logits, out, V), hidden: rowsFrom(hidden, out, E), top: rowsFrom(top, out, 1)}
		err := s.m.runPass(s.p, s.solo[:], rowsFrom(inHidden, c0, E))
		out += g.nOut
		*g = segment{} // keep no caller memory
		if err != nil {
			return err
		}
	}
	return nil
}

// runPass records and runs one forward pass over segs, their rows one
// after another in p (at most p.rows of them), each on its own state:
// the products, norms and element-wise steps over all rows at once, RoPE
// and the KV writes, attention and the DeltaNet recurrence per segment on
// its state, whose KV rows go to the slots after its committed ones. Then
// it records each segment's progress (segment.done) and copies its results
// out. inHidden is the MTP head's input hidden rows (its one segment's),
// else nil.
//
// A row's result depends on its own sequence alone: every op but attention
// and the recurrence works row by row, in an order that does not depend on
// how many rows there are (MatMul's contract), and those two run per
// segment with that segment's shape. So a sequence gets the same bits in a
// pass beside others as alone.
func (m *gpuModel) runPass(p *passBufs, segs []segment, inHidden []float32) error {
	E, V := m.hp.Embd, m.hp.Vocab
	s0 := segs[0].s

	// Parameters: token ids, RoPE tables, the rows that want logits, the
	// trees' parents and ancestry.
	ids := bytesI32(p.ids.Bytes())
	outIdx := bytesI32(p.outIdx.Bytes())
	rope, rd := s0.rope()
	var cs []float32
	if rd > 0 {
		cs = bytesF32(p.cs.Bytes())
	}
	nt, nOut := 0, 0
	greedy, plain, hidden := false, false, false
	for k := range segs {
		g := &segs[k]
		b := g.b
		g.off, g.out = nt, nOut
		if nt+g.tokens() > p.rows {
			return errPassTooLong(nt+g.tokens(), p.rows)
		}
		for i := g.c0; i < g.c1; i++ {
			row := nt + i - g.c0
			ids[row] = b.Tokens[i]
			if b.WantsLogits(i) {
				outIdx[nOut] = int32(row)
				nOut++
			}
			if rd > 0 {
				rope.Table(cs[row*rd:(row+1)*rd], b.Pos[i])
			}
		}
		nt += g.tokens()
		g.nOut = nOut - g.out
		if g.nOut > 0 {
			greedy = greedy || g.top != nil
			plain = plain || g.top == nil
			hidden = hidden || g.hidden != nil
		}
		g.s.writeTree(b, g.c0, g.c1)
	}
	if err := p.results(nOut, V, E, greedy, plain, hidden); err != nil {
		return err
	}
	logitsBuf := p.logits // where the head writes
	if greedy {
		logitsBuf = p.logitsDev
	}

	r := m.dev.Begin()
	x, h, y, g := p.x, p.h, p.y, p.g
	var layers []gpuLayer
	var norm *Buffer
	var head *gpuLinear
	if s0.mtp {
		if err := m.mtpInput(r, p, nt, inHidden); err != nil {
			r.Submit()
			return err
		}
		layers, norm, head = m.mtp.layers, m.mtp.headNorm, &m.mtp.head
	} else {
		r.GetRows(x.All(), m.embed, p.ids.All(), nt)
		r.Barrier()
		layers, norm, head = s0.layers, m.norm, &m.output
	}
	rows := nt
	for li := range layers {
		L := &layers[li]
		r.RMSNorm(h.All(), x.All(), L.attnNorm.All(), rows, E, m.w.Eps)
		r.Barrier()
		if L.w.Attn != nil {
			m.attention(r, p, segs, L, li, h, y, nt)
		} else {
			m.deltaNet(r, p, segs, L, li, h, y, nt)
		}
		if m.w.GatherEarly && li == len(layers)-1 && nOut < nt {
			r.GatherRows(g.All(), x.All(), p.outIdx.All(), nOut, E)
			r.GatherRows(h.All(), y.All(), p.outIdx.All(), nOut, E)
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
		m.apply(r, p, &L.gate, p.ffa, h, rows)
		m.apply(r, p, &L.up, p.ffb, h, rows)
		r.SwiGLU(p.ffa.All(), p.ffa.All(), p.ffb.All(), rows*F)
		r.Barrier()
		m.apply(r, p, &L.down, y, p.ffa, rows)
		r.Add(x.All(), y.All(), rows*E)
		r.Barrier()
	}
	if rows > nOut {
		r.GatherRows(g.All(), x.All(), p.outIdx.All(), nOut, E)
		r.Barrier()
		x, g = g, x
	}
	if nOut > 0 {
		r.RMSNorm(h.All(), x.All(), norm.All(), nOut, E, m.w.Eps)
		r.Barrier()
		m.apply(r, p, head, logitsBuf, h, nOut)
		if greedy {
			// the top token of the greedy rows; the logits of the others
			// out to the host, each run of like segments at once
			row := int64(V) * 4
			for k := 0; k < len(segs); {
				j, want := k+1, segs[k].top != nil
				for j < len(segs) && (segs[j].top != nil) == want {
					j++
				}
				o, n := segs[k].out, segs[j-1].out+segs[j-1].nOut-segs[k].out
				if n > 0 {
					if want {
						r.Argmax(p.top.Slice(int64(o)*4, int64(n)*4), logitsBuf.Slice(int64(o)*row, int64(n)*row), n, V)
					} else {
						r.Copy(p.logits.Slice(int64(o)*row, int64(n)*row), logitsBuf.Slice(int64(o)*row, int64(n)*row), int64(n)*row)
					}
				}
				k = j
			}
		}
		if hidden {
			r.Copy(p.hidden.All(), h.All(), int64(nOut*E*4))
		}
	}
	if _, err := r.Submit(); err != nil {
		return fmt.Errorf("GPU forward pass: %w", err)
	}
	for k := range segs {
		g := &segs[k]
		g.done()
		if g.nOut == 0 {
			continue
		}
		if g.top != nil {
			copy(g.top[:g.nOut], bytesI32(p.top.Bytes())[g.out:])
		} else {
			copy(g.logits[:g.nOut*V], bytesF32(p.logits.Bytes())[g.out*V:])
		}
		if g.hidden != nil {
			copy(g.hidden[:g.nOut*E], bytesF32(p.hidden.Bytes())[g.out*E:])
		}
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
func (m *gpuModel) apply(r *Recorder, p *passBufs, l *gpuLinear, dst, x *Buffer, rows int) {
	r.MatMul(dst.All(), l.m, x.All(), rows, m.act, p.mm.All())
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

// rowsOf is the rows of segment g in b, of w float32 values each.
func rowsOf(b *Buffer, g *segment, w int) Range {
	return b.Slice(int64(g.off)*int64(w)*4, int64(g.tokens())*int64(w)*4)
}

// attention records a full attention layer on the nt normed rows h; its
// output goes to y. The projections, norms and RoPE take every row at
// once; each segment writes its keys and values to its own cache and
// attends over it, the segments' attention side by side.
func (m *gpuModel) attention(r *Recorder, p *passBufs, segs []segment, L *gpuLayer, li int, h, y *Buffer, nt int) {
	a := L.w.Attn
	hd := a.HeadDim
	m.apply(r, p, &L.q, p.qf, h, nt)
	m.apply(r, p, &L.k, p.k, h, nt)
	m.apply(r, p, &L.v, p.v, h, nt)
	q := p.qf
	if a.Gated {
		r.SplitGated(p.q.All(), p.gate.All(), p.qf.All(), nt, a.Heads, hd)
		r.Barrier()
		q = p.q
	}
	if L.qNorm != nil {
		r.RMSNorm(q.All(), q.All(), L.qNorm.All(), nt*a.Heads, hd, a.Eps)
	}
	if L.kNorm != nil {
		r.RMSNorm(p.k.All(), p.k.All(), L.kNorm.All(), nt*a.KVHeads, hd, a.Eps)
	}
	r.Barrier()
	r.Rope(q.All(), p.cs.All(), nt, a.Heads, hd, a.Rope.Dims(), a.Rope.NeoX())
	r.Rope(p.k.All(), p.cs.All(), nt, a.KVHeads, hd, a.Rope.Dims(), a.Rope.NeoX())
	r.Barrier()
	kvt := m.w.KVType
	for k := range segs {
		g := &segs[k]
		c := &g.s.kv[li]
		r.StoreKV(c.k.All(), c.v.All(), kvt, rowsOf(p.k, g, c.dim), rowsOf(p.v, g, c.dim), g.s.n, g.tokens(), c.dim, a.KScale, a.VScale)
	}
	r.Barrier()
	jobs := p.attn[:0]
	for k := range segs {
		g := &segs[k]
		s, c := g.s, &g.s.kv[li]
		ap := AttnParams{Tokens: g.tokens(), Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: hd, Base: s.n, Chain: s.chain,
			Anc: s.anc.All(), Scale: a.Scale, KScale: a.KScale, VScale: a.VScale}
		jobs = append(jobs, attnJob{})
		if !r.planAttention(&jobs[k], rowsOf(p.o, g, a.Heads*hd), rowsOf(q, g, a.Heads*hd), c.k.All(), c.v.All(), kvt, ap, s.attnScratch.All()) {
			return // the error stuck in r
		}
	}
	p.attn = jobs
	r.attentions(jobs)
	r.Barrier()
	if a.Gated {
		r.SigmoidMul(p.o.All(), p.gate.All(), nt*a.Heads*hd)
		r.Barrier()
	}
	m.apply(r, p, &L.o, y, p.o, nt)
}

// deltaNet records a Gated DeltaNet layer on the nt normed rows h; its
// output goes to y. The projections take every row at once; each segment
// runs the conv and the recurrence on its own state, stage by stage beside
// the others.
func (m *gpuModel) deltaNet(r *Recorder, p *passBufs, segs []segment, L *gpuLayer, li int, h, y *Buffer, nt int) {
	m.apply(r, p, &L.qkv, p.mix, h, nt)
	m.apply(r, p, &L.z, p.z, h, nt)
	m.apply(r, p, &L.beta, p.beta, h, nt)
	m.apply(r, p, &L.alpha, p.alph, h, nt)
	d := L.delta
	jobs := p.delta[:0]
	for k := range segs {
		g := &segs[k]
		s := g.s
		jobs = append(jobs, deltaJob{})
		if !r.planDelta(&jobs[k], rowsOf(p.dout, g, d.ValueDim), rowsOf(p.mix, g, d.ConvDim), rowsOf(p.z, g, d.ValueDim),
			rowsOf(p.beta, g, d.VHeads), rowsOf(p.alph, g, d.VHeads), d, s.rec[li], g.tokens(),
			s.parents.All(), !s.pendingBatch, s.saved[li].All(), s.deltaScratch.All()) {
			return // the error stuck in r
		}
	}
	p.delta = jobs
	r.deltaNets(jobs)
	r.Barrier()
	m.apply(r, p, &L.out, y, p.dout, nt)
}
