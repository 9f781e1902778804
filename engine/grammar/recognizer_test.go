package grammar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// This file is the independent judge for GBNF grammars: random grammars are
// built as trees here, printed as GBNF for ParseGBNF, and decided by a
// memoizing recognizer over the test's own trees, which shares no code with
// the package's parser or matcher.

type gKind int

const (
	gLit gKind = iota
	gClass
	gRef
	gSeq
	gAlt
	gRep
)

type gNode struct {
	kind     gKind
	lit      []rune
	ranges   [][2]rune
	neg, dot bool
	ref      int
	subs     []*gNode
	min, max int // max -1: unbounded
}

type gGrammar struct{ rules []*gNode }

var litPool = []rune{'a', 'b', 'c', 'x', '"', '\\', ' ', '\n', 'é', '€', '😀', '中', '{', '}', ']', '['}

var rangePool = [][2]rune{
	{'a', 'c'}, {'b', 'b'}, {'a', 'z'}, {'0', '9'}, {'"', '"'}, {'\\', '\\'}, {0, 0x1F}, {0x80, 0xFFFF},
	{'é', 'é'}, {0x1F600, 0x1F64F}, {0x4E00, 0x9FFF}, {0, 0x7F}, {']', ']'}, {'-', '-'}, {'^', '^'}, {0xE000, 0x10FFFF},
	{0x7FF, 0x800}, {0xFFFF, 0x10000}, {0xD7FF, 0xE000},
}

// genGrammar draws rules r0 (root) .. rn-1 that are productive and not
// left-recursive: a rule's first alternative only calls later rules, and a
// call back to an earlier (or the same) rule comes only after a non-empty
// literal in the same sequence.
func genGrammar(t *rapid.T) *gGrammar {
	n := rapid.IntRange(1, 4).Draw(t, "rules")
	g := &gGrammar{rules: make([]*gNode, n)}
	for i := range n {
		nalts := rapid.IntRange(1, 3).Draw(t, "alts")
		alt := &gNode{kind: gAlt}
		for a := range nalts {
			alt.subs = append(alt.subs, genSeq(t, i, n, a > 0, 0))
		}
		g.rules[i] = alt
	}
	return g
}

func genSeq(t *rapid.T, rule, nrules int, mayRecurse bool, depth int) *gNode {
	seq := &gNode{kind: gSeq}
	guarded := false
	for range rapid.IntRange(1, 3).Draw(t, "seqlen") {
		e := genItem(t, rule, nrules, mayRecurse && guarded, depth)
		if e.kind == gLit && len(e.lit) > 0 {
			guarded = true
		}
		seq.subs = append(seq.subs, e)
	}
	return seq
}

func genItem(t *rapid.T, rule, nrules int, back bool, depth int) *gNode {
	choices := []string{"lit", "lit", "class", "dot"}
	if rule+1 < nrules || back {
		choices = append(choices, "ref", "ref")
	}
	if depth < 2 {
		choices = append(choices, "group", "rep", "rep")
	}
	var e *gNode
	switch rapid.SampledFrom(choices).Draw(t, "item") {
	case "lit":
		lit := rapid.SliceOfN(rapid.SampledFrom(litPool), 0, 3).Draw(t, "lit")
		e = &gNode{kind: gLit, lit: lit}
	case "class":
		e = &gNode{kind: gClass, ranges: rapid.SliceOfN(rapid.SampledFrom(rangePool), 1, 3).Draw(t, "ranges"), neg: rapid.Bool().Draw(t, "neg")}
		if len(classRanges(e)) == 0 {
			e.neg = false
		}
	case "dot":
		e = &gNode{kind: gClass, dot: true}
	case "ref":
		lo, hi := rule+1, nrules-1
		if back {
			lo = 0
		}
		e = &gNode{kind: gRef, ref: rapid.IntRange(lo, hi).Draw(t, "ref")}
	case "group":
		alt := &gNode{kind: gAlt}
		for range rapid.IntRange(1, 3).Draw(t, "galts") {
			alt.subs = append(alt.subs, genSeqNested(t, rule, nrules, back, depth+1))
		}
		e = alt
	case "rep":
		x := genItem(t, rule, nrules, back, depth+1)
		lo := rapid.IntRange(0, 2).Draw(t, "min")
		hi := lo + rapid.IntRange(-1, 2).Draw(t, "extra")
		if hi < lo {
			hi = -1
		}
		e = &gNode{kind: gRep, subs: []*gNode{x}, min: lo, max: hi}
	}
	return e
}

