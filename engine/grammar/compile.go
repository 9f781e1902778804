package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The compiled form of a grammar is a recursive transition network: each
// rule is a nondeterministic automaton whose nodes read one byte from a set
// (nodeBytes) or call a rule (nodeCall), and whose successor sets are already
// closed over the empty moves of sequences, alternatives and repetitions.
// The matcher's stacks hold a nodeBytes at the top and the calls to return
// to below it.

type nodeKind uint8

const (
	nodeBytes nodeKind = iota
	nodeCall
)

// endPos in a successor set means "the rule ends here".
const endPos int32 = -1

type byteSet [4]uint64

func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

type node struct {
	kind   nodeKind
	tail   bool // a call whose only successor is endPos: it returns straight to its caller's caller
	set    byteSet
	callee int32
	next   []int32 // sorted; node ids and endPos
}

type rule struct {
	name      string
	start     []int32
	line, col int
}

// inlineWeight bounds the size (about one node per byte a rule reads) of a
// non-recursive rule without unbounded repetition that is copied into its
// callers instead of called. A copy keeps small things (whitespace, a
// character, an escape, a number, an enum) inside the caller's frame, so the
// per-node token tables decide nearly every token without looking at the
// stack below. Rules with a loop (a string's characters) stay called: their
// loop node's table is computed once and shared by every caller and, through
// the Vocab, by every grammar (share.go).
//
// A callee inside a loop is copied up to loopInlineWeight: called, its frame
// would return after every round of the loop, and every token longer than
// one round would need the stack below.
const (
	inlineWeight     = 64
	loopInlineWeight = 1024
)

// Bounds of a compiled grammar: repetitions copy what they repeat, and
// nested repetitions of things that may be empty make successor sets grow
// with the square of the copies.
const (
	maxNodes = 1 << 20
	maxEdges = 1 << 19
)

// errTooLarge aborts a compile that passes maxNodes or maxEdges.
type errTooLarge struct{ rule ruleDef }

type compiler struct {
	defs      []ruleDef
	byName    map[string]int
	recursive []bool // rules that can call themselves
	weights   []int  // -1: not computed yet
	inlinable []bool // non-recursive, no unbounded repetition, not root

	classes map[string]*classDFA

	nodes   []node
	rules   []rule
	ruleOf  map[int]int32 // def index -> compiled rule
	pending []int         // defs waiting to be compiled
	marker  int32
	edges   int
	current ruleDef // the rule being compiled
}

func compile(defs []ruleDef) (*Grammar, error) {
	c := &compiler{defs: defs, byName: map[string]int{}, ruleOf: map[int]int32{}, marker: endPos, classes: map[string]*classDFA{}}
	for i, d := range defs {
		c.byName[d.name] = i
	}
	rootDef, ok := c.byName["root"]
	if !ok {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: `no rule named "root"`}
	}
	calls := make([][]int, len(defs))
	for i, d := range defs {
		var err error
		walkExpr(d.body, func(e *expr) {
			if e.kind != exprRef || err != nil {
				return
			}
			j, ok := c.byName[e.name]
			if !ok {
				err = &SyntaxError{Line: e.line, Col: e.col, Msg: fmt.Sprintf("undefined rule %q", e.name)}
				return
			}
			calls[i] = append(calls[i], j)
		})
		if err != nil {
			return nil, err
		}
	}
	c.recursive = recursiveRules(calls)
	c.weights = make([]int, len(defs))
	for i := range c.weights {
		c.weights[i] = -1
	}
	c.inlinable = make([]bool, len(defs))
	for i := range defs {
		c.inlinable[i] = !c.recursive[i] && i != rootDef && !hasLoop(defs[i].body)
	}

	c.ruleIndex(rootDef)
	if err := c.buildAll(); err != nil {
		return nil, err
	}
	for i := range c.nodes {
		n := &c.nodes[i]
		n.tail = n.kind == nodeCall && len(n.next) == 1 && n.next[0] == endPos
	}
	g := &Grammar{nodes: c.nodes, rules: c.rules, root: 0}
	if err := g.check(); err != nil {
		return nil, err
	}
	return g, nil
}

// hasLoop reports whether e repeats something without bound (not counting
// the rules it calls).
func hasLoop(e *expr) bool {
	found := false
	walkExpr(e, func(x *expr) { found = found || x.kind == exprRep && x.max < 0 })
	return found
}

