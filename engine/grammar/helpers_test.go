package grammar

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"

	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// The Qwen3 tokenizer is the one engine/tokenizer's tests keep (see
// ../tokenizer/testdata/qwen3/README.md for where it comes from).
const qwenTokenizerPath = "../tokenizer/testdata/qwen3/tokenizer.json.gz"

// tb is what helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type qwenFixture struct {
	tok   *tokenizer.Tokenizer
	vocab *Vocab
}

var loadQwen = sync.OnceValues(func() (*qwenFixture, error) {
	tv, err := tokenizer.LoadTokenizerJSON(qwenTokenizerPath)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(tv)
	if err != nil {
		return nil, err
	}
	pieces := make([][]byte, len(tv.Tokens))
	var eog []int32
	for i := range pieces {
		pieces[i] = tok.Piece(int32(i))
		if tok.IsEOG(int32(i)) {
			eog = append(eog, int32(i))
		}
		if tv.Types != nil && tv.Types[i] == tokenizer.TypeControl {
			pieces[i] = nil // control tokens write no text under a grammar
		}
	}
	return &qwenFixture{tok: tok, vocab: NewVocab(pieces, eog)}, nil
})

func qwen(t tb) *qwenFixture {
	t.Helper()
	q, err := loadQwen()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// synthPieces is a small vocabulary: every single byte (so any text can be
// written, valid UTF-8 or not), pieces that cross JSON and GBNF symbol
// boundaries, partial UTF-8, a piece that duplicates a single byte, an
// empty (control) token and an end-of-generation token.
var synthStrings = []string{
	`{"`, `"}`, `":`, `",`, `", "`, `"]`, `[{`, `}]`, `},`, `{}`, `[]`, `{"a":`, `": "`, `":"`, ` "`, `":1`, `"},{"`,
	`true`, `false`, `null`, `nu`, `ll`, `tr`, `ue`, `fa`, `lse`, `12`, `0.`, `.5`, `e+`, `E-`, `-1`, `10`, `99`, `007`,
	"\n", "\n  ", "  ", "   ", "\t", `\\`, `\u`, `\n`, `\"`, `\u00`, `e9`, `d83d`, `\ud83d`, `\ude00`, `\uDE00`, `D8`,
	"ab", "abc", "ba", "bc", "cab", `a"`, `"a`, "aa", "a", "é", "€", "😀", "中文", "\xe2\x82", "\x82\xac", "\xf0\x9f", "\x98\x80", "a😀", "é\"",
	"name", `"name"`, "id", "2024-", "01-", "-02", "T12:", ":00", ":00Z", "Z\"", "+01:00", ".123", "-4", "-1a", "fff", "8-",
	"x", "xy", "xyz", "0", "1", "<", ">", "::", "=",
}

const synthEOG = "</s>"

func synthVocab() (*Vocab, [][]byte) {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range synthStrings {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil, []byte(synthEOG))
	return NewVocab(pieces, []int32{int32(len(pieces) - 1)}), pieces
}

func maskWords(v *Vocab) []uint64 { return make([]uint64, (v.Size()+63)/64) }

func bit(mask []uint64, t int32) bool { return mask[t>>6]&(1<<(t&63)) != 0 }

func allowedList(mask []uint64) []int32 {
	var out []int32
	for i, w := range mask {
		for ; w != 0; w &= w - 1 {
			out = append(out, int32(i*64+bits.TrailingZeros64(w)))
		}
	}
	return out
}

// bruteMask decides every token by cloning the matcher and feeding it the
// token's bytes, the definition the mask must equal.
func bruteMask(m *Matcher, v *Vocab) []uint64 {
	out := maskWords(v)
	for t := int32(0); int(t) < v.Size(); t++ {
		ok := false
		switch {
		case v.isEOG(t):
			ok = m.CanEnd()
		case len(v.pieces[t]) == 0:
		default:
			c := *m // a clone that stays on the stack
			ok = c.AcceptBytes(v.pieces[t]) == nil
		}
		if ok {
			out[t>>6] |= 1 << (t & 63)
		}
	}
	return out
}

// checkMask compares Mask and Allows with the brute-force mask.
func checkMask(t tb, m *Matcher, v *Vocab, out []byte) {
	t.Helper()
	got := maskWords(v)
	m.Mask(got)
	want := bruteMask(m, v)
	for i := range got {
		if got[i] == want[i] {
			continue
		}
		for b := range 64 {
			tok := int32(i*64 + b)
			if g, w := bit(got, tok), bit(want, tok); g != w {
				t.Fatalf("after %q: token %d (%q): mask says %v, feeding its bytes says %v", out, tok, v.pieces[tok], g, w)
			}
		}
	}
	if m.Finished() {
		for _, tok := range allowedList(got) {
			if !v.isEOG(tok) {
				t.Fatalf("after %q: finished, yet token %d (%q) is allowed", out, tok, v.pieces[tok])
			}
		}
	}
}

// walk drives m through tokens drawn uniformly from its mask until it
// finishes or takes maxSteps tokens, calling step before each token. It
// returns the bytes written and whether the output finished.
func walk(t tb, m *Matcher, v *Vocab, rng *rand.Rand, maxSteps int, step func(out []byte)) ([]byte, bool) {
	t.Helper()
	var out []byte
	mask := maskWords(v)
	for range maxSteps {
		if step != nil {
			step(out)
		}
		m.Mask(mask)
		allowed := allowedList(mask)
		if len(allowed) == 0 {
			t.Fatalf("after %q: no token allowed and not finished", out)
		}
		tok := allowed[rng.IntN(len(allowed))]
		if err := m.Accept(tok); err != nil {
			t.Fatalf("after %q: accepting allowed token %d (%q): %v", out, tok, v.pieces[tok], err)
		}
		if v.isEOG(tok) {
			return out, true
		}
		out = append(out, v.pieces[tok]...)
		if m.Finished() {
			return out, true
		}
	}
	return out, false
}

func mustGBNF(t tb, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src)
	if err != nil {
		t.Fatalf("ParseGBNF(%q): %v", src, err)
	}
	return g
}

func mustSchema(t tb, schema string) *Grammar {
	t.Helper()
	g, err := FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatalf("FromJSONSchema(%s): %v", schema, err)
	}
	return g
}

func describeTokens(v *Vocab, toks []int32) string {
	s := ""
	for i, tok := range toks {
		if i == 20 {
			return s + " ..."
		}
		s += fmt.Sprintf(" %d:%q", tok, v.pieces[tok])
	}
	return s
}
