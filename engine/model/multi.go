package model

import (
	"fmt"
	"reflect"
	"strings"
)

// Several sequences in one forward pass: continuous batching. A decode
// step reads every weight once per pass, so the decode tokens of several
// sequences cost little more than one; prefill chunks and verify trees can
// share the pass too.

// SeqBatch is one sequence's part of a multi-sequence pass.
type SeqBatch struct {
	State State
	// Batch is the sequence's chain or tree, exactly as Forward takes it
	// (positions, parents, Logits flags, Verify).
	Batch Batch
	// Logits receives the rows of the tokens Batch asks logits for, as
	// Forward fills them. When the sequences' Logits are consecutive
	// parts of one buffer, in seqs order (logits[r0*V:r1*V],
	// logits[r1*V:r2*V], ...), the pass writes them there directly;
	// otherwise it computes them in the model's scratch and copies them.
	Logits []float32
	// Hidden, when not nil, receives those tokens' final normed hidden
	// states, as ForwardHidden's hidden.
	Hidden []float32
}

// MultiForwarder is a Model that runs the batches of several sequences in
// one pass (the CPU models of Load do; ForwardMulti is how to call it).
type MultiForwarder interface {
	ForwardMulti(seqs []SeqBatch) error
}

// SeqError is an error of ForwardMulti that concerns one sequence: Index
// is its place in seqs.
type SeqError struct {
	Index int
	Err   error
}

func (e *SeqError) Error() string {
	return fmt.Sprintf("model: sequence %d: %s", e.Index, strings.TrimPrefix(e.Err.Error(), "model: "))
}

func (e *SeqError) Unwrap() error { return e.Err }

// ForwardMulti runs the batch of every sequence of seqs in one pass: the
// matrix products over all their tokens at once, attention and the
// recurrent (Gated DeltaNet) steps per sequence against its own state.
// Each sequence's logits, hidden rows and state afterwards are exactly,
// bit for bit, what ForwardHidden on it alone gives; chains commit and
// trees (and Verify chains) wait for their state's Commit, as there.
//
// A state may appear once per call. An error is a *SeqError naming the
// sequence; for a model of Load, nothing has changed then (every sequence
// is checked before any runs). A model that is not a MultiForwarder runs
// the sequences one after another with ForwardHidden; the same checks come
// first, but an error from its ForwardHidden leaves the sequences before
// it run.
//
// The model keeps scratch rows for the largest pass it has run (every
// token of every sequence), so an engine keeps passes bounded: long
// prompts go in chunks. Like Forward, it is called from one goroutine at a
// time per model.
func ForwardMulti(m Model, seqs []SeqBatch) error {
	if mf, ok := m.(MultiForwarder); ok {
		return mf.ForwardMulti(seqs)
	}
	V, E := m.Hyper().Vocab, m.Hyper().Embd
	for i := range seqs {
		sb := &seqs[i]
		if sb.State == nil {
			return &SeqError{i, fmt.Errorf("model: no state")}
		}
		if j := stateIndex(seqs[:i], sb.State); j >= 0 {
			return &SeqError{i, fmt.Errorf("model: the state of sequence %d again; a state takes one batch per pass", j)}
		}
		if _, err := sb.Batch.check(V); err != nil {
			return &SeqError{i, err}
		}
		nOut := 0
		for t := range sb.Batch.Tokens {
			if sb.Batch.wantsLogits(t) {
				nOut++
			}
		}
		if len(sb.Logits) < nOut*V || (sb.Hidden != nil && len(sb.Hidden) < nOut*E) {
			return &SeqError{i, fmt.Errorf("model: logits (%d floats) or hidden (%d) too small for %d rows of %d and %d", len(sb.Logits), len(sb.Hidden), nOut, V, E)}
		}
	}
	for i := range seqs {
		sb := &seqs[i]
		if err := m.ForwardHidden(sb.State, sb.Batch, sb.Logits, sb.Hidden); err != nil {
			return &SeqError{i, err}
		}
	}
	return nil
}

// stateIndex returns the index in seqs of st, or -1.
func stateIndex(seqs []SeqBatch, st State) int {
	if !reflect.TypeOf(st).Comparable() {
		return -1
	}
	for j := range seqs {
		if o := seqs[j].State; reflect.TypeOf(o) == reflect.TypeOf(st) && o == st {
			return j
		}
	}
	return -1
}

// pass is one forward pass over the batches of one or more sequences,
// their rows one after another in rows (each sequence's from its
// work.off).
type pass struct {
	seqs  []*state
	rows  *rowBufs
	n     int  // rows in all
	csSet bool // rows.cs holds the RoPE angles of every row
}