// buildAll compiles the rules reachable from root.
func (c *compiler) buildAll() (err error) {
	defer func() {
		if x := recover(); x != nil {
			big, ok := x.(errTooLarge)
			if !ok {
				panic(x)
			}
			err = &SyntaxError{Line: big.rule.line, Col: big.rule.col, Msg: fmt.Sprintf("rule %q is too large once its repetitions are expanded (more than %d nodes or %d transitions)", big.rule.name, maxNodes, maxEdges)}
		}
	}()
	for len(c.pending) > 0 {
		d := c.pending[0]
		c.pending = c.pending[1:]
		c.current = c.defs[d]
		r := c.ruleOf[d]
		c.rules[r].start = c.build(c.defs[d].body, []int32{endPos}, false)
	}
	return nil
}

func (c *compiler) grow(edges int) {
	c.edges += edges
	if len(c.nodes) > maxNodes || c.edges > maxEdges {
		panic(errTooLarge{c.current})
	}
}

func walkExpr(e *expr, f func(*expr)) {
	f(e)
	for _, s := range e.subs {
		walkExpr(s, f)
	}
}

// recursiveRules marks the rules that can reach themselves through calls.
func recursiveRules(calls [][]int) []bool {
	comp, groups := components(calls)
	rec := make([]bool, len(calls))
	for v := range calls {
		rec[v] = len(groups[comp[v]]) > 1 || slices.Contains(calls[v], v)
	}
	return rec
}

// inlineAt decides whether a call of def j is copied in, inside a loop or
// not.
func (c *compiler) inlineAt(j int, inLoop bool) bool {
	if !c.inlinable[j] {
		return false
	}
	if inLoop {
		return c.weight(j) <= loopInlineWeight
	}
	return c.weight(j) <= inlineWeight
}

// weight estimates how many nodes def i's body compiles to, with the
// callees it copies in. Only called for inlinable rules, whose calls to
// other inlinable rules form a DAG, so the recursion ends.
func (c *compiler) weight(i int) int {
	if c.weights[i] >= 0 {
		return c.weights[i]
	}
	c.weights[i] = c.exprWeight(c.defs[i].body, false)
	return c.weights[i]
}

func (c *compiler) exprWeight(e *expr, inLoop bool) int {
	switch e.kind {
	case exprBytes:
		return len(e.lit)
	case exprClass:
		return c.classDFA(e).edges
	case exprRef:
		j := c.byName[e.name]
		if c.inlineAt(j, inLoop) {
			return c.weight(j)
		}
		return 1
	case exprRep:
		w := c.exprWeight(e.subs[0], inLoop || e.max < 0)
		copies := e.max
		if copies < 0 {
			copies = e.min + 1
		}
		return min(w*max(copies, 1), 1<<30)
	}
	w := 0
	for _, s := range e.subs {
		w = min(w+c.exprWeight(s, inLoop), 1<<30)
	}
	return w
}

func (c *compiler) ruleIndex(def int) int32 {
	if r, ok := c.ruleOf[def]; ok {
		return r
	}
	r := int32(len(c.rules))
	d := c.defs[def]
	c.rules = append(c.rules, rule{name: d.name, line: d.line, col: d.col})
	c.ruleOf[def] = r
	c.pending = append(c.pending, def)
	return r
}

func (c *compiler) newNode(n node) int32 {
	c.grow(len(n.next) + 1)
	c.nodes = append(c.nodes, n)
	return int32(len(c.nodes) - 1)
}

// build compiles e followed by the successor set next and returns e's entry
// set. inLoop says e is inside an unbounded repetition of its rule.
func (c *compiler) build(e *expr, next []int32, inLoop bool) []int32 {
	switch e.kind {
	case exprSeq:
		for i := len(e.subs) - 1; i >= 0; i-- {
			next = c.build(e.subs[i], next, inLoop)
		}
		return next
	case exprAlt:
		var out []int32
		for _, s := range e.subs {
			out = union(out, c.build(s, next, inLoop))
		}
		return out
	case exprBytes:
		for i := len(e.lit) - 1; i >= 0; i-- {
			var s byteSet
			s.addRange(e.lit[i], e.lit[i])
			next = []int32{c.newNode(node{kind: nodeBytes, set: s, next: next})}
		}
		return next
	case exprClass:
		return c.buildClass(c.classDFA(e), next)
	case exprRef:
		j := c.byName[e.name]
		if c.inlineAt(j, inLoop) {
			return c.build(c.defs[j].body, next, inLoop)
		}
		return []int32{c.newNode(node{kind: nodeCall, callee: c.ruleIndex(j), next: next})}
	case exprRep:
		x := e.subs[0]
		cur := next
		copies := e.min
		if e.max < 0 {
			if copies > 0 {
				cur = c.loop(x, cur, true)
				copies--
			} else {
				cur = c.loop(x, cur, false)
			}
		} else {
			for range e.max - e.min {
				cur = union(c.build(x, cur, inLoop), next)
			}
		}
		for range copies {
			cur = c.build(x, cur, inLoop)
		}
		return cur
	}
	panic("grammar: unknown expression kind")
}

