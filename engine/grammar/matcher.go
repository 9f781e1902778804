package grammar

import (
	"fmt"
	"sync"
)

// Grammar is a compiled grammar. It is safe for concurrent use by many
// matchers; what it caches per Vocab is synchronized.
type Grammar struct {
	src   string
	nodes []node
	rules []rule
	root  int32

	mu       sync.Mutex
	perVocab map[*Vocab]*tables

	keysOnce sync.Once // computes keys, see share.go
	keys     []posKeyEntry
}

// ParseGBNF compiles a grammar in llama.cpp's GBNF dialect whose start rule
// is "root". Errors are *SyntaxError.
func ParseGBNF(src string) (*Grammar, error) {
	defs, err := parseGBNF(src)
	if err != nil {
		return nil, err
	}
	g, err := compile(defs)
	if err != nil {
		return nil, err
	}
	g.src = src
	return g, nil
}

// String returns the GBNF text the grammar was compiled from.
func (g *Grammar) String() string { return g.src }

func (g *Grammar) tables(v *Vocab) *tables {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.perVocab[v]; ok {
		return t
	}
	if g.perVocab == nil {
		g.perVocab = map[*Vocab]*tables{}
	}
	t := newTables(g, v)
	g.perVocab[v] = t
	return t
}

// Matcher is one output's position in a grammar. It is not safe for
// concurrent use; Clone is O(1), and clones are independent.
type Matcher struct {
	t *tables
	s *state
}

// NewMatcher starts a matcher at the beginning of the grammar's language,
// for tokens of v.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	t := g.tables(v)
	return &Matcher{t: t, s: t.start}
}

// Mask sets bit t of dst (word t/64, bit t%64) iff token t is allowed next
// and clears every other bit of dst. len(dst) must be at least
// (v.Size()+63)/64. End-of-generation tokens are allowed iff CanEnd; once
// Finished, only they are.
func (m *Matcher) Mask(dst []uint64) {
	if len(dst) < m.t.v.maskWords() {
		panic(fmt.Sprintf("grammar: mask of %d words for a vocabulary of %d tokens", len(dst), m.t.v.size))
	}
	m.t.mask(m.s, dst)
}

// Allows reports whether token tok is allowed next: Mask's bit for tok,
// without computing the whole mask.
func (m *Matcher) Allows(tok int32) bool { return m.t.allows(m.s, tok) }

// Accept advances by token tok. If tok is not allowed it returns an error
// and the matcher is unchanged. An end-of-generation token is accepted when
// CanEnd, and the matcher is then Finished.
func (m *Matcher) Accept(tok int32) error {
	v := m.t.v
	if tok < 0 || int(tok) >= v.size {
		return fmt.Errorf("grammar: token %d is outside the vocabulary of %d tokens", tok, v.size)
	}
	if v.isEOG(tok) {
		if !m.s.bottom {
			return fmt.Errorf("grammar: end-of-generation token %d before the output is complete", tok)
		}
		m.s = m.t.done
		return nil
	}
	p := v.pieces[tok]
	if len(p) == 0 {
		return fmt.Errorf("grammar: token %d has no text and is never allowed under a grammar", tok)
	}
	n := m.t.advance(m.s, p)
	if n == nil {
		return newRejectError(p, -1, tok)
	}
	m.s = n
	return nil
}

// rejectError says which token or bytes the grammar did not allow. It is
// formatted only when asked: brute-force callers reject a lot.
type rejectError struct {
	text [48]byte
	n    int // bytes of text kept
	long bool
	at   int   // the byte rejected, -1 for a token
	tok  int32 // -1 for bytes
}

func newRejectError(b []byte, at int, tok int32) *rejectError {
	e := &rejectError{at: at, tok: tok}
	e.n = copy(e.text[:], b)
	e.long = len(b) > e.n
	return e
}

func (e *rejectError) Error() string {
	text := fmt.Sprintf("%q", e.text[:e.n])
	if e.long {
		text += "..."
	}
	if e.tok >= 0 {
		return fmt.Sprintf("grammar: token %d (%s) is not allowed here", e.tok, text)
	}
	return fmt.Sprintf("grammar: byte %d of %s is not allowed here", e.at, text)
}

// AcceptBytes advances by raw bytes, which may end or start inside a UTF-8
// character. If they are not a valid continuation it returns an error and
// the matcher is unchanged.
func (m *Matcher) AcceptBytes(b []byte) error {
	s := m.s
	for i, c := range b {
		if s = m.t.step(s, c); s == nil {
			return newRejectError(b, i, -1)
		}
	}
	m.s = s
	return nil
}

// CanEnd reports whether the bytes so far are a complete sentence.
func (m *Matcher) CanEnd() bool { return m.s.bottom }

// Finished reports whether the output is complete and nothing can follow:
// CanEnd and no byte allowed, or an end-of-generation token was accepted.
func (m *Matcher) Finished() bool { return len(m.s.stacks) == 0 }

// Clone returns an independent copy of the matcher in O(1): matchers share
// their immutable, interned state.
func (m *Matcher) Clone() *Matcher {
	c := *m
	return &c
}