// alone readies the pass of s over its prepared batch alone, in its own
// rows.
func (s *state) alone() *pass {
	p := &s.w.solo
	p.n = len(s.w.batch.Tokens)
	p.csSet = false
	p.rows.grow(s.w.ws, p.n)
	return p
}

// keepRows moves the rows that want logits to the front of x, in order.
func (p *pass) keepRows(x []float32, E int) {
	r := 0
	for _, s := range p.seqs {
		b := &s.w.batch
		for i := range b.Tokens {
			if b.wantsLogits(i) {
				row := s.w.off + i
				copy(x[r*E:(r+1)*E], x[row*E:(row+1)*E])
				r++
			}
		}
	}
}

// multiPass is the decoder's scratch for passes over several sequences:
// the rows of all of them, and the logits of all before they go to each
// sequence's own.
type multiPass struct {
	pass
	rowBufs
	chain  []bool // per sequence: its batch is a chain
	nOut   []int  // per sequence: rows that want logits
	logits []float32
}

// ForwardMulti implements MultiForwarder (see the function ForwardMulti).
func (d *decoder) ForwardMulti(seqs []SeqBatch) error {
	switch len(seqs) {
	case 0:
		return nil
	case 1:
		// alone, in the state's own rows and straight into its logits
		sb := &seqs[0]
		if err := d.ForwardHidden(sb.State, sb.Batch, sb.Logits, sb.Hidden); err != nil {
			return &SeqError{0, err}
		}
		return nil
	}
	mp := &d.multi
	mp.seqs, mp.chain, mp.nOut = mp.seqs[:0], mp.chain[:0], mp.nOut[:0]
	defer func() { clear(mp.seqs[:cap(mp.seqs)]) }() // keep no state alive
	total, nOut := 0, 0
	for i := range seqs {
		sb := &seqs[i]
		s, chain, out, err := d.check(d, sb.State, &sb.Batch, sb.Logits, sb.Hidden)
		if err != nil {
			return &SeqError{i, err}
		}
		for j, o := range mp.seqs {
			if o == s {
				return &SeqError{i, fmt.Errorf("model: the state of sequence %d again; a state takes one batch per pass", j)}
			}
		}
		mp.seqs = append(mp.seqs, s)
		mp.chain = append(mp.chain, chain)
		mp.nOut = append(mp.nOut, out)
		total += len(sb.Batch.Tokens)
		nOut += out
	}

	// Nothing can fail from here on.
	off := 0
	for i, s := range mp.seqs {
		s.begin(&seqs[i].Batch, mp.chain[i], off)
		off += len(seqs[i].Batch.Tokens)
	}
	p := &mp.pass
	p.rows, p.n, p.csSet = &mp.rowBufs, total, false
	p.rows.grow(mp.seqs[0].w.ws, total)
	d.embedRows(p)
	rows := d.runLayers(p, d.layers, nOut)
	E, V := d.hp.Embd, d.hp.Vocab
	lg, direct := consecutiveLogits(seqs, mp.nOut, V)
	if !direct {
		mp.logits = growF32(mp.logits, rows*V)
		lg = mp.logits
	}
	d.head(p.rows, p.rows.x[:rows*E], rows, d.outNorm, &d.output, lg, nil)
	r := 0
	for i := range seqs {
		sb, k := &seqs[i], mp.nOut[i]
		if !direct {
			copy(sb.Logits[:k*V], lg[r*V:(r+k)*V])
		}
		if sb.Hidden != nil {
			copy(sb.Hidden[:k*E], p.rows.h[r*E:(r+k)*E])
		}
		r += k
	}
	for _, s := range mp.seqs {
		s.finish()
	}
	return nil
}

// consecutiveLogits reports whether the Logits of the sequences that want
// rows (nOut[i] of them, V floats each) follow one another in one buffer,
// in order, and returns that buffer's span.
func consecutiveLogits(seqs []SeqBatch, nOut []int, V int) ([]float32, bool) {
	var all []float32 // the span so far: the first sequence's Logits, extended
	used := 0         // floats of all taken by the rows so far
	for i := range seqs {
		k := nOut[i] * V
		if k == 0 {
			continue
		}
		lg := seqs[i].Logits
		switch {
		case all == nil:
			all = lg
		case cap(all) > used && &all[:cap(all)][used] == &lg[0]:
			all = all[:max(len(all), used+len(lg))]
		default:
			return nil, false
		}
		used += k
	}
	if used == 0 || len(all) < used {
		return nil, false
	}
	return all[:used], true
}