// genSeqNested is a sequence inside a group: it may call back only if the
// group itself comes after a guard.
func genSeqNested(t *rapid.T, rule, nrules int, back bool, depth int) *gNode {
	seq := &gNode{kind: gSeq}
	for range rapid.IntRange(1, 3).Draw(t, "nseqlen") {
		seq.subs = append(seq.subs, genItem(t, rule, nrules, back, depth))
	}
	return seq
}

// classRanges returns the class's members as sorted disjoint ranges.
func classRanges(e *gNode) [][2]rune {
	if e.dot {
		return [][2]rune{{0, 0xD7FF}, {0xE000, utf8.MaxRune}}
	}
	rs := slices.Clone(e.ranges)
	slices.SortFunc(rs, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var merged [][2]rune
	for _, r := range rs {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], r[1])
		} else {
			merged = append(merged, r)
		}
	}
	if e.neg {
		var comp [][2]rune
		next := rune(0)
		for _, r := range merged {
			if r[0] > next {
				comp = append(comp, [2]rune{next, r[0] - 1})
			}
			next = r[1] + 1
		}
		if next <= utf8.MaxRune {
			comp = append(comp, [2]rune{next, utf8.MaxRune})
		}
		merged = comp
	}
	// Drop the surrogates.
	var out [][2]rune
	for _, r := range merged {
		if r[0] < 0xD800 {
			out = append(out, [2]rune{r[0], min(r[1], 0xD7FF)})
		}
		if r[1] > 0xDFFF {
			out = append(out, [2]rune{max(r[0], 0xE000), r[1]})
		}
	}
	return out
}

