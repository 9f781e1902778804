package grammar

import (
	"bytes"
	"slices"
)

// Vocab is a tokenizer's vocabulary as the grammar sees it: each token's
// bytes, indexed once as a trie and shared by every grammar and matcher. It
// is immutable after NewVocab and safe for concurrent use.
//
// The trie is stored in preorder as parallel arrays, so a walk over it is a
// linear scan that skips a dead subtree by jumping to its end index.
type Vocab struct {
	size   int
	pieces [][]byte // views into one buffer; nil for tokens with no bytes
	eog    []uint64 // bitset of end-of-generation tokens
	eogIDs []int32

	// Trie node i (node 0 is the root, the empty prefix) adds byte nodeByte[i]
	// to its parent's prefix and sits at depth nodeDepth[i]; its subtree is
	// nodes i..nodeEnd[i]-1. The tokens whose bytes are exactly node i's
	// prefix are nodeToks[nodeTok[i]:nodeTok[i+1]].
	nodeByte  []byte
	nodeDepth []int32
	nodeEnd   []int32
	nodeTok   []int32
	nodeToks  []int32
	maxDepth  int

	shared sharedTables // node tables of all grammars, see share.go
}

// NewVocab indexes a vocabulary. pieces[i] is the bytes token i writes; a nil
// or empty piece is never allowed under a grammar (control tokens). eog lists
// the end-of-generation tokens, which a Matcher allows exactly when it can
// end, whatever their bytes. NewVocab copies what it keeps.
func NewVocab(pieces [][]byte, eog []int32) *Vocab {
	v := &Vocab{size: len(pieces)}
	words := (v.size + 63) / 64
	v.eog = make([]uint64, words)
	for _, id := range eog {
		if id < 0 || int(id) >= v.size || v.eog[id>>6]&(1<<(id&63)) != 0 {
			continue
		}
		v.eog[id>>6] |= 1 << (id & 63)
		v.eogIDs = append(v.eogIDs, id)
	}
	slices.Sort(v.eogIDs)

	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	buf := make([]byte, 0, total)
	v.pieces = make([][]byte, v.size)
	var ids []int32 // tokens that go in the trie
	for i, p := range pieces {
		if len(p) == 0 {
			continue
		}
		start := len(buf)
		buf = append(buf, p...)
		v.pieces[i] = buf[start:len(buf):len(buf)]
		if !v.isEOG(int32(i)) {
			ids = append(ids, int32(i))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(v.pieces[a], v.pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.buildTrie(ids)
	return v
}

// buildTrie lays out the trie of the pieces of ids, which are sorted by
// bytes, so that the preorder of the trie is the order in which prefixes
// first appear.
func (v *Vocab) buildTrie(ids []int32) {
	v.nodeByte = []byte{0}
	v.nodeDepth = []int32{0}
	v.nodeTok = []int32{0}
	open := []int32{0} // open[d] is the node on the current path at depth d
	var prev []byte
	closeTo := func(depth int) {
		for len(open)-1 > depth {
			n := open[len(open)-1]
			open = open[:len(open)-1]
			v.nodeEnd[n] = int32(len(v.nodeByte))
		}
	}
	v.nodeEnd = []int32{0}
	for _, id := range ids {
		p := v.pieces[id]
		common := 0
		for common < len(p) && common < len(prev) && p[common] == prev[common] {
			common++
		}
		closeTo(common)
		for d := common; d < len(p); d++ {
			n := int32(len(v.nodeByte))
			v.nodeByte = append(v.nodeByte, p[d])
			v.nodeDepth = append(v.nodeDepth, int32(d+1))
			v.nodeEnd = append(v.nodeEnd, 0)
			v.nodeTok = append(v.nodeTok, int32(len(v.nodeToks)))
			open = append(open, n)
		}
		v.nodeToks = append(v.nodeToks, id)
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	closeTo(0)
	v.nodeEnd[0] = int32(len(v.nodeByte))
	// nodeTok[i] was set when node i was created, before its own tokens were
	// appended; tokens of node i are those appended until node i+1 appeared.
	v.nodeTok = append(v.nodeTok, int32(len(v.nodeToks)))
}

// Size is the number of tokens, the length of the pieces NewVocab was given.
func (v *Vocab) Size() int { return v.size }

func (v *Vocab) isEOG(id int32) bool { return v.eog[id>>6]&(1<<(id&63)) != 0 }

// tokensAt returns the tokens whose bytes are exactly trie node n's prefix.
func (v *Vocab) tokensAt(n int32) []int32 { return v.nodeToks[v.nodeTok[n]:v.nodeTok[n+1]] }

func (v *Vocab) maskWords() int { return (v.size + 63) / 64 }
