package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// passBufs is the scratch of one recorded forward pass of up to rows
// tokens, of one sequence or several (their rows one after another): every
// row's activations on the device, the pass's parameters (token ids, RoPE
// angles, the rows that want logits) host-visible, and its results, grown
// to the rows that want them. A state has its own, for the passes it runs
// alone; the model has one for passes over several sequences (multi.go).
type passBufs struct {
	dev                *Device
	rows               int
	x, h, y, g         *Buffer
	qf, q, gate, k, v  *Buffer
	o, ffa, ffb        *Buffer
	mix, z, beta, alph *Buffer
	dout               *Buffer
	cat                *Buffer // MTP: [norm(embed) | norm(h)] per token
	mm                 *Buffer // MatMul's converted activations
	ids, cs, outIdx    *Buffer // host-visible parameters

	// results, grown on demand: host-visible logits and hidden rows, the
	// MTP head's input hidden rows; for greedy rows, the logits on the
	// device and the top tokens back
	logits, hidden, hin *Buffer
	logitsDev, top      *Buffer

	// the attention and DeltaNet calls of a layer, one per segment
	attn  []attnJob
	delta []deltaJob

	owned []*Buffer
}

// newPassBufs makes the scratch of passes of up to rows tokens through
// layers (the trunk's, or the MTP head's when mtp).
func (m *gpuModel) newPassBufs(layers []gpuLayer, rows int, mtp bool) (p *passBufs, err error) {
	p = &passBufs{dev: m.dev, rows: rows}
	defer func() {
		if err != nil {
			p.free()
			p = nil
		}
	}()
	buf := func(size int64, host bool) *Buffer {
		if err != nil {
			return nil
		}
		var b *Buffer
		if b, err = m.dev.newBuffer(size, host); err == nil {
			p.owned = append(p.owned, b)
		}
		return b
	}
	dev := func(size int64) *Buffer { return buf(size, false) }
	host := func(size int64) *Buffer { return buf(size, true) }
	hp := m.hp
	R, E := int64(rows), int64(hp.Embd)
	var qFull, qDim, kvDim, convDim, valueDim, vHeads, rd, mmBytes int64
	ffn := int64(hp.FFN)
	linears := []*gpuLinear{&m.output}
	for i := range layers {
		L := &layers[i]
		ffn = max(ffn, int64(L.gate.m.Rows))
		linears = append(linears, &L.gate, &L.up, &L.down)
		if a := L.w.Attn; a != nil {
			qFull = max(qFull, int64(L.q.m.Rows))
			qDim = max(qDim, int64(a.Heads*a.HeadDim))
			kvDim = max(kvDim, int64(a.KVHeads*a.HeadDim))
			rd = max(rd, int64(a.Rope.Dims()))
			linears = append(linears, &L.q, &L.k, &L.v, &L.o)
		}
		if dn := L.w.Delta; dn != nil {
			convDim = max(convDim, int64(dn.ConvDim))
			valueDim = max(valueDim, int64(dn.ValueDim))
			vHeads = max(vHeads, int64(dn.VHeads))
			linears = append(linears, &L.qkv, &L.z, &L.beta, &L.alpha, &L.out)
		}
	}
	if mtp {
		linears = append(linears, &m.mtp.ehProj, &m.mtp.head)
	}
	for _, l := range linears {
		mmBytes = max(mmBytes, MatMulScratchBytes(l.m, rows, m.act))
	}
	p.x, p.h, p.y, p.g = dev(R*E*4), dev(R*E*4), dev(R*E*4), dev(R*E*4)
	p.qf, p.q, p.gate, p.o = dev(R*qFull*4), dev(R*qDim*4), dev(R*qDim*4), dev(R*qDim*4)
	p.k, p.v = dev(R*kvDim*4), dev(R*kvDim*4)
	p.ffa, p.ffb = dev(R*ffn*4), dev(R*ffn*4)
	p.mix, p.z, p.dout = dev(R*convDim*4), dev(R*valueDim*4), dev(R*valueDim*4)
	p.beta, p.alph = dev(R*vHeads*4), dev(R*vHeads*4)
	if mtp {
		p.cat = dev(R * 2 * E * 4)
	}
	p.mm = dev(mmBytes)
	p.ids, p.outIdx = host(R*4), host(R*4)
	p.cs = host(R * max(rd, 2) * 4)
	return p, err
}

