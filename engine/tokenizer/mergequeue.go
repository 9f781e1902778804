package tokenizer

// mergeQueue picks the next merge for both BPE variants. Symbol i holds the
// key of merging it with the symbol after it (lower merges first, noMerge
// where the pair forms no token), and best returns the leftmost symbol with
// the lowest key: the pair that rescanning every pair would pick, which is
// the rule both variants merge by.
//
// Keys lie in blocks of mergeBlock under a tournament tree of block minima.
// A merge changes three keys; each rescans its block only when it raised
// the block's minimum, and walks up the tree only while a minimum changes,
// so a merge costs O(log n) and its memory is touched near the merge. The
// queue is 4 bytes a symbol (the tree adds at most an eighth of that),
// allocated once. The binary heap of candidates used before held up to three
// 24-byte entries a symbol, stale ones included, and missed the cache on
// every pop: a 15 MiB word of one letter took 25 s and allocated 2.2 GB.
type mergeQueue struct {
	keys   []uint32
	tree   []uint32 // tree[1] is the root, tree[leaves+b] the minimum of block b; tree[0] is unused
	leaves int      // a power of two, at least the number of blocks
}

const (
	noMerge    = ^uint32(0)
	mergeBlock = 32
)

// newMergeQueue builds the queue over keys, which it keeps and updates.
func newMergeQueue(keys []uint32) mergeQueue {
	blocks := (len(keys) + mergeBlock - 1) / mergeBlock
	leaves := 1
	for leaves < blocks {
		leaves *= 2
	}
	q := mergeQueue{keys: keys, tree: make([]uint32, 2*leaves), leaves: leaves}
	for b := range leaves {
		q.tree[leaves+b] = q.blockMin(b)
	}
	for i := leaves - 1; i >= 1; i-- {
		q.tree[i] = min(q.tree[2*i], q.tree[2*i+1])
	}
	return q
}

func (q *mergeQueue) blockMin(b int) uint32 {
	m := noMerge
	lo := b * mergeBlock
	if lo >= len(q.keys) {
		return m
	}
	for _, k := range q.keys[lo:min(lo+mergeBlock, len(q.keys))] {
		m = min(m, k)
	}
	return m
}

// best returns the leftmost symbol with the lowest key, or -1 when no pair
// merges.
func (q *mergeQueue) best() int {
	m := q.tree[1]
	if m == noMerge {
		return -1
	}
	node := 1
	for node < q.leaves {
		node *= 2
		if q.tree[node] != m {
			node++ // the right child holds the minimum
		}
	}
	lo := (node - q.leaves) * mergeBlock
	for i, k := range q.keys[lo:] {
		if k == m {
			return lo + i
		}
	}
	panic("tokenizer: merge queue tree out of step with its keys")
}

// set gives symbol i the key k.
func (q *mergeQueue) set(i int, k uint32) {
	old := q.keys[i]
	if old == k {
		return
	}
	q.keys[i] = k
	node := q.leaves + i/mergeBlock
	switch m := q.tree[node]; {
	case k < m:
		for ; node >= 1 && q.tree[node] > k; node /= 2 {
			q.tree[node] = k
		}
		return
	case old != m:
		return // the block's minimum is another key, and stays
	}
	// k raised the block's minimum, unless another key shares it (in a run
	// of one pair, the next key usually does).
	lo := i / mergeBlock * mergeBlock
	m := noMerge
	for _, v := range q.keys[lo:min(lo+mergeBlock, len(q.keys))] {
		if v == old {
			return
		}
		m = min(m, v)
	}
	q.tree[node] = m
	for node > 1 {
		node /= 2
		v := min(q.tree[2*node], q.tree[2*node+1])
		if q.tree[node] == v {
			break
		}
		q.tree[node] = v
	}
}
