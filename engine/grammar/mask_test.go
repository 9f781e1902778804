package grammar

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// Grammars whose masks are checked against brute force, chosen to cross
// symbol boundaries inside tokens: recursion, nested repetition, classes of
// multi-byte characters, nullable rules, alternatives that share prefixes.
var handGrammars = []string{
	// arithmetic, recursive through parentheses
	`root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ ("." [0-9]+)? | "(" ws expr ws ")" | "-" factor
ws ::= " "?`,
	// a list of quoted words, unicode included
	`root ::= "[" ( item ( ", " item )* )? "]"
item ::= "\"" [^"\\\n]{1,5} "\""`,
	// alternatives with common prefixes and nullable rules
	`root ::= a b | a "c" | "ab" "ab"?
a ::= "a" | ""
b ::= "b"*`,
	// any characters, bounded
	`root ::= .{0,6} "!"`,
	// nested repetition of a nullable group
	`root ::= ( "x"? "y"? )* "z"`,
	// right recursion
	`root ::= "(" root ")" | "é€😀"`,
	// classes at the UTF-8 length boundaries
	`root ::= ( [\x7F-\x80] | [\u07FF-\u0800] | [\uFFFF-\U00010000] | [\uD7FF-\uE000] | [^\x00-\U0010FFFE] )+`,
}

var handSchemas = []string{
	toolSchema,
	`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"integer"},"maxItems":3}},"required":["a"],"additionalProperties":true}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/node"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"enum":["a","ab","abc",1,10,{"x":[]}]}`,
	`{"type":"string","format":"date-time"}`,
}

// toolSchema is a nested tool call: a string, an enum, an integer, a nested
// object and an array of objects.
const toolSchema = `{"type":"object","properties":{
 "name":{"type":"string","enum":["get_weather","search_flights"]},
 "arguments":{"type":"object","properties":{
  "location":{"type":"string","description":"City and country"},
  "unit":{"type":"string","enum":["celsius","fahrenheit"]},
  "days":{"type":"integer","minimum":1,"maximum":14},
  "options":{"type":"object","properties":{"detailed":{"type":"boolean"},"lang":{"type":"string"}},"required":["detailed"],"additionalProperties":false},
  "stops":{"type":"array","items":{"type":"object","properties":{"city":{"type":"string"},"nights":{"type":"integer"}},"required":["city","nights"],"additionalProperties":false}}
 },"required":["location","unit","days","options","stops"],"additionalProperties":false}
},"required":["name","arguments"],"additionalProperties":false}`

func handGrammarList(t *testing.T) []*Grammar {
	var gs []*Grammar
	for _, src := range handGrammars {
		gs = append(gs, mustGBNF(t, src))
	}
	for _, s := range handSchemas {
		gs = append(gs, mustSchema(t, s))
	}
	return append(gs, JSONObject())
}

func TestMaskBruteForceSynthetic(t *testing.T) {
	v, _ := synthVocab()
	states := 0
	for i, g := range handGrammarList(t) {
		for seed := range 12 {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(seed)))
			walk(t, g.NewMatcher(v), v, rng, 40, func(out []byte) {
				m := g.NewMatcher(v)
				if err := m.AcceptBytes(out); err != nil {
					t.Fatal(err)
				}
				checkMask(t, m, v, out)
				states++
			})
		}
	}
	t.Logf("%d states", states)
}

// TestMaskBruteForceRandom checks masks on random grammars and schemas.
func TestMaskBruteForceRandom(t *testing.T) {
	v, _ := synthVocab()
	states := 0
	rapid.Check(t, func(rt *rapid.T) {
		var g *Grammar
		var err error
		if rapid.Bool().Draw(rt, "schema") {
			g, err = FromJSONSchema([]byte(genSchema(rt)))
		} else {
			g, err = ParseGBNF(genGrammar(rt).print(rand.New(rand.NewPCG(1, 1))))
		}
		if err != nil {
			rt.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 5))
		for range 4 {
			m := g.NewMatcher(v)
			walk(rt, m, v, rng, 30, func(out []byte) {
				checkMask(rt, m, v, out)
				states++
			})
		}
	})
	t.Logf("%d states", states)
}