// free releases the scratch.
func (p *passBufs) free() {
	if p == nil {
		return
	}
	for _, b := range p.owned {
		b.Free()
	}
	p.owned = nil
	for _, b := range []*Buffer{p.logits, p.hidden, p.hin, p.logitsDev, p.top} {
		b.Free()
	}
	p.logits, p.hidden, p.hin, p.logitsDev, p.top = nil, nil, nil, nil, nil
}

// grow returns *b grown to at least size bytes (host-visible when host).
func (p *passBufs) grow(b **Buffer, size int64, host bool) (*Buffer, error) {
	if *b != nil && (*b).Size() >= size {
		return *b, nil
	}
	(*b).Free()
	*b = nil
	nb, err := p.dev.newBuffer(size, host)
	if err != nil {
		return nil, err
	}
	*b = nb
	return nb, nil
}

// results grows the result buffers of a pass of nOut rows that want
// logits: logits on the host (plain rows), or on the device with the top
// tokens on the host (greedy rows; plain rows beside them are copied out),
// and the hidden rows when asked for.
func (p *passBufs) results(nOut int, V, E int, greedy, plain, hidden bool) error {
	if nOut == 0 {
		return nil
	}
	rows := int64(nOut)
	if greedy {
		if _, err := p.grow(&p.logitsDev, rows*int64(V)*4, false); err != nil {
			return err
		}
		if _, err := p.grow(&p.top, rows*4, true); err != nil {
			return err
		}
	}
	if plain {
		if _, err := p.grow(&p.logits, rows*int64(V)*4, true); err != nil {
			return err
		}
	}
	if hidden {
		if _, err := p.grow(&p.hidden, rows*int64(E)*4, true); err != nil {
			return err
		}
	}
	return nil
}

// segment is one sequence's part of a recorded pass: tokens [c0, c1) of
// its batch b, in rows [off, off+c1-c0) of the pass; of its nOut rows
// that want logits, the first is the pass's out-th. Those rows go to
// logits (V floats each) or, greedy (top not nil), as their top token to
// top, and to hidden (E floats each) when not nil: each from its start.
type segment struct {
	s              *gpuState
	b              *model.Batch
	c0, c1         int
	off, out, nOut int
	logits, hidden []float32
	top            []int32
}

func (g *segment) tokens() int { return g.c1 - g.c0 }

// outRows counts the tokens of [c0, c1) of b that want logits.
func outRows(b *model.Batch, c0, c1 int) int {
	n := 0
	for i := c0; i < c1; i++ {
		if b.WantsLogits(i) {
			n++
		}
	}
	return n
}

// rowsFrom is x from row k of width w on, or nil when x is.
func rowsFrom[T any](x []T, k, w int) []T {
	if x == nil {
		return nil
	}
	return x[k*w:]
}

// writeTree writes the parents and (a tree's) ancestry of tokens
// [c0, c1) of a batch that stays pending, into the state's parameters.
func (s *gpuState) writeTree(b *model.Batch, c0, c1 int) {
	if !s.pendingBatch {
		return
	}
	copy(bytesI32(s.parents.Bytes()), b.Parent[c0:c1])
	if !s.chain {
		s.ancOff, s.ancIdx = model.AppendAncestry(s.ancOff[:0], s.ancIdx[:0], b.Parent[c0:c1])
		a := bytesI32(s.anc.Bytes())
		copy(a, s.ancOff)
		copy(a[len(s.ancOff):], s.ancIdx)
	}
}

// done records that a pass ran the segment: a chain's tokens are
// committed, a tree or verify chain stays pending until Commit.
func (g *segment) done() {
	s := g.s
	if s.pendingBatch {
		s.pending = g.tokens()
		s.parent = append(s.parent[:0], g.b.Parent[g.c0:g.c1]...)
		return
	}
	s.n += g.tokens()
}

// errPassTooLong is the error for more rows than a pass's scratch holds.
func errPassTooLong(rows, max int) error {
	return fmt.Errorf("GPU model: a pass of %d tokens, the scratch holds %d", rows, max)
}
