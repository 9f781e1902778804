package speculative

import "math"

// draftTree is the union of what the drafters propose: a trie of tokens
// rooted at the pending token, each node scored by the best cumulative
// log-probability any drafter gave the path to it. pick then chooses the
// nodes to verify. Its buffers are reused from step to step.
type draftTree struct {
	nodes []treeNode
	heap  []int32 // frontier of pick, a max-heap on score
	sel   []int32 // picked node indices in batch order (root first)
}

// minPathLogProb is the least cumulative log-probability worth verifying
// (5%): a draft less likely than that costs verify work (on a CPU, as much
// per node as a decode step) for little expected gain.
var minPathLogProb = math.Log(0.05)

type treeNode struct {
	tok         int32
	parent      int32
	depth       int32
	firstChild  int32
	nextSibling int32
	batch       int32   // index in the verify batch, -1 when not picked
	score       float64 // cumulative log-probability of the path
}

func (t *draftTree) reset(root int32) {
	t.nodes = append(t.nodes[:0], treeNode{tok: root, parent: -1, firstChild: -1, nextSibling: -1, batch: -1})
}

// add returns the child of parent with token tok, made if missing; its
// score becomes the larger of the old one and score.
func (t *draftTree) add(parent int32, tok int32, score float64) int32 {
	p := &t.nodes[parent]
	for c := p.firstChild; c >= 0; c = t.nodes[c].nextSibling {
		if t.nodes[c].tok == tok {
			if score > t.nodes[c].score {
				t.nodes[c].score = score
			}
			return c
		}
	}
	id := int32(len(t.nodes))
	t.nodes = append(t.nodes, treeNode{
		tok: tok, parent: parent, depth: t.nodes[parent].depth + 1,
		firstChild: -1, nextSibling: p.firstChild, batch: -1, score: score,
	})
	// p may have moved with the append
	t.nodes[parent].firstChild = id
	return id
}

// pick chooses at most maxNodes draft nodes: best-first by score from the
// root, so the choice is prefix-closed, and with linear set only a chain
// (the best child at each depth). sel lists the root then the picked nodes,
// each after its parent.
func (t *draftTree) pick(maxNodes int, linear bool) []int32 {
	t.sel = append(t.sel[:0], 0)
	t.nodes[0].batch = 0
	if linear {
		cur := int32(0)
		for len(t.sel) <= maxNodes {
			best := int32(-1)
			for c := t.nodes[cur].firstChild; c >= 0; c = t.nodes[c].nextSibling {
				if best < 0 || t.better(c, best) {
					best = c
				}
			}
			if best < 0 || t.nodes[best].score < minPathLogProb {
				break
			}
			t.nodes[best].batch = int32(len(t.sel))
			t.sel = append(t.sel, best)
			cur = best
		}
		return t.sel
	}
	t.heap = t.heap[:0]
	t.pushChildren(0)
	for len(t.sel) <= maxNodes && len(t.heap) > 0 {
		n := t.pop()
		if t.nodes[n].score < minPathLogProb {
			break // the rest of the frontier scores lower still
		}
		t.nodes[n].batch = int32(len(t.sel))
		t.sel = append(t.sel, n)
		t.pushChildren(n)
	}
	return t.sel
}

// better orders nodes by score, then by index (earlier-added first), so
// that picking is deterministic.
func (t *draftTree) better(a, b int32) bool {
	sa, sb := t.nodes[a].score, t.nodes[b].score
	if sa != sb {
		return sa > sb
	}
	return a < b
}

func (t *draftTree) pushChildren(n int32) {
	for c := t.nodes[n].firstChild; c >= 0; c = t.nodes[c].nextSibling {
		t.heap = append(t.heap, c)
		for i := len(t.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.better(t.heap[i], t.heap[p]) {
				break
			}
			t.heap[i], t.heap[p] = t.heap[p], t.heap[i]
			i = p
		}
	}
}

func (t *draftTree) pop() int32 {
	h := t.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && t.better(h[l], h[m]) {
			m = l
		}
		if r < len(h) && t.better(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	t.heap = h
	return top
}