func TestMaskBruteForceQwen(t *testing.T) {
	q := qwen(t)
	v := q.vocab
	gs := handGrammarList(t)
	// and random ones, drawn from the property tests' generators
	schemas := rapid.Custom(func(t *rapid.T) string { return genSchema(t) })
	grammars := rapid.Custom(func(t *rapid.T) *gGrammar { return genGrammar(t) })
	for i := range 6 {
		gs = append(gs, mustSchema(t, schemas.Example(i)))
		gs = append(gs, mustGBNF(t, grammars.Example(i).print(rand.New(rand.NewPCG(uint64(i), 0)))))
	}
	states := 0
	steps := 8
	if testing.Short() {
		steps = 2
	}
	for i, g := range gs {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for range 4 {
			m := g.NewMatcher(v)
			walk(t, m, v, rng, steps*4, func(out []byte) {
				if rng.IntN(2) == 0 {
					checkMask(t, m, v, out)
					states++
				}
			})
		}
	}
	// A realistic path: the tool-call text as the tokenizer splits it, every
	// state on the way.
	g := mustSchema(t, toolSchema)
	m := g.NewMatcher(v)
	var out []byte
	for _, id := range q.tok.Encode(toolCallText, false, false) {
		checkMask(t, m, v, out)
		states++
		if err := m.Accept(id); err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		out = append(out, v.pieces[id]...)
	}
	if !m.CanEnd() || !m.Finished() {
		t.Errorf("the complete tool call is not a finished sentence")
	}
	t.Logf("%d states", states)
}

const toolCallText = `{"name": "get_weather", "arguments": {"location": "Zürich, Switzerland", "unit": "celsius", "days": 14, "options": {"detailed": true, "lang": "de-CH"}, "stops": [{"city": "Lyon", "nights": 2}, {"city": "Nice \"côte\"", "nights": 1}]}}`

