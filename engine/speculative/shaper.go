package speculative

import "math"

// Shaper is what shapes the target's logits at each output position beyond
// the model itself: a grammar's mask, repetition penalties, logit biases.
// The decoder never changes the Shaper it is given (the state after the
// pending token); it works on clones, one along the path it verifies and
// one per draft node whose children it filters.
type Shaper interface {
	// Shape rewrites a row of logits for the next token: tokens that may
	// not come next get -Inf, penalties and biases are applied.
	Shape(row []float32)
	// Allows reports whether tok may come next: a draft node the Shaper
	// forbids is never verified.
	Allows(tok int32) bool
	// Accept moves past tok.
	Accept(tok int32) error
	// Clone returns an independent copy.
	Clone() Shaper
}

// filterTree gives every draft node the Shaper forbids (or whose parent
// it forbids) a score of -Inf, so that pick never verifies it. sh is the
// state after the root (the pending token). Nodes come after their
// parents in tr.nodes.
func (d *Decoder) filterTree(sh Shaper) {
	tr := &d.tree
	n := len(tr.nodes)
	if cap(d.nodeShape) < n {
		d.nodeShape = make([]Shaper, n)
	}
	states := d.nodeShape[:n]
	clear(states)
	states[0] = sh
	dead := math.Inf(-1)
	for i := 1; i < n; i++ {
		nd := &tr.nodes[i]
		ps := states[nd.parent]
		if ps == nil || !ps.Allows(nd.tok) {
			nd.score = dead
			d.stats.Filtered++
			continue
		}
		if nd.firstChild < 0 {
			continue // a leaf: no state after it is needed
		}
		s := ps.Clone()
		if err := s.Accept(nd.tok); err != nil {
			nd.score = dead
			d.stats.Filtered++
			continue
		}
		states[i] = s
	}
	clear(states) // drop the clones
}