// loop compiles x* (or x+ when once) followed by next: x's successors get
// back to x's entry as well as to next.
func (c *compiler) loop(x *expr, next []int32, once bool) []int32 {
	c.marker--
	m := c.marker
	first := len(c.nodes)
	entry := c.build(x, union(next, []int32{m}), true)
	nullable := slices.Contains(entry, m)
	body := slices.DeleteFunc(slices.Clone(entry), func(id int32) bool { return id == m })
	again := union(body, next)
	for i := first; i < len(c.nodes); i++ {
		n := &c.nodes[i]
		if k := slices.Index(n.next, m); k >= 0 {
			n.next = union(slices.Delete(slices.Clone(n.next), k, k+1), again)
			c.grow(len(again))
		}
	}
	if once && !nullable {
		return body
	}
	return again
}

// union returns the sorted union of two sorted sets.
func union(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// classDFA is a class's byte automaton, deterministic: the edges leaving a
// state have disjoint byte sets, so a class adds no ambiguity to the
// matcher's state. State 0 is the start; an edge to -1 ends the class. Each
// distinct class is built once per compile and copied at every use.
type classDFA struct {
	states [][]classEdge
	edges  int
}

type classEdge struct {
	set byteSet
	to  int32
}

func (c *compiler) classDFA(e *expr) *classDFA {
	if e.dfa != nil {
		return e.dfa
	}
	rs := e.ranges
	var kb []byte
	for _, r := range rs {
		kb = binary.LittleEndian.AppendUint32(kb, uint32(r.lo))
		kb = binary.LittleEndian.AppendUint32(kb, uint32(r.hi))
	}
	key := string(kb)
	if d, ok := c.classes[key]; ok {
		e.dfa = d
		return d
	}
	d := &classDFA{}
	memo := map[string]int32{}
	var build func(seqs [][]byteRange) int32
	build = func(seqs [][]byteRange) int32 {
		if len(seqs[0]) == 0 {
			return -1 // sequences sharing a lead byte have one length
		}
		k := seqsKey(seqs)
		if id, ok := memo[k]; ok {
			return id
		}
		id := int32(len(d.states))
		d.states = append(d.states, nil)
		memo[k] = id
		// Cut the byte space at every boundary of a first range; within
		// one piece every sequence either covers it or not.
		var cuts []int
		for _, s := range seqs {
			cuts = append(cuts, int(s[0].lo), int(s[0].hi)+1)
		}
		sort.Ints(cuts)
		cuts = slices.Compact(cuts)
		type group struct {
			set   byteSet
			tails [][]byteRange
		}
		groups := map[string]*group{}
		var order []string
		for i := 0; i+1 < len(cuts); i++ {
			lo, hi := cuts[i], cuts[i+1]-1
			var tails [][]byteRange
			for _, s := range seqs {
				if int(s[0].lo) <= lo && hi <= int(s[0].hi) {
					tails = append(tails, s[1:])
				}
			}
			if len(tails) == 0 {
				continue
			}
			gk := seqsKey(tails)
			g, ok := groups[gk]
			if !ok {
				g = &group{tails: tails}
				groups[gk] = g
				order = append(order, gk)
			}
			g.set.addRange(byte(lo), byte(hi))
		}
		var edges []classEdge
		for _, gk := range order {
			g := groups[gk]
			edges = append(edges, classEdge{set: g.set, to: build(g.tails)})
		}
		d.states[id] = edges
		d.edges += len(edges)
		return id
	}
	build(utf8Sequences(rs))
	c.classes[key] = d
	e.dfa = d
	return d
}

// buildClass copies a class's automaton followed by next.
func (c *compiler) buildClass(d *classDFA, next []int32) []int32 {
	entry := make([][]int32, len(d.states))
	var inst func(s int32) []int32
	inst = func(s int32) []int32 {
		if s < 0 {
			return next
		}
		if entry[s] != nil {
			return entry[s]
		}
		var out []int32
		for _, e := range d.states[s] {
			out = append(out, c.newNode(node{kind: nodeBytes, set: e.set, next: inst(e.to)}))
		}
		slices.Sort(out)
		entry[s] = out
		return out
	}
	return inst(0)
}

func seqsKey(seqs [][]byteRange) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		var sb strings.Builder
		for _, r := range s {
			sb.WriteByte(r.lo)
			sb.WriteByte(r.hi)
		}
		parts[i] = sb.String()
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	return strings.Join(parts, "\x00|")
}