func TestCloneIndependence(t *testing.T) {
	v, _ := synthVocab()
	g := mustGBNF(t, `root ::= "ab" ("c" | "d") "e"`)
	m := g.NewMatcher(v)
	if err := m.AcceptBytes([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if err := c.AcceptBytes([]byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := m.AcceptBytes([]byte("d")); err != nil {
		t.Fatal("the original lost its place after the clone advanced:", err)
	}
	if err := c.AcceptBytes([]byte("d")); err == nil {
		t.Fatal("the clone took the original's path")
	}
	d := c.Clone()
	for _, x := range []*Matcher{m, c, d} {
		if err := x.AcceptBytes([]byte("e")); err != nil || !x.Finished() {
			t.Fatalf("accept e: %v, finished %v", err, x.Finished())
		}
	}
	if err := m.AcceptBytes([]byte("x")); err == nil {
		t.Fatal("finished matcher accepted more")
	}
}

func TestAcceptBytesMidUTF8(t *testing.T) {
	v, pieces := synthVocab()
	g := mustGBNF(t, `root ::= "€" [^a] "😀"`) // € = e2 82 ac, 😀 = f0 9f 98 80
	m := g.NewMatcher(v)
	if err := m.AcceptBytes([]byte{0xe2}); err != nil {
		t.Fatal(err)
	}
	if m.CanEnd() {
		t.Fatal("can end inside a character")
	}
	if err := m.AcceptBytes([]byte{0x82, 0xff}); err == nil {
		t.Fatal("accepted an invalid continuation byte")
	}
	// the failed call left the matcher where it was
	tail := slices.IndexFunc(pieces, func(p []byte) bool { return string(p) == "\x82\xac" })
	if tail < 0 || !m.Allows(int32(tail)) {
		t.Fatal("the token finishing € is not allowed after e2")
	}
	if err := m.Accept(int32(tail)); err != nil {
		t.Fatal(err)
	}
	// [^a]: any scalar but a, as UTF-8 only: no surrogates, no lone bytes
	for _, bad := range [][]byte{{'a'}, {0xed, 0xa0, 0x80}, {0x80}, {0xc0, 0x80}, {0xf4, 0x90, 0x80, 0x80}} {
		if err := m.Clone().AcceptBytes(bad); err == nil {
			t.Errorf("[^a] accepted % x", bad)
		}
	}
	if err := m.AcceptBytes([]byte("é\xf0\x9f")); err != nil {
		t.Fatal(err)
	}
	mask := maskWords(v)
	m.Mask(mask)
	if got := allowedList(mask); len(got) != 2 || string(pieces[got[0]]) != "\x98" || string(pieces[got[1]]) != "\x98\x80" {
		t.Fatalf("after f0 9f of 😀 allowed%s, want 98 and 98 80", describeTokens(v, got))
	}
	if err := m.AcceptBytes([]byte{0x98, 0x80}); err != nil || !m.Finished() {
		t.Fatalf("finishing 😀: %v, finished %v", err, m.Finished())
	}
}

func TestEOG(t *testing.T) {
	v, pieces := synthVocab()
	eog := int32(len(pieces) - 1)
	empty := int32(len(pieces) - 2)
	g := mustGBNF(t, `root ::= "a" "b"*`)
	m := g.NewMatcher(v)
	if m.CanEnd() || m.Allows(eog) || m.Accept(eog) == nil {
		t.Fatal("end-of-generation allowed before the output is complete")
	}
	if m.Allows(empty) || m.Accept(empty) == nil {
		t.Fatal("a token without text was allowed")
	}
	if err := m.AcceptBytes([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if !m.CanEnd() || m.Finished() || !m.Allows(eog) {
		t.Fatalf("after a: CanEnd %v Finished %v Allows(eog) %v", m.CanEnd(), m.Finished(), m.Allows(eog))
	}
	mask := maskWords(v)
	m.Mask(mask)
	if !bit(mask, eog) || !bit(mask, int32('b')) {
		t.Fatal("mask lacks eog or b")
	}
	if err := m.Accept(eog); err != nil {
		t.Fatal(err)
	}
	if !m.Finished() || !m.CanEnd() {
		t.Fatal("not finished after end-of-generation")
	}
	m.Mask(mask)
	if got := allowedList(mask); len(got) != 1 || got[0] != eog {
		t.Fatalf("after end-of-generation allowed%s", describeTokens(v, got))
	}
	if m.Accept(int32('b')) == nil {
		t.Fatal("accepted text after end-of-generation")
	}
	if m.Accept(int32(v.Size())) == nil || m.Allows(-1) {
		t.Fatal("out-of-range token")
	}
	// a grammar whose sentence leaves nothing to add finishes without EOG
	f := mustGBNF(t, `root ::= "ab"`).NewMatcher(v)
	if err := f.AcceptBytes([]byte("ab")); err != nil || !f.Finished() {
		t.Fatalf("ab: %v, finished %v", err, f.Finished())
	}
	f.Mask(mask)
	if got := allowedList(mask); len(got) != 1 || got[0] != eog {
		t.Fatalf("finished: allowed%s", describeTokens(v, got))
	}
}

// TestCacheLimits runs with tiny intern tables and caches, so that resets
// and evictions happen on every few steps, and checks masks stay exact.
func TestCacheLimits(t *testing.T) {
	v, _ := synthVocab()
	for i, g := range handGrammarList(t) {
		tab := g.tables(v)
		tab.mu.Lock()
		tab.lim = limits{states: 8, stacks: 8, maskBytes: 200, posBytes: 300}
		tab.mu.Unlock()
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		m := g.NewMatcher(v)
		keep := m.Clone()
		walk(t, m, v, rng, 30, func(out []byte) {
			checkMask(t, m, v, out)
			if rng.IntN(5) == 0 {
				keep = m.Clone()
			}
		})
		checkMask(t, keep, v, nil)
	}
}

// TestConcurrentMatchers shares one grammar among goroutines (run with
// -race to check the caches' synchronization).
func TestConcurrentMatchers(t *testing.T) {
	v, _ := synthVocab()
	g := mustSchema(t, toolSchema)
	want := map[int][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	failures := &goroutineTB{}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			out, _ := walk(failures, g.NewMatcher(v), v, rng, 200, nil)
			mu.Lock()
			want[w] = out
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, msg := range failures.msgs {
		t.Error(msg)
	}
	// Again with caches so small that goroutines reset and evict what the
	// others use; every mask still equals brute force.
	small := mustSchema(t, toolSchema)
	tab := small.tables(v)
	tab.mu.Lock()
	tab.lim = limits{states: 16, stacks: 16, maskBytes: 500, posBytes: 2000}
	tab.mu.Unlock()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			m := small.NewMatcher(v)
			walk(failures, m, v, rng, 100, func(out []byte) { checkMask(failures, m, v, out) })
		}()
	}
	wg.Wait()
	for _, msg := range failures.msgs {
		t.Error(msg)
	}
	// The same walks alone give the same outputs: masks did not depend on
	// what the other goroutines did to the caches.
	for w, out := range want {
		rng := rand.New(rand.NewPCG(uint64(w), 1))
		if again, _ := walk(t, mustSchema(t, toolSchema).NewMatcher(v), v, rng, 200, nil); string(again) != string(out) {
			t.Fatalf("walk %d: %q alone, %q concurrently", w, again, out)
		}
	}
}

// goroutineTB is a tb for goroutines other than the test's: a failure is
// recorded and ends the goroutine.
type goroutineTB struct {
	mu   sync.Mutex
	msgs []string
}

func (g *goroutineTB) Helper() {}

func (g *goroutineTB) Fatal(args ...any) { g.Fatalf("%s", fmt.Sprint(args...)) }

func (g *goroutineTB) Fatalf(format string, args ...any) {
	g.mu.Lock()
	g.msgs = append(g.msgs, fmt.Sprintf(format, args...))
	g.mu.Unlock()
	runtime.Goexit()
}

func TestAllowsMatchesMask(t *testing.T) {
	v, _ := synthVocab()
	g := JSONObject()
	rng := rand.New(rand.NewPCG(3, 3))
	m := g.NewMatcher(v)
	mask := maskWords(v)
	walk(t, m, v, rng, 60, func(out []byte) {
		// Allows before Mask (uncached) and after (cached) agree with it.
		c := m.Clone()
		before := make([]bool, v.Size())
		for tok := range before {
			before[tok] = c.Allows(int32(tok))
		}
		c.Mask(mask)
		for tok := range before {
			if before[tok] != bit(mask, int32(tok)) || c.Allows(int32(tok)) != before[tok] {
				t.Fatalf("after %q: token %q: Allows %v, mask %v", out, v.pieces[tok], before[tok], bit(mask, int32(tok)))
			}
		}
	})
}

// TestWarmDecodeDoesNotAllocate: once a grammar's caches hold a path, masks
// and accepts along it allocate nothing (the decode loop's rule).
func TestWarmDecodeDoesNotAllocate(t *testing.T) {
	q := qwen(t)
	g := mustSchema(t, toolSchema)
	ids := q.tok.Encode(toolCallText, false, false)
	mask := maskWords(q.vocab)
	replay := func() {
		m := g.NewMatcher(q.vocab)
		for _, id := range ids {
			m.Mask(mask)
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	replay()
	if allocs := testing.AllocsPerRun(5, replay); allocs > 1 { // the Matcher itself
		t.Errorf("%.0f allocations per warm replay of %d tokens", allocs, len(ids))
	}
}
