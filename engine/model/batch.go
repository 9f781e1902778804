package model

import "fmt"

// Batch is the input of one forward pass: tokens with their positions and,
// per token, the index in this batch of its parent (-1: the last committed
// token of the sequence). A prefill or a decode step is a chain (Parent[i] ==
// i-1); a speculative verify step is a tree whose nodes list parents before
// children.
type Batch struct {
	Tokens []int32
	Pos    []int32 // RoPE position of each token: committed length + depth in the tree
	Parent []int32 // index of the parent in this batch, or -1
	Logits []bool  // which tokens get a row of logits; nil means only the last
	// Verify keeps a chain pending until Commit, as a tree always is: a
	// linear draft being verified, of which only a prefix may be accepted
	// (recurrent state cannot be truncated afterwards).
	Verify bool
	// Chunk, when more than len(Tokens), is the length of the prompt
	// chunk this chain is the first piece of the rest of: its tokens are
	// computed exactly as in that whole chunk. (How attention rounds over
	// an F16 cache depends on how many queries a call has, tiledQueries;
	// nothing else in a pass depends on the other rows.) An engine that
	// runs a chunk in pieces beside other sequences' steps sets it, so
	// that the pieces give the whole chunk's bits. 0 (or len(Tokens)):
	// the batch is whole. Only a chain that commits may have it.
	Chunk int
}

// ChainBatch is the batch of tokens that directly follow the committed ones,
// the first at position startPos. allLogits asks for every token's logits
// (needed when verifying a linear draft); otherwise only the last gets them.
func ChainBatch(tokens []int32, startPos int, allLogits bool) Batch {
	b := Batch{
		Tokens: tokens,
		Pos:    make([]int32, len(tokens)),
		Parent: make([]int32, len(tokens)),
	}
	for i := range tokens {
		b.Pos[i] = int32(startPos + i)
		b.Parent[i] = int32(i - 1)
	}
	if allLogits {
		b.Logits = make([]bool, len(tokens))
		for i := range b.Logits {
			b.Logits[i] = true
		}
	}
	return b
}

// check validates b against a vocabulary of vocab tokens and reports whether
// it is a chain.
func (b *Batch) check(vocab int) (chain bool, err error) {
	n := len(b.Tokens)
	if n == 0 {
		return false, fmt.Errorf("model: empty batch")
	}
	if len(b.Pos) != n || len(b.Parent) != n || (b.Logits != nil && len(b.Logits) != n) {
		return false, fmt.Errorf("model: batch of %d tokens has %d positions, %d parents and %d logits flags (want %d each, logits may be nil)",
			n, len(b.Pos), len(b.Parent), len(b.Logits), n)
	}
	chain = true
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= vocab {
			return false, fmt.Errorf("model: batch token %d is %d, outside the vocabulary [0, %d)", i, t, vocab)
		}
		p := b.Parent[i]
		if p < -1 || int(p) >= i {
			return false, fmt.Errorf("model: batch token %d has parent %d; a parent must be -1 or an earlier index", i, p)
		}
		if b.Pos[i] < 0 {
			return false, fmt.Errorf("model: batch token %d has negative position %d", i, b.Pos[i])
		}
		if int(p) != i-1 {
			chain = false
		}
	}
	if b.Chunk != 0 && b.Chunk < n {
		return false, fmt.Errorf("model: batch of %d tokens is a piece of a chunk of %d; a chunk holds its pieces", n, b.Chunk)
	}
	if b.Chunk > n && (!chain || b.Verify) {
		return false, fmt.Errorf("model: a piece of a prompt chunk (Chunk %d) must be a chain that commits, not a tree or a verify chain", b.Chunk)
	}
	return chain, nil
}

// queries is how many query rows the attention of b's tokens is computed
// as: the whole chunk's when b is a piece of one.
func (b *Batch) queries() int {
	return max(len(b.Tokens), b.Chunk)
}

// wantsLogits reports whether token i of b gets a row of logits.
func (b *Batch) wantsLogits(i int) bool {
	if b.Logits == nil {
		return i == len(b.Tokens)-1
	}
	return b.Logits[i]
}

// ancestry lists, for every node of a tree batch, the batch indices it may
// attend to (its ancestors and itself) in ascending order, flattened:
// node i's list is idx[off[i]:off[i+1]]. The buffers are reused.
type ancestry struct {
	off []int32
	idx []int32
}

func (a *ancestry) build(parent []int32) {
	a.off, a.idx = AppendAncestry(a.off[:0], a.idx[:0], parent)
}

// AppendAncestry appends to off and idx, for every node of a tree batch
// with these parents, the batch indices it may attend to (its ancestors
// and itself, root first): node i's list is idx[off[i]:off[i+1]], off
// having len(parent)+1 entries. Backends share it for their masks.
func AppendAncestry(off, idx, parent []int32) ([]int32, []int32) {
	off = append(off, int32(len(idx)))
	for i := range parent {
		start := len(idx)
		for j := int32(i); j >= 0; j = parent[j] {
			idx = append(idx, j)
		}
		// collected node..root; the attention walk wants cache order (root first)
		for l, r := start, len(idx)-1; l < r; l, r = l+1, r-1 {
			idx[l], idx[r] = idx[r], idx[l]
		}
		off = append(off, int32(len(idx)))
	}
	return off, idx
}

// CheckPath checks that path (batch indices) is a root-to-node path of a
// pending batch of pending nodes with these parents, as State.Commit takes.
func CheckPath(parent []int32, pending int, path []int) error {
	prev := -1
	for k, idx := range path {
		if idx < 0 || idx >= pending {
			return fmt.Errorf("model: Commit path[%d] = %d is not a node of the pending batch of %d", k, idx, pending)
		}
		if int(parent[idx]) != prev {
			return fmt.Errorf("model: Commit path[%d] = %d has parent %d, not path[%d] = %d: not a root-to-node path", k, idx, parent[idx], k-1, prev)
		}
		prev = idx
	}
	return nil
}

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
