package grammar

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Node tables (posInfo) depend only on the part of a grammar a node's rule
// can reach, not on the grammar around it. Each node therefore gets a key:
// its rule's hash and the node's place in the rule. A rule's hash covers its
// own nodes in a canonical (depth-first) numbering and, for each rule it
// calls, that rule's hash, Merkle-style; rules that call each other in a
// cycle are hashed as one group, from the rule at hand. Equal hashes mean
// equal reachable sub-grammars, so the Vocab keeps tables by key, and a new
// grammar for the same schema, or any schema using the same string rule,
// starts with them computed.

type posKey struct {
	sum [32]byte
	idx uint32
}

type posKeyEntry struct {
	key posKey
	ok  bool
}

// posKey returns node id's key, hashing the grammar's rules the first time.
func (g *Grammar) posKey(id int32) posKeyEntry {
	g.keysOnce.Do(g.hashRules)
	return g.keys[id]
}

// hashRules computes every rule's hash and every byte node's key.
func (g *Grammar) hashRules() {
	calls := make([][]int, len(g.rules))
	own := make([][]int32, len(g.rules))  // each rule's nodes in canonical order
	index := make([]uint32, len(g.nodes)) // a node's place in own[its rule]
	for r := range g.rules {
		seen := map[int32]bool{}
		var visit func(set []int32)
		visit = func(set []int32) {
			for _, id := range set {
				if id == endPos || seen[id] {
					continue
				}
				seen[id] = true
				index[id] = uint32(len(own[r]))
				own[r] = append(own[r], id)
				if n := &g.nodes[id]; n.kind == nodeCall {
					calls[r] = append(calls[r], int(n.callee))
				}
				visit(g.nodes[id].next)
			}
		}
		visit(g.rules[r].start)
	}
	comp, order := components(calls)
	sums := make([][32]byte, len(g.rules))
	var buf []byte
	ref := func(id int32) uint32 {
		if id == endPos {
			return 1<<32 - 1
		}
		return index[id]
	}
	// writeRule describes rule r; calls within its group name the callee by
	// its place in the group's order, others by the callee's hash.
	writeRule := func(r int32, inGroup map[int32]uint32) {
		buf = append(buf, 'R')
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(g.rules[r].start)))
		for _, id := range g.rules[r].start {
			buf = binary.LittleEndian.AppendUint32(buf, ref(id))
		}
		for _, id := range own[r] {
			n := &g.nodes[id]
			buf = append(buf, 'N', byte(n.kind))
			if n.tail {
				buf = append(buf, 't')
			}
			if n.kind == nodeBytes {
				for _, w := range n.set {
					buf = binary.LittleEndian.AppendUint64(buf, w)
				}
			} else if k, ok := inGroup[n.callee]; ok {
				buf = append(buf, 'g')
				buf = binary.LittleEndian.AppendUint32(buf, k)
			} else {
				buf = append(buf, 'h')
				buf = append(buf, sums[n.callee][:]...)
			}
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(n.next)))
			for _, x := range n.next {
				buf = binary.LittleEndian.AppendUint32(buf, ref(x))
			}
		}
	}
	// Groups come callees first, so a callee outside the group is hashed.
	for _, group := range order {
		for _, r := range group {
			// The group's rules in depth-first order of calls from r.
			inGroup := map[int32]uint32{}
			var members []int32
			var visit func(x int32)
			visit = func(x int32) {
				inGroup[x] = uint32(len(members))
				members = append(members, x)
				for _, c := range calls[x] {
					if comp[c] == comp[r] {
						if _, ok := inGroup[int32(c)]; !ok {
							visit(int32(c))
						}
					}
				}
			}
			visit(int32(r))
			buf = buf[:0]
			for _, m := range members {
				writeRule(m, inGroup)
			}
			sums[r] = sha256.Sum256(buf)
		}
	}
	g.keys = make([]posKeyEntry, len(g.nodes))
	for r := range g.rules {
		for _, id := range own[r] {
			g.keys[id] = posKeyEntry{key: posKey{sum: sums[r], idx: index[id]}, ok: true}
		}
	}
}

// components returns the strongly connected components of a call graph:
// each vertex's component and the components in an order where every
// component comes after those it calls into.
func components(calls [][]int) (comp []int, order [][]int32) {
	n := len(calls)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp = make([]int, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range calls[v] {
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var group []int32
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp[w] = len(order)
			group = append(group, int32(w))
			if w == v {
				break
			}
		}
		order = append(order, group)
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	return comp, order
}

// sharedTables holds a Vocab's node tables by key, within a byte budget,
// oldest out first.
type sharedTables struct {
	mu    sync.Mutex
	m     map[posKey]*posInfo
	order []posKey
	head  int
	total int
}

const sharedTableBytes = 64 << 20

func (s *sharedTables) get(k posKey) *posInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *sharedTables) put(k posKey, pi *posInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[posKey]*posInfo{}
	}
	if _, ok := s.m[k]; ok {
		return
	}
	s.m[k] = pi
	s.order = append(s.order, k)
	s.total += pi.bytes()
	for s.total > sharedTableBytes && s.head < len(s.order)-1 {
		old := s.order[s.head]
		s.order[s.head] = posKey{}
		s.head++
		s.total -= s.m[old].bytes()
		delete(s.m, old)
	}
	if s.head > len(s.order)/2 {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}
