package gpu

import (
	"errors"
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// Several sequences in one forward pass (model.MultiForwarder): the
// embedding rows of every token of every sequence in one scratch, and per
// layer the norms, projections and FFN over all rows at once, so that a
// decode step reads each weight once for all sequences; per sequence, on
// its own rows, the KV writes, attention over its own cache and the
// DeltaNet conv and recurrence on its own state (runPass). One command
// buffer per call.

// multiRows bounds the rows (tokens of all sequences) of one recorded
// multi-sequence pass: a prefill chunk of chunkTokens beside as many rows
// of other sequences' decode steps, verify chains and trees. A call with
// more rows runs as several command buffers, each over a run of whole
// sequences: a sequence's batch is never cut, since attention's tiling
// (and so its bits) depends on how many tokens the call has.
const multiRows = 2 * chunkTokens

// multiMinRows is the scratch a multi-sequence pass starts with.
const multiMinRows = 16

// multiPass is the model's scratch for passes over several sequences.
//
// The rows live in the model, not in the states: passes of one model run
// one at a time (model.ForwardMulti's contract, and the device's one
// recorder), so one scratch serves every pass, and it grows on demand by
// powers of two to the largest pass seen, at most multiRows rows (for a
// model of 4096 wide with an FFN of 12288 and qwen35's projections, about
// 300 KiB a row: 150 MiB at multiRows), plus the logits of the rows that
// want them. Each state keeps its own scratch of cap rows for the passes
// it runs alone (ForwardHidden, a chain longer than cap, a call with one
// sequence), so that a state that fits the device is made whole by
// NewState; what a state needs per sequence in a multi pass (attention's
// and DeltaNet's scratch, a tree's parents, ancestry and saved rows) is
// that state's own too.
type multiPass struct {
	p     *passBufs // nil before the first multi-sequence pass
	segs  []segment
	chain []bool // per segment: its batch is a chain
}

// scratch returns the multi-pass scratch, grown to hold rows rows.
func (mp *multiPass) scratch(m *gpuModel, rows int) (*passBufs, error) {
	if mp.p != nil && mp.p.rows >= rows {
		return mp.p, nil
	}
	n := multiMinRows
	for n < rows {
		n *= 2
	}
	n = max(min(n, multiRows), rows)
	mp.p.free()
	mp.p = nil
	p, err := m.newPassBufs(m.layers, n, false)
	if err != nil {
		return nil, fmt.Errorf("GPU model: scratch of a pass over several sequences, %d tokens: %w", n, err)
	}
	mp.p = p
	return p, nil
}

func (mp *multiPass) free() {
	mp.p.free()
	mp.p = nil
}

// ForwardMulti implements model.MultiForwarder for the trunk (see the
// function model.ForwardMulti): each sequence's logits, hidden rows and
// state afterwards are, bit for bit, what ForwardHidden on it alone gives.
// The MTP head's states are refused (run the head with MTP().Forward).
//
// Every sequence is checked before anything runs, and an error of a check
// is a *model.SeqError naming the sequence, with nothing changed. An error
// of the device afterwards (memory for the scratch, a failed submission)
// is a plain error: the sequences whose passes ran before it have
// advanced.
func (m *gpuModel) ForwardMulti(seqs []model.SeqBatch) error { return m.forwardMulti(seqs, nil) }

// ForwardMultiGreedy is ForwardMulti for greedy decoding, as ForwardGreedy
// is Forward's: top has one entry per sequence; where top[i] is not nil,
// it receives the most likely token of each of sequence i's rows that
// want logits (len(top[i]) at least that many; ties to the lowest id, as
// sample.Argmax), whose logits stay on the device (seqs[i].Logits is not
// used); where top[i] is nil, seqs[i].Logits receives the logits as
// ForwardMulti gives them. Hidden rows come back as ForwardMulti's. So a
// pass of decode steps reads back 4 bytes a sequence, and greedy and
// sampled sequences share it.
func (m *gpuModel) ForwardMultiGreedy(seqs []model.SeqBatch, top [][]int32) error {
	if len(top) != len(seqs) {
		return fmt.Errorf("GPU model: ForwardMultiGreedy of %d sequences with %d top slices (want one per sequence, nil for one that wants its logits)", len(seqs), len(top))
	}
	return m.forwardMulti(seqs, top)
}

func (m *gpuModel) forwardMulti(seqs []model.SeqBatch, top [][]int32) error {
	if len(seqs) == 0 {
		return nil
	}
	mp := &m.multi
	segs, chains := mp.segs[:0], mp.chain[:0]
	defer func() { clear(mp.segs[:cap(mp.segs)]) }() // keep no state or caller memory alive
	for i := range seqs {
		sb := &seqs[i]
		var tp []int32
		if top != nil {
			tp = top[i]
		}
		if s, ok := sb.State.(*gpuState); ok && s.m == m && s.mtp {
			return &model.SeqError{Index: i, Err: errors.New("GPU model: the MTP head's state: a pass over several sequences runs the trunk; run the head with MTP().Forward")}
		}
		s, chain, err := m.check(sb.State, false, &sb.Batch, sb.Logits, sb.Hidden, tp != nil)
		if err != nil {
			return &model.SeqError{Index: i, Err: err}
		}
		n := len(sb.Batch.Tokens)
		if nOut := outRows(&sb.Batch, 0, n); tp != nil && len(tp) < nOut {
			return &model.SeqError{Index: i, Err: fmt.Errorf("GPU model: top has room for %d tokens, %d rows want logits", len(tp), nOut)}
		}
		for j := range segs {
			if segs[j].s == s {
				return &model.SeqError{Index: i, Err: fmt.Errorf("GPU model: the state of sequence %d again; a state takes one batch per pass", j)}
			}
		}
		segs = append(segs, segment{s: s, b: &sb.Batch, c0: 0, c1: n, logits: sb.Logits, hidden: sb.Hidden, top: tp})
		chains = append(chains, chain)
	}
	mp.segs, mp.chain = segs, chains

	// What the caller sent is good: nothing but the device fails from here.
	if len(segs) == 1 {
		g := &segs[0]
		g.s.ready(g.b, chains[0])
		if err := g.s.forward(g.b, g.logits, nil, g.hidden, g.top); err != nil {
			return fmt.Errorf("GPU model: %w", err)
		}
		return nil
	}
	// A chain longer than one pass of its state runs alone, in chunks, as
	// ForwardHidden runs it (a chunk beside others would give it other
	// bits); the others share passes of at most multiRows rows.
	rows, most := 0, 0
	nOut, mostOut := 0, 0
	greedy, plain, hidden := false, false, false
	for k := range segs {
		g := &segs[k]
		t := g.tokens()
		if t > g.s.cap {
			continue
		}
		if rows+t > multiRows {
			rows, nOut = 0, 0
		}
		o := outRows(g.b, 0, t)
		rows, nOut = rows+t, nOut+o
		most, mostOut = max(most, rows), max(mostOut, nOut)
		if o > 0 {
			greedy = greedy || g.top != nil
			plain = plain || g.top == nil
			hidden = hidden || g.hidden != nil
		}
	}
	var p *passBufs
	if most > 0 {
		var err error
		if p, err = mp.scratch(m, most); err != nil {
			return err
		}
		if err := p.results(mostOut, m.hp.Vocab, m.hp.Embd, greedy, plain, hidden); err != nil {
			return fmt.Errorf("GPU model: results of a pass over several sequences: %w", err)
		}
	}
	for k := range segs {
		g := &segs[k]
		g.s.ready(g.b, chains[k])
	}
	shared := segs[:0] // in place: the segments that share passes, in order
	for k := range segs {
		g := segs[k]
		if g.tokens() <= g.s.cap {
			shared = append(shared, g)
			continue
		}
		if err := g.s.forward(g.b, g.logits, nil, g.hidden, g.top); err != nil {
			return fmt.Errorf("GPU model: sequence %d, alone: %w", k, err)
		}
	}
	for k0 := 0; k0 < len(shared); {
		k1, rows := k0, 0
		for k1 < len(shared) && rows+shared[k1].tokens() <= multiRows {
			rows += shared[k1].tokens()
			k1++
		}
		if err := m.runPass(p, shared[k0:k1], nil); err != nil {
			return fmt.Errorf("GPU model: a pass over %d sequences: %w", k1-k0, err)
		}
		k0 = k1
	}
	return nil
}

var _ model.MultiForwarder = (*gpuModel)(nil)
