package grammar

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
		msg       string // a part of the message
	}{
		{"", 1, 1, "empty grammar"},
		{"# only a comment\n\n", 1, 1, "empty grammar"},
		{`root ::= "a`, 1, 12, "unterminated string"},
		{"root ::= \"a\"\nitem ::= [a-z", 2, 14, "unterminated character class"},
		{`root ::= [z-a]`, 1, 11, "backwards"},
		{`root ::= []`, 1, 10, "matches no character"},
		{`root ::= [^\x00-\U0010FFFF]`, 1, 10, "matches no character"},
		{`root ::= "\q"`, 1, 11, `unknown escape \q`},
		{`root ::= "\x4"`, 1, 14, "2 hex digits"},
		{`root ::= "\uD800"`, 1, 11, "not a Unicode scalar"},
		{`root ::= "\U00110000"`, 1, 11, "not a Unicode scalar"},
		{"root ::= \"a\"\n\nfoo bar", 3, 5, "expected ::="},
		{"root ::= ( \"a\" \n  | \"b\" ", 2, 9, "expected ) to close the ( at line 1, column 10"},
		{`root ::= "a"{2,1}`, 1, 13, "maximum below its minimum"},
		{`root ::= "a"{x}`, 1, 14, "expected a number"},
		{`root ::= "a"{20000}`, 1, 14, "above the limit"},
		{`root ::= "a" )`, 1, 14, "expected end of line"},
		{"root ::= item\nitem ::= \"x\" undefined-thing", 2, 14, `undefined rule "undefined-thing"`},
		{"root ::= \"a\"\nroot ::= \"b\"", 2, 1, `defined twice`},
		{`item ::= "a"`, 1, 1, `no rule named "root"`},
		{"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", 2, 1, `"expr" is left-recursive`},
		{"root ::= a\na ::= b? \"x\"\nb ::= \"y\"? a", 2, 1, "left-recursive: a -> b -> a"},
		{"root ::= \"x\" loop\nloop ::= \"y\" loop", 2, 1, `"loop" never ends`},
		{"root ::= \"\xff\"", 1, 11, "invalid UTF-8"},
		{"root ::= [a-\n", 1, 13, "unterminated character class"},
		{"root ::= x\nx ::= (\"a\"? \"b\"?){3000}", 2, 1, "too large"},
		{"root ::= .*{200}", 1, 1, "too large"},
		{"root ::= \"a\" ::=", 1, 14, "expected end of line"},
	} {
		_, err := ParseGBNF(tc.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a *SyntaxError", tc.src, err)
			continue
		}
		if se.Line != tc.line || se.Col != tc.col || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%q: %v; want line %d, column %d, containing %q", tc.src, err, tc.line, tc.col, tc.msg)
		}
		if want := "grammar: line "; !strings.HasPrefix(se.Error(), want) {
			t.Errorf("Error() = %q", se.Error())
		}
	}
}

func TestGBNFDialect(t *testing.T) {
	v, _ := synthVocab()
	for _, tc := range []struct {
		src string
		yes []string
		no  []string
	}{
		{`root ::= "a\n\r\t\\\"\x41\u00e9\U0001F600\[\]"`, []string{"a\n\r\t\\\"Aé😀[]"}, []string{"a"}},
		{`root ::= [\x41-\x43\]\-] [^\n"]`, []string{"Ax", "]é", "-😀", "C\\"}, []string{"Dx", "A\n", `A"`}},
		{`root ::= .`, []string{"a", "é", "😀", "\x7f", "\U0010FFFF"}, []string{"", "ab", "\xed\xa0\x80", "\xc0\x80", "\xf4\x90\x80\x80"}},
		{`root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2}`, []string{"bdde", "aabcddeeeff"}, []string{"bde", "bddefff", "ddde"}},
		{"root ::= ( \"a\" # comment\n  | \"b\"\n  )  # trailing\n", []string{"a", "b"}, []string{"ab"}},
		{"root ::=\n  \"a\" |\n  \"b\"", []string{"a", "b"}, nil},
		{"root ::= \"a\"\n  | \"b\" # a leading bar continues the rule\n", []string{"a", "b"}, nil},
		{"root ::= x{ 2 , 3 }\nx ::= \"ab\"", []string{"abab", "ababab"}, []string{"ab", "abababab"}},
		{"root ::= \"\"", []string{""}, []string{"a"}},
		{"root ::= list\nlist ::= \"[\" (\"1\" (\",\" \"1\")*)? \"]\"", []string{"[]", "[1,1,1]"}, []string{"[,]", "[1,]"}},
		{"root ::= r-1\nr-1 ::= [0-9A-F]+", []string{"0A9F"}, []string{"0a"}},
	} {
		g := mustGBNF(t, tc.src)
		if g.String() != tc.src {
			t.Errorf("String() = %q, want the source", g.String())
		}
		for _, s := range tc.yes {
			if !accepts(g, v, s) {
				t.Errorf("%q: rejects %q", tc.src, s)
			}
		}
		for _, s := range tc.no {
			if accepts(g, v, s) {
				t.Errorf("%q: accepts %q", tc.src, s)
			}
		}
	}
}

