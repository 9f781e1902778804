package grammar

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// A matcher's position is a state: every way the bytes so far can have been
// parsed, as pushdown stacks, plus whether some parse has ended the root
// rule (bottom). Each stack has a byte-reading node at its top and below it
// the call nodes to return to.
//
// The stacks form a graph-structured stack, as GLR parsers keep them: all
// stacks with the same top node are one stack whose below is a frameSet, a
// set of the stacks they continue with (and possibly the bottom, the end of
// the root rule). So an ambiguous grammar's state holds at most one stack
// per node instead of one per parse, which could grow exponentially.
//
// Stacks, frame sets and states are persistent and interned per (Grammar,
// Vocab) pair, so equal ones are one pointer, and a state memoizes its byte
// transitions and its mask. A Matcher is a state pointer; Clone copies it.
//
// The same states serve a second purpose: the state holding the one stack
// (node, {bottom}) is node's "local" state, the parse of one frame of the
// node's rule. Its bottom flag then means "this frame has returned" rather
// than "the sentence can end"; mask.go uses that to precompute, per node, the
// tokens the frame decides by itself.

type stack struct {
	pos   int32
	below *frameSet
	id    uint64
}

// frameSet is what a stack continues with once its top frame returns.
type frameSet struct {
	frames []*stack // sorted by id; each top is a call node to return into
	bottom bool     // or the end of the root rule
	id     uint64
	// The state after returning into the frames: the continuation a token
	// meets when it leaves the frame above.
	ret atomic.Pointer[state]
}

type stackKey struct {
	pos   int32
	below *frameSet
}

type state struct {
	stacks []*stack // sorted by id, one per top node
	bottom bool
	live   byteSet // bytes some stack's top reads
	rank   [4]uint16
	next   []atomic.Pointer[state] // memoized transitions, one per live byte in order
	mask   atomic.Pointer[cachedMask]
}

// Bounds of the intern tables of one (Grammar, Vocab) pair. Past them the
// tables start afresh: existing states stay valid (matchers hold them) but
// lose their memoized transitions, so memory stays bounded.
const (
	maxStates = 1 << 16
	maxStacks = 1 << 17
)

// tables is everything a Grammar caches for one Vocab.
type tables struct {
	g *Grammar
	v *Vocab

	mu        sync.Mutex // guards the maps, ids and the cache rings
	stacks    map[stackKey]*stack
	frameSets map[string]*frameSet
	states    map[string]*state
	nextID    uint64
	key       []byte // scratch for keys
	close     closer
	bottomSet *frameSet // {bottom}

	start *state // before any byte
	done  *state // after an end-of-generation token: nothing but the end

	pos   []atomic.Pointer[posInfo] // per node, see mask.go
	cache cacheRings
	lim   limits
}

// limits are the bounds of one tables' caches (constants but for tests).
type limits struct {
	states, stacks      int
	maskBytes, posBytes int
}

var defaultLimits = limits{states: maxStates, stacks: maxStacks, maskBytes: maskCacheBytes, posBytes: posCacheBytes}

func newTables(g *Grammar, v *Vocab) *tables {
	t := &tables{g: g, v: v, pos: make([]atomic.Pointer[posInfo], len(g.nodes)), lim: defaultLimits}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reset()
	t.close.t = t
	t.close.reset()
	t.close.add(g.rules[g.root].start, t.bottomSet)
	t.start = t.close.finish()
	t.done = t.internState(nil, true)
	return t
}

// reset empties the intern tables. Called with mu held.
func (t *tables) reset() {
	for _, s := range t.states {
		for i := range s.next {
			s.next[i].Store(nil)
		}
	}
	for _, f := range t.frameSets {
		f.ret.Store(nil)
	}
	t.stacks = map[stackKey]*stack{}
	t.frameSets = map[string]*frameSet{}
	t.states = map[string]*state{}
	t.cache.dropMasks()
	if t.bottomSet == nil {
		t.bottomSet = t.internFrameSet(nil, true)
	} else {
		t.frameSets[string(t.setKey(nil, true))] = t.bottomSet
	}
	for _, s := range []*state{t.start, t.done} {
		if s != nil {
			t.states[string(t.setKey(s.stacks, s.bottom))] = s
		}
	}
}

func (t *tables) internStack(pos int32, below *frameSet) *stack {
	k := stackKey{pos, below}
	if s, ok := t.stacks[k]; ok {
		return s
	}
	t.nextID++
	s := &stack{pos: pos, below: below, id: t.nextID}
	t.stacks[k] = s
	return s
}

// setKey writes the intern key of a set of stacks into t.key.
func (t *tables) setKey(stacks []*stack, bottom bool) []byte {
	k := t.key[:0]
	for _, s := range stacks {
		k = binary.LittleEndian.AppendUint64(k, s.id)
	}
	if bottom {
		k = append(k, 1)
	}
	t.key = k
	return k
}

// internFrameSet returns the frame set of frames (sorted by id, no
// duplicates). Called with mu held.
func (t *tables) internFrameSet(frames []*stack, bottom bool) *frameSet {
	k := t.setKey(frames, bottom)
	if f, ok := t.frameSets[string(k)]; ok {
		return f
	}
	t.nextID++
	f := &frameSet{frames: slices.Clone(frames), bottom: bottom, id: t.nextID}
	t.frameSets[string(k)] = f
	return f
}