// print writes the grammar as GBNF, escaping characters in the many ways
// the dialect allows and adding comments and line breaks where it allows
// them.
func (g *gGrammar) print(rng *rand.Rand) string {
	var b strings.Builder
	if rng.IntN(2) == 0 {
		b.WriteString("# a random grammar\n\n")
	}
	for i, r := range g.rules {
		b.WriteString(ruleName(i) + " ::= ")
		printNode(&b, r, rng, false)
		if rng.IntN(3) == 0 {
			b.WriteString(" # end of rule")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func ruleName(i int) string {
	if i == 0 {
		return "root"
	}
	return fmt.Sprintf("r%d", i)
}

func printNode(b *strings.Builder, e *gNode, rng *rand.Rand, nested bool) {
	switch e.kind {
	case gLit:
		b.WriteByte('"')
		for _, r := range e.lit {
			writeChar(b, r, rng, `"`)
		}
		b.WriteByte('"')
	case gClass:
		if e.dot {
			b.WriteByte('.')
			return
		}
		b.WriteByte('[')
		if e.neg {
			b.WriteByte('^')
		}
		for _, r := range e.ranges {
			writeChar(b, r[0], rng, `]\^-`)
			if r[1] != r[0] {
				b.WriteByte('-')
				writeChar(b, r[1], rng, `]\^-`)
			}
		}
		b.WriteByte(']')
	case gRef:
		b.WriteString(ruleName(e.ref))
	case gSeq:
		for i, s := range e.subs {
			if i > 0 {
				b.WriteByte(' ')
			}
			if s.kind == gAlt {
				b.WriteString("( ")
				printNode(b, s, rng, true)
				b.WriteString(" )")
				continue
			}
			printNode(b, s, rng, nested)
		}
	case gAlt:
		for i, s := range e.subs {
			if i > 0 {
				if nested && rng.IntN(3) == 0 {
					b.WriteString(" # or\n    ")
				}
				b.WriteString(" | ")
				if rng.IntN(4) == 0 {
					b.WriteString("\n  ")
				}
			}
			printNode(b, s, rng, nested)
		}
	case gRep:
		x := e.subs[0]
		if x.kind == gSeq || x.kind == gAlt || x.kind == gRep {
			b.WriteString("(")
			printNode(b, x, rng, true)
			b.WriteString(")")
		} else {
			printNode(b, x, rng, nested)
		}
		switch {
		case e.min == 0 && e.max < 0 && rng.IntN(2) == 0:
			b.WriteByte('*')
		case e.min == 1 && e.max < 0 && rng.IntN(2) == 0:
			b.WriteByte('+')
		case e.min == 0 && e.max == 1 && rng.IntN(2) == 0:
			b.WriteByte('?')
		case e.max < 0:
			fmt.Fprintf(b, "{%d,}", e.min)
		case e.min == e.max && rng.IntN(2) == 0:
			fmt.Fprintf(b, "{%d}", e.min)
		default:
			fmt.Fprintf(b, "{ %d , %d }", e.min, e.max)
		}
	}
}

func writeChar(b *strings.Builder, r rune, rng *rand.Rand, special string) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
		return
	case r == '\\':
		b.WriteString(`\\`)
		return
	case strings.ContainsRune(special, r):
		b.WriteByte('\\')
		b.WriteRune(r)
		return
	case r < 0x20:
		fmt.Fprintf(b, `\x%02X`, r)
		return
	}
	switch rng.IntN(6) {
	case 0:
		if r < 0x100 {
			fmt.Fprintf(b, `\x%02x`, r)
			return
		}
	case 1:
		if r <= 0xFFFF {
			fmt.Fprintf(b, `\u%04X`, r)
			return
		}
	case 2:
		fmt.Fprintf(b, `\U%08x`, r)
		return
	}
	b.WriteRune(r)
}

// recognizer decides membership and prefixes for one input.
type recognizer struct {
	g    *gGrammar
	in   []byte
	ends map[recKey][]int
	pre  map[recKey]bool
}

type recKey struct {
	n *gNode
	i int
}

func newRecognizer(g *gGrammar, in []byte) *recognizer {
	return &recognizer{g: g, in: in, ends: map[recKey][]int{}, pre: map[recKey]bool{}}
}

// sentence: the input is in the language.
func (r *recognizer) sentence() bool {
	return slices.Contains(r.endsOf(r.g.rules[0], 0), len(r.in))
}

// prefix: the input is a prefix of some sentence.
func (r *recognizer) prefix() bool { return r.prefixOf(r.g.rules[0], 0) }

func addPos(set []int, p int) []int {
	if !slices.Contains(set, p) {
		set = append(set, p)
	}
	return set
}

// endsOf: the j such that e derives in[i:j].
func (r *recognizer) endsOf(e *gNode, i int) []int {
	k := recKey{e, i}
	if out, ok := r.ends[k]; ok {
		return out
	}
	var out []int
	switch e.kind {
	case gLit:
		lit := []byte(string(e.lit))
		if bytes.HasPrefix(r.in[i:], lit) {
			out = []int{i + len(lit)}
		}
	case gClass:
		if i < len(r.in) {
			c, size := utf8.DecodeRune(r.in[i:])
			if !(c == utf8.RuneError && size <= 1) && inRanges(classRanges(e), c) {
				out = []int{i + size}
			}
		}
	case gRef:
		out = r.endsOf(r.g.rules[e.ref], i)
	case gSeq:
		cur := []int{i}
		for _, s := range e.subs {
			var next []int
			for _, p := range cur {
				for _, q := range r.endsOf(s, p) {
					next = addPos(next, q)
				}
			}
			cur = next
		}
		out = cur
	case gAlt:
		for _, s := range e.subs {
			for _, q := range r.endsOf(s, i) {
				out = addPos(out, q)
			}
		}
	case gRep:
		x := e.subs[0]
		level := []int{i}
		seen := map[int]bool{}
		if e.min == 0 {
			out = addPos(out, i)
			seen[i] = true
		}
		for k := 1; e.max < 0 || k <= e.max; k++ {
			var next []int
			for _, p := range level {
				for _, q := range r.endsOf(x, p) {
					if k > e.min && seen[q] {
						continue // already reached with enough copies
					}
					next = addPos(next, q)
				}
			}
			if len(next) == 0 {
				break
			}
			if k >= e.min {
				for _, q := range next {
					out = addPos(out, q)
					seen[q] = true
				}
			}
			level = next
		}
	}
	slices.Sort(out)
	r.ends[k] = out
	return out
}

// prefixOf: in[i:] is a prefix of some string e derives (all rules of the
// generated grammars derive something, so what follows can always finish).
func (r *recognizer) prefixOf(e *gNode, i int) bool {
	if i == len(r.in) {
		return true
	}
	k := recKey{e, i}
	if v, ok := r.pre[k]; ok {
		return v
	}
	res := false
	switch e.kind {
	case gLit:
		lit := []byte(string(e.lit))
		rem := r.in[i:]
		res = len(rem) <= len(lit) && bytes.HasPrefix(lit, rem)
	case gClass:
		rem := r.in[i:]
		c, size := utf8.DecodeRune(rem)
		if !(c == utf8.RuneError && size <= 1) {
			res = size == len(rem) && inRanges(classRanges(e), c)
		} else {
			res = partialInRanges(classRanges(e), rem)
		}
	case gRef:
		res = r.prefixOf(r.g.rules[e.ref], i)
	case gSeq:
		cur := []int{i}
		for _, s := range e.subs {
			var next []int
			for _, p := range cur {
				if r.prefixOf(s, p) {
					res = true
					break
				}
				for _, q := range r.endsOf(s, p) {
					next = addPos(next, q)
				}
			}
			if res {
				break
			}
			cur = next
		}
		if !res {
			res = slices.Contains(cur, len(r.in))
		}
	case gAlt:
		for _, s := range e.subs {
			if r.prefixOf(s, i) {
				res = true
				break
			}
		}
	case gRep:
		x := e.subs[0]
		level := []int{i}
		seen := map[int]bool{i: true}
		for k := 0; e.max < 0 || k < e.max; k++ {
			var next []int
			for _, p := range level {
				if r.prefixOf(x, p) {
					res = true
					break
				}
				for _, q := range r.endsOf(x, p) {
					if e.max < 0 && seen[q] {
						continue
					}
					seen[q] = true
					next = addPos(next, q)
				}
			}
			if res || len(next) == 0 {
				break
			}
			level = next
		}
	}
	r.pre[k] = res
	return res
}

func inRanges(rs [][2]rune, c rune) bool {
	for _, r := range rs {
		if r[0] <= c && c <= r[1] {
			return true
		}
	}
	return false
}

// partialInRanges: rem is a proper prefix of the UTF-8 encoding of some
// member of rs.
func partialInRanges(rs [][2]rune, rem []byte) bool {
	b0 := rem[0]
	var n int
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		n = 2
	case b0 >= 0xE0 && b0 <= 0xEF:
		n = 3
	case b0 >= 0xF0 && b0 <= 0xF4:
		n = 4
	default:
		return false
	}
	if len(rem) >= n {
		return false
	}
	val := rune(b0 & (0x7F >> n))
	for _, c := range rem[1:] {
		if c&0xC0 != 0x80 {
			return false
		}
		val = val<<6 | rune(c&0x3F)
	}
	shift := 6 * (n - len(rem))
	lo, hi := val<<shift, val<<shift+(1<<shift)-1
	lo = max(lo, []rune{0, 0, 0x80, 0x800, 0x10000}[n])
	hi = min(hi, []rune{0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF}[n])
	for _, r := range rs {
		a, b := max(r[0], lo), min(r[1], hi)
		if a > b {
			continue
		}
		// [a, b] minus the surrogates is non-empty?
		if a < 0xD800 || b > 0xDFFF {
			return true
		}
	}
	return false
}

