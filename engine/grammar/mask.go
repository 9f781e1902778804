package grammar

import "math/bits"

// Masks. A token t is allowed in a state iff some stack can read all of t's
// bytes. Split each stack into its top frame (the top node's rule, read from
// that node) and the frames below. Either the top frame reads all of t
// without returning, or it returns after some prefix of t and the frames
// below read the rest. The first part does not depend on the stack below,
// so it is computed once per node by a walk of the vocabulary trie from the
// node's local state (posInfo): the tokens the frame accepts on its own, and
// the trie nodes (exits) at which the frame returns with bytes perhaps left.
// At mask time a stack costs one OR of its top node's accepted set plus a
// walk of the trie below each exit from the state the frame returns into.
// Exits are few and their subtrees small: small rules are copied into their
// callers (compile.go), so a frame returns only at the end of a called
// rule, such as a string's closing quote, and only exits with tokens below
// them are kept (a token like `abc"` that ends at the quote is decided by
// the frame itself).
//
// Masks of states that needed exit walks or have several stacks are cached
// in the state; states repeat (a string's body is the same state after every
// character), so most masks are copies.

// tokenSet is a set of token ids, dense (a bitset) when large.
type tokenSet struct {
	dense []uint64
	toks  []int32
}

func newTokenSet(words []uint64) tokenSet {
	count := 0
	for _, w := range words {
		count += bits.OnesCount64(w)
	}
	if count > len(words)/2 {
		return tokenSet{dense: words}
	}
	toks := make([]int32, 0, count)
	for i, w := range words {
		for w != 0 {
			toks = append(toks, int32(i*64+bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
	return tokenSet{toks: toks}
}

func (s *tokenSet) orInto(dst []uint64) {
	if s.dense != nil {
		d := dst[:len(s.dense)]
		for i, w := range s.dense {
			d[i] |= w
		}
		return
	}
	for _, t := range s.toks {
		dst[t>>6] |= 1 << (t & 63)
	}
}

func (s *tokenSet) has(t int32) bool {
	if s.dense != nil {
		return s.dense[t>>6]&(1<<(t&63)) != 0
	}
	lo, hi := 0, len(s.toks)
	for lo < hi {
		m := (lo + hi) / 2
		if s.toks[m] < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(s.toks) && s.toks[lo] == t
}

func (s *tokenSet) bytes() int { return 8*len(s.dense) + 4*len(s.toks) + 48 }

type cachedMask struct{ tokenSet }

// posInfo is what a node's frame decides on its own.
type posInfo struct {
	accepted tokenSet // tokens read to their end without leaving the frame (or leaving it exactly at their end)
	exits    []int32  // trie nodes with children where the frame returns having read the node's bytes
}

// posInfo returns node pos's table, computing it on first use.
func (t *tables) posInfo(pos int32) *posInfo {
	if pi := t.pos[pos].Load(); pi != nil {
		return pi
	}
	v := t.v
	key := t.g.posKey(pos)
	if key.ok {
		if pi := v.shared.get(key.key); pi != nil {
			return t.publishPos(pos, pi)
		}
	}
	pi := t.computePosInfo(pos)
	if key.ok {
		v.shared.put(key.key, pi)
	}
	return t.publishPos(pos, pi)
}

// computePosInfo walks the whole vocabulary trie from node pos's local
// state.
func (t *tables) computePosInfo(pos int32) *posInfo {
	v := t.v
	words := make([]uint64, v.maskWords())
	var exits []int32
	st := make([]*state, v.maxDepth+1)
	st[0] = t.localState(pos)
	end := int32(len(v.nodeByte))
	for i := int32(1); i < end; {
		d := v.nodeDepth[i]
		s := t.step(st[d-1], v.nodeByte[i])
		if s == nil {
			i = v.nodeEnd[i]
			continue
		}
		st[d] = s
		if s.bottom && v.nodeEnd[i] > i+1 {
			exits = append(exits, i) // only exits with tokens below them need a walk
		}
		for _, tok := range v.tokensAt(i) {
			words[tok>>6] |= 1 << (tok & 63)
		}
		if len(s.next) == 0 {
			i = v.nodeEnd[i]
			continue
		}
		i++
	}
	return &posInfo{accepted: newTokenSet(words), exits: exits}
}

func (t *tables) publishPos(pos int32, pi *posInfo) *posInfo {
	if t.pos[pos].CompareAndSwap(nil, pi) {
		t.mu.Lock()
		t.cache.addPos(t, pos, pi)
		t.mu.Unlock()
		return pi
	}
	if cur := t.pos[pos].Load(); cur != nil {
		return cur
	}
	return pi
}

func (pi *posInfo) bytes() int { return pi.accepted.bytes() + 4*len(pi.exits) }

// walkBelow adds the tokens below trie node e (excluding e's own) that can
// be read from state s once e's bytes are read.
func (t *tables) walkBelow(e int32, s *state, dst []uint64, st []*state) {
	v := t.v
	st[v.nodeDepth[e]] = s
	end := v.nodeEnd[e]
	for i := e + 1; i < end; {
		d := v.nodeDepth[i]
		s := t.step(st[d-1], v.nodeByte[i])
		if s == nil {
			i = v.nodeEnd[i]
			continue
		}
		st[d] = s
		for _, tok := range v.tokensAt(i) {
			dst[tok>>6] |= 1 << (tok & 63)
		}
		if len(s.next) == 0 {
			i = v.nodeEnd[i]
			continue
		}
		i++
	}
}

// mask writes state s's mask into dst (all words cleared first).
func (t *tables) mask(s *state, dst []uint64) {
	clear(dst)
	if c := s.mask.Load(); c != nil {
		c.orInto(dst)
		return
	}
	walked := false
	var st []*state
	for _, sk := range s.stacks {
		pi := t.posInfo(sk.pos)
		pi.accepted.orInto(dst)
		if len(pi.exits) == 0 || len(sk.below.frames) == 0 {
			continue
		}
		if st == nil {
			st = make([]*state, t.v.maxDepth+1)
		}
		r := t.returnState(sk.below)
		for _, e := range pi.exits {
			t.walkBelow(e, r, dst, st)
		}
		walked = true
	}
	if s.bottom {
		for _, id := range t.v.eogIDs {
			dst[id>>6] |= 1 << (id & 63)
		}
	}
	if walked || len(s.stacks) > 1 {
		words := make([]uint64, t.v.maskWords())
		copy(words, dst)
		c := &cachedMask{newTokenSet(words)}
		if s.mask.CompareAndSwap(nil, c) {
			t.mu.Lock()
			t.cache.addMask(s, c, t.lim.maskBytes)
			t.mu.Unlock()
		}
	}
}

// allows reports whether token tok is allowed in state s.
func (t *tables) allows(s *state, tok int32) bool {
	v := t.v
	if tok < 0 || int(tok) >= v.size {
		return false
	}
	if v.isEOG(tok) {
		return s.bottom
	}
	p := v.pieces[tok]
	if len(p) == 0 {
		return false
	}
	if c := s.mask.Load(); c != nil {
		return c.has(tok)
	}
	return t.advance(s, p) != nil
}

// advance reads bytes from s; nil if some byte is not allowed.
func (t *tables) advance(s *state, b []byte) *state {
	for _, c := range b {
		if s = t.step(s, c); s == nil {
			return nil
		}
	}
	return s
}

// Cache budgets per (Grammar, Vocab) pair. A Qwen-sized dense token set is
// 19 KB, so these hold about 800 dense masks and 1,700 dense node tables;
// sparse ones are far smaller. Oldest entries go first.
const (
	maskCacheBytes = 16 << 20
	posCacheBytes  = 32 << 20
)

type cacheEntry struct {
	s     *state
	mask  *cachedMask
	pos   int32
	pi    *posInfo
	bytes int
}

type fifo struct {
	entries []cacheEntry
	head    int
	total   int
}

func (f *fifo) push(e cacheEntry) {
	f.entries = append(f.entries, e)
	f.total += e.bytes
}

func (f *fifo) pop() cacheEntry {
	e := f.entries[f.head]
	f.entries[f.head] = cacheEntry{}
	f.head++
	f.total -= e.bytes
	if f.head > len(f.entries)/2 {
		f.entries = append(f.entries[:0], f.entries[f.head:]...)
		f.head = 0
	}
	return e
}

func (f *fifo) len() int { return len(f.entries) - f.head }

type cacheRings struct {
	masks, pos fifo
}

func (c *cacheRings) addMask(s *state, m *cachedMask, budget int) {
	c.masks.push(cacheEntry{s: s, mask: m, bytes: m.bytes()})
	for c.masks.total > budget && c.masks.len() > 1 {
		e := c.masks.pop()
		e.s.mask.CompareAndSwap(e.mask, nil)
	}
}

func (c *cacheRings) addPos(t *tables, pos int32, pi *posInfo) {
	c.pos.push(cacheEntry{pos: pos, pi: pi, bytes: pi.bytes()})
	for c.pos.total > t.lim.posBytes && c.pos.len() > 1 {
		e := c.pos.pop()
		t.pos[e.pos].CompareAndSwap(e.pi, nil)
	}
}

func (c *cacheRings) dropMasks() {
	for c.masks.len() > 0 {
		e := c.masks.pop()
		e.s.mask.CompareAndSwap(e.mask, nil)
	}
}