// internState returns the state of stacks (sorted by id, distinct tops),
// creating it if new. Called with mu held.
func (t *tables) internState(stacks []*stack, bottom bool) *state {
	k := t.setKey(stacks, bottom)
	if s, ok := t.states[string(k)]; ok {
		return s
	}
	s := &state{stacks: slices.Clone(stacks), bottom: bottom}
	for _, st := range stacks {
		n := &t.g.nodes[st.pos]
		for w := range s.live {
			s.live[w] |= n.set[w]
		}
	}
	total := 0
	for w := range s.live {
		s.rank[w] = uint16(total)
		total += bits.OnesCount64(s.live[w])
	}
	s.next = make([]atomic.Pointer[state], total)
	t.states[string(k)] = s
	return s
}

// step is the transition on byte b, nil when no stack reads b.
func (t *tables) step(s *state, b byte) *state {
	w, bit := b>>6, uint64(1)<<(b&63)
	if s.live[w]&bit == 0 {
		return nil
	}
	r := int(s.rank[w]) + bits.OnesCount64(s.live[w]&(bit-1))
	if n := s.next[r].Load(); n != nil {
		return n
	}
	t.mu.Lock()
	if len(t.states) > t.lim.states || len(t.stacks)+len(t.frameSets) > t.lim.stacks {
		t.reset()
	}
	c := &t.close
	c.reset()
	for _, st := range s.stacks {
		n := &t.g.nodes[st.pos]
		if n.set.has(b) {
			c.add(n.next, st.below)
		}
	}
	n := c.finish()
	t.mu.Unlock()
	s.next[r].Store(n)
	return n
}

// returnState is the state after the frame above f returns into f.
func (t *tables) returnState(f *frameSet) *state {
	if s := f.ret.Load(); s != nil {
		return s
	}
	t.mu.Lock()
	c := &t.close
	c.reset()
	c.pop(f)
	s := c.finish()
	t.mu.Unlock()
	f.ret.Store(s)
	return s
}

// localState is node pos's frame on its own: the state {(pos, {bottom})}.
func (t *tables) localState(pos int32) *state {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.internState([]*stack{t.internStack(pos, t.bottomSet)}, false)
}

// closer expands successor sets into stacks with byte-reading tops: calls
// push their return point (unless in tail position) and enter the callee,
// rule ends pop. Used with tables.mu held.
type closer struct {
	t      *tables
	out    []topBelow
	bottom bool
	calls  []callKey   // calls expanded, so nullable loops terminate
	pops   []*frameSet // frame sets returned into
	frames []*stack    // scratch for finish
}

type topBelow struct {
	pos   int32
	below *frameSet
}

type callKey struct {
	pos  int32
	rest *frameSet
}

func (c *closer) reset() {
	c.out, c.calls, c.pops = c.out[:0], c.calls[:0], c.pops[:0]
	c.bottom = false
}

func (c *closer) add(set []int32, rest *frameSet) {
	t := c.t
	for _, id := range set {
		if id == endPos {
			c.pop(rest)
			continue
		}
		n := &t.g.nodes[id]
		if n.kind == nodeBytes {
			c.out = append(c.out, topBelow{id, rest})
			continue
		}
		k := callKey{id, rest}
		if slices.Contains(c.calls, k) {
			continue
		}
		c.calls = append(c.calls, k)
		below := rest
		if !n.tail {
			below = t.internFrameSet([]*stack{t.internStack(id, rest)}, false)
		}
		c.add(t.g.rules[n.callee].start, below)
	}
}

func (c *closer) pop(rest *frameSet) {
	if slices.Contains(c.pops, rest) {
		return
	}
	c.pops = append(c.pops, rest)
	if rest.bottom {
		c.bottom = true
	}
	for _, f := range rest.frames {
		c.add(c.t.g.nodes[f.pos].next, f.below)
	}
}

// finish merges the stacks with the same top and interns the state.
func (c *closer) finish() *state {
	t := c.t
	slices.SortFunc(c.out, func(a, b topBelow) int {
		if a.pos != b.pos {
			return cmp.Compare(a.pos, b.pos)
		}
		return cmp.Compare(a.below.id, b.below.id)
	})
	c.out = slices.Compact(c.out)
	var stacks []*stack
	for i := 0; i < len(c.out); {
		j := i + 1
		for j < len(c.out) && c.out[j].pos == c.out[i].pos {
			j++
		}
		below := c.out[i].below
		if j > i+1 {
			frames := c.frames[:0]
			bottom := false
			for _, tb := range c.out[i:j] {
				frames = append(frames, tb.below.frames...)
				bottom = bottom || tb.below.bottom
			}
			slices.SortFunc(frames, func(a, b *stack) int { return cmp.Compare(a.id, b.id) })
			frames = slices.Compact(frames)
			below = t.internFrameSet(frames, bottom)
			c.frames = frames
		}
		stacks = append(stacks, t.internStack(c.out[i].pos, below))
		i = j
	}
	slices.SortFunc(stacks, func(a, b *stack) int { return cmp.Compare(a.id, b.id) })
	return t.internState(stacks, c.bottom)
}