// TestRandomGrammarsAgainstRecognizer: for random grammars, at every step of
// a random walk, every token's mask bit equals the recognizer's answer to
// "is the output plus this token a prefix of a sentence", and CanEnd equals
// "is the output a sentence".
func TestRandomGrammarsAgainstRecognizer(t *testing.T) {
	v, pieces := synthVocab()
	eog := int32(len(pieces) - 1)
	rapid.Check(t, func(rt *rapid.T) {
		gg := genGrammar(rt)
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1))
		src := gg.print(rng)
		g, err := ParseGBNF(src)
		if err != nil {
			rt.Fatalf("ParseGBNF:\n%s\n%v", src, err)
		}
		m := g.NewMatcher(v)
		mask := maskWords(v)
		var out []byte
		for step := range 12 {
			m.Mask(mask)
			rec := newRecognizer(gg, out)
			if got, want := m.CanEnd(), rec.sentence(); got != want {
				rt.Fatalf("grammar:\n%s\nafter %q: CanEnd %v, recognizer %v", src, out, got, want)
			}
			if !rec.prefix() {
				rt.Fatalf("grammar:\n%s\nafter %q: the output is not a prefix of any sentence", src, out)
			}
			for tok := int32(0); int(tok) < v.Size(); tok++ {
				var want bool
				switch {
				case tok == eog:
					want = m.CanEnd()
				case len(pieces[tok]) == 0:
				default:
					want = newRecognizer(gg, append(slices.Clip(out), pieces[tok]...)).prefix()
				}
				if got := bit(mask, tok); got != want {
					rt.Fatalf("grammar:\n%s\nafter %q (step %d): token %q: mask %v, recognizer %v", src, out, step, pieces[tok], got, want)
				}
			}
			allowed := allowedList(mask)
			if len(allowed) == 0 {
				rt.Fatalf("grammar:\n%s\nafter %q: nothing allowed", src, out)
			}
			tok := allowed[rng.IntN(len(allowed))]
			if err := m.Accept(tok); err != nil {
				rt.Fatal(err)
			}
			if tok == eog {
				if !m.Finished() {
					rt.Fatalf("not finished after the end-of-generation token")
				}
				return
			}
			out = append(out, pieces[tok]...)
		}
	})
}
