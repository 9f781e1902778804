package speculative

import (
	"math"
	"slices"
)

// suffixIndex is the model-free drafter's memory: the tokens of earlier
// and current requests (prompts and outputs) in one bounded stream, with a
// hash chain per token pair (as LZ77 compressors keep one) so that the
// places where the current context's last two tokens occurred are found
// without allocating. What followed them there is the draft.
type suffixIndex struct {
	hist    []int32 // tokens; sep between documents
	prev    []int32 // prev[i]: the previous position whose pair hashes as hist[i-1], hist[i]; -1 none
	head    []int32 // per hash bucket, the last position
	maxHist int

	matches []suffixMatch
	trie    []suffixNode
}

const (
	sep          = -1
	pairHashBits = 16
	maxChainWalk = 64 // positions visited per lookup
	maxMatchLen  = 32 // how far back a match is measured
	maxMatches   = 8  // continuations kept per lookup
)

type suffixMatch struct {
	end    int32 // position of the context's last token in hist
	length int32 // tokens that agree, counted back from end
}

// suffixNode is a node of the trie of continuations of one lookup.
type suffixNode struct {
	tok         int32
	weight      float64 // sum of the match lengths through the node
	best        int32   // longest match through the node
	firstChild  int32
	nextSibling int32
}

func newSuffixIndex(maxHist int) *suffixIndex {
	x := &suffixIndex{maxHist: maxHist, head: make([]int32, 1<<pairHashBits)}
	x.hist = make([]int32, 0, min(maxHist, 1<<16))
	x.prev = make([]int32, 0, min(maxHist, 1<<16))
	for i := range x.head {
		x.head[i] = -1
	}
	return x
}

func pairHash(a, b int32) uint32 {
	h := uint32(a)*0x9e3779b1 ^ (uint32(b)+0x7f4a7c15)*0x85ebca77
	h ^= h >> 15
	h *= 0xc2b2ae35
	return h >> (32 - pairHashBits)
}

// push appends one token (or sep) to the stream.
func (x *suffixIndex) push(t int32) {
	if len(x.hist) >= x.maxHist {
		x.compact()
	}
	i := int32(len(x.hist))
	x.hist = append(x.hist, t)
	x.prev = append(x.prev, -1)
	if i > 0 && t != sep && x.hist[i-1] != sep {
		h := pairHash(x.hist[i-1], t)
		x.prev[i] = x.head[h]
		x.head[h] = i
	}
}

// separate ends the current document.
func (x *suffixIndex) separate() {
	if n := len(x.hist); n > 0 && x.hist[n-1] != sep {
		x.push(sep)
	}
}

// compact keeps the newer half of the stream and rebuilds the chains.
func (x *suffixIndex) compact() {
	keep := x.maxHist / 2
	drop := len(x.hist) - keep
	copy(x.hist, x.hist[drop:])
	x.hist = x.hist[:keep]
	x.prev = x.prev[:keep]
	for i := range x.head {
		x.head[i] = -1
	}
	for i := range x.hist {
		x.prev[i] = -1
		if i > 0 && x.hist[i] != sep && x.hist[i-1] != sep {
			h := pairHash(x.hist[i-1], x.hist[i])
			x.prev[i] = x.head[h]
			x.head[h] = int32(i)
		}
	}
}

// draft adds to tree, under its root, continuations of ctx (whose last
// token is the root) found earlier in the stream, at most steps tokens
// each. A continuation's tokens are scored by how many of the matches
// agree on them (weighted by match length) times a confidence that grows
// with the longest match: a heuristic log-probability, comparable enough
// to the MTP head's for the tree builder to mix both.
func (x *suffixIndex) draft(tree *draftTree, ctx []int32, steps int, vocab int) {
	n := len(ctx)
	if n < 2 || steps < 1 {
		return
	}
	a, b := ctx[n-2], ctx[n-1]
	x.matches = x.matches[:0]
	walked := 0
	for j := x.head[pairHash(a, b)]; j > 0 && walked < maxChainWalk; j = x.prev[j] {
		walked++
		if x.hist[j] != b || x.hist[j-1] != a || int(j)+1 >= len(x.hist) || x.hist[j+1] == sep {
			continue
		}
		l := int32(2)
		for int(l) < maxMatchLen && int(j-l) >= 0 && n-1-int(l) >= 0 && x.hist[j-l] == ctx[n-1-int(l)] {
			l++
		}
		x.matches = append(x.matches, suffixMatch{end: j, length: l})
	}
	if len(x.matches) == 0 {
		return
	}
	// longest first, then most recent
	slices.SortFunc(x.matches, func(p, q suffixMatch) int {
		if p.length != q.length {
			return int(q.length - p.length)
		}
		return int(q.end - p.end)
	})
	if len(x.matches) > maxMatches {
		x.matches = x.matches[:maxMatches]
	}
	x.trie = append(x.trie[:0], suffixNode{tok: b, firstChild: -1, nextSibling: -1})
	for _, m := range x.matches {
		x.trie[0].weight += float64(m.length)
		cur := int32(0)
		for k := 1; k <= steps; k++ {
			p := int(m.end) + k
			if p >= len(x.hist) || x.hist[p] == sep || x.hist[p] < 0 || int(x.hist[p]) >= vocab {
				break
			}
			cur = x.child(cur, x.hist[p])
			x.trie[cur].weight += float64(m.length)
			x.trie[cur].best = max(x.trie[cur].best, m.length)
		}
	}
	x.emit(tree, 0, 0, 0)
}

func (x *suffixIndex) child(parent, tok int32) int32 {
	for c := x.trie[parent].firstChild; c >= 0; c = x.trie[c].nextSibling {
		if x.trie[c].tok == tok {
			return c
		}
	}
	id := int32(len(x.trie))
	x.trie = append(x.trie, suffixNode{tok: tok, firstChild: -1, nextSibling: x.trie[parent].firstChild})
	x.trie[parent].firstChild = id
	return id
}

// emit copies the subtree of suffix trie node s into the draft tree under
// tree node t, whose path has cumulative score.
func (x *suffixIndex) emit(tree *draftTree, s, t int32, score float64) {
	for c := x.trie[s].firstChild; c >= 0; c = x.trie[c].nextSibling {
		n := &x.trie[c]
		conf := float64(n.best) / float64(n.best+1)
		sc := score + math.Log(n.weight/x.trie[s].weight*conf)
		x.emit(tree, c, tree.add(t, n.tok, sc), sc)
	}
}