// TestUTF8Sequences checks class compilation against the standard library
// on every code point of random classes.
func TestUTF8Sequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	edges := []rune{0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x10FFFF}
	pick := func() rune {
		if rng.IntN(2) == 0 {
			return edges[rng.IntN(len(edges))] + rune(rng.IntN(3)) - 1
		}
		return rune(rng.IntN(utf8.MaxRune + 1))
	}
	for range 200 {
		var rs []runeRange
		for range 1 + rng.IntN(3) {
			a, b := max(pick(), 0), max(pick(), 0)
			a, b = min(a, utf8.MaxRune), min(b, utf8.MaxRune)
			rs = append(rs, runeRange{min(a, b), max(a, b)})
		}
		rs = normalizeRanges(rs)
		if rng.IntN(2) == 0 {
			rs = complementRanges(rs)
		}
		seqs := utf8Sequences(rs)
		matches := func(b []byte) int {
			n := 0
			for _, s := range seqs {
				if len(s) != len(b) {
					continue
				}
				ok := true
				for i, r := range s {
					ok = ok && r.lo <= b[i] && b[i] <= r.hi
				}
				if ok {
					n++
				}
			}
			return n
		}
		// Every scalar: matched by exactly one sequence iff it is in the class.
		for r := rune(0); r <= utf8.MaxRune; r += 1 + rune(rng.IntN(97)) {
			if r >= surrogateLo && r <= surrogateHi {
				continue
			}
			want := 0
			if rangesContain(rs, r) {
				want = 1
			}
			if got := matches(utf8.AppendRune(nil, r)); got != want {
				t.Fatalf("class %v: U+%04X matched by %d sequences, want %d", rs, r, got, want)
			}
		}
		// Nothing that is not valid UTF-8 matches.
		for range 2000 {
			b := make([]byte, 1+rng.IntN(4))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			if matches(b) > 0 && !utf8.Valid(b) {
				t.Fatalf("class %v: matches invalid % x", rs, b)
			}
		}
	}
}

func rangesContain(rs []runeRange, r rune) bool {
	_, found := slices.BinarySearchFunc(rs, r, func(x runeRange, r rune) int {
		switch {
		case x.hi < r:
			return -1
		case x.lo > r:
			return 1
		}
		return 0
	})
	return found
}

func FuzzParseGBNF(f *testing.F) {
	for _, s := range handGrammars {
		f.Add(s)
	}
	f.Add("root ::= [^\"\\\\] | \"\\u00e9\"{1,3} # c\n")
	v, _ := synthVocab()
	f.Fuzz(func(t *testing.T, src string) {
		g, err := ParseGBNF(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 || se.Col < 1 {
				t.Fatalf("%q: %v", src, err)
			}
			return
		}
		// A grammar that compiles can be walked: something is always allowed.
		// (Only small ones: nested repetitions of nullable things, such as
		// (.*){100}, compile to wide states that take seconds to walk.)
		edges := 0
		for _, n := range g.nodes {
			edges += len(n.next)
		}
		if edges > 1<<13 {
			return
		}
		m := g.NewMatcher(v)
		rng := rand.New(rand.NewPCG(1, 1))
		walk(t, m, v, rng, 8, nil)
	})
}