// check rejects grammars the matcher cannot run exactly: a rule that calls
// itself before reading a byte (the stack would grow without bound), and a
// rule that can never end (then a prefix could be allowed that no sentence
// extends).
func (g *Grammar) check() error {
	seen := &visitMarks{stamp: make([]uint32, len(g.nodes))}
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r := range g.rules {
			if !nullable[r] && g.canEnd(g.rules[r].start, func(n *node) bool { return n.kind == nodeCall && nullable[n.callee] }, seen) {
				nullable[r] = true
				changed = true
			}
		}
	}
	productive := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r := range g.rules {
			if !productive[r] && g.canEnd(g.rules[r].start, func(n *node) bool { return n.kind == nodeBytes || productive[n.callee] }, seen) {
				productive[r] = true
				changed = true
			}
		}
	}
	// Name a rule on a cycle of unending rules, the cause, rather than a
	// rule that merely calls one.
	culprit := -1
	for r := range g.rules {
		if productive[r] {
			continue
		}
		if culprit < 0 {
			culprit = r
		}
		if g.callsItself(int32(r), productive) {
			culprit = r
			break
		}
	}
	if culprit >= 0 {
		ru := g.rules[culprit]
		return &SyntaxError{Line: ru.line, Col: ru.col, Msg: fmt.Sprintf("rule %q never ends: every way through it recurses forever", ru.name)}
	}
	// Left calls: r calls s before reading a byte.
	left := make([][]int32, len(g.rules))
	for r := range g.rules {
		seen := map[int32]bool{}
		var visit func(set []int32)
		visit = func(set []int32) {
			for _, id := range set {
				if id == endPos || seen[id] {
					continue
				}
				seen[id] = true
				n := &g.nodes[id]
				if n.kind != nodeCall {
					continue
				}
				left[r] = append(left[r], n.callee)
				if nullable[n.callee] {
					visit(n.next)
				}
			}
		}
		visit(g.rules[r].start)
	}
	color := make([]uint8, len(g.rules)) // 0 new, 1 on path, 2 done
	var path []int32
	var cycle []int32
	var dfs func(r int32) bool
	dfs = func(r int32) bool {
		color[r] = 1
		path = append(path, r)
		for _, s := range left[r] {
			if color[s] == 1 {
				i := slices.Index(path, s)
				cycle = append(slices.Clone(path[i:]), s)
				return true
			}
			if color[s] == 0 && dfs(s) {
				return true
			}
		}
		path = path[:len(path)-1]
		color[r] = 2
		return false
	}
	for r := range g.rules {
		if color[r] == 0 && dfs(int32(r)) {
			names := make([]string, len(cycle))
			for i, x := range cycle {
				names[i] = g.rules[x].name
			}
			ru := g.rules[cycle[0]]
			return &SyntaxError{Line: ru.line, Col: ru.col, Msg: fmt.Sprintf("rule %q is left-recursive: %s calls itself before reading anything", ru.name, strings.Join(names, " -> "))}
		}
	}
	return nil
}

// callsItself reports whether rule r reaches a call of itself through calls
// of rules that skip says nothing about (skip[x] true: do not enter x).
func (g *Grammar) callsItself(r int32, skip []bool) bool {
	seenRule := map[int32]bool{}
	seenNode := map[int32]bool{}
	var visit func(set []int32) bool
	visit = func(set []int32) bool {
		for _, id := range set {
			if id == endPos || seenNode[id] {
				continue
			}
			seenNode[id] = true
			n := &g.nodes[id]
			if n.kind == nodeCall {
				if n.callee == r {
					return true
				}
				if !skip[n.callee] && !seenRule[n.callee] {
					seenRule[n.callee] = true
					if visit(g.rules[n.callee].start) {
						return true
					}
				}
			}
			if visit(n.next) {
				return true
			}
		}
		return false
	}
	return visit(g.rules[r].start)
}

// canEnd reports whether the end of a rule can be reached from set by
// passing nodes for which pass says yes.
func (g *Grammar) canEnd(set []int32, pass func(*node) bool, seen *visitMarks) bool {
	seen.next()
	var visit func(set []int32) bool
	visit = func(set []int32) bool {
		for _, id := range set {
			if id == endPos {
				return true
			}
			if !seen.mark(id) {
				continue
			}
			if n := &g.nodes[id]; pass(n) && visit(n.next) {
				return true
			}
		}
		return false
	}
	return visit(set)
}

// visitMarks is a reusable visited set over node ids.
type visitMarks struct {
	stamp []uint32
	gen   uint32
}

func (v *visitMarks) next() { v.gen++ }

// mark marks id and reports whether it was unmarked.
func (v *visitMarks) mark(id int32) bool {
	if v.stamp[id] == v.gen {
		return false
	}
	v.stamp[id] = v.gen
	return true
}
