package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// SyntaxError is a GBNF grammar that cannot be used: a syntax error, or a
// rule that is undefined, defined twice, left-recursive or never ends. Line
// and Col are 1-based; Col counts bytes.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// maxRepeat bounds the counts of {m,n} so a grammar cannot ask for millions
// of copies of its parts.
const maxRepeat = 10000

type exprKind uint8

const (
	exprSeq   exprKind = iota // subs in order; empty = the empty string
	exprAlt                   // one of subs
	exprBytes                 // the bytes lit
	exprClass                 // one code point in ranges
	exprRef                   // rule name
	exprRep                   // subs[0] repeated min..max times (max < 0: unbounded)
)

// expr is the rule tree ParseGBNF builds before compiling it.
type expr struct {
	kind     exprKind
	subs     []*expr
	lit      []byte
	ranges   []runeRange // sorted, disjoint, non-adjacent
	name     string
	min, max int
	line     int
	col      int
	dfa      *classDFA // exprClass, once compiled
}

type ruleDef struct {
	name      string
	body      *expr
	line, col int
}

type parser struct {
	src       string
	pos       int
	line, col int // of pos
}

func (p *parser) errAt(line, col int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) errf(format string, args ...any) *SyntaxError {
	return p.errAt(p.line, p.col, format, args...)
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.src[p.pos]
}

func (p *parser) advance(n int) {
	for i := 0; i < n && p.pos < len(p.src); i++ {
		if p.src[p.pos] == '\n' {
			p.line++
			p.col = 1
		} else {
			p.col++
		}
		p.pos++
	}
}

// space skips blanks and comments; newlines too when newlineOK. It also
// skips a line break followed by a line whose first non-blank is '|', so an
// alternative may start a line (a lenient extension of llama.cpp's dialect).
func (p *parser) space(newlineOK bool) {
	for !p.eof() {
		switch c := p.peek(); {
		case c == ' ' || c == '\t':
			p.advance(1)
		case c == '#':
			for !p.eof() && p.peek() != '\n' {
				p.advance(1)
			}
		case c == '\r' || c == '\n':
			if !newlineOK && !p.continuesWithBar() {
				return
			}
			p.advance(1)
		default:
			return
		}
	}
}

// continuesWithBar reports whether the text from pos is line breaks, blanks
// and comments up to a '|'.
func (p *parser) continuesWithBar() bool {
	for i := p.pos; i < len(p.src); i++ {
		switch p.src[i] {
		case ' ', '\t', '\r', '\n':
		case '#':
			for i < len(p.src) && p.src[i] != '\n' {
				i++
			}
		case '|':
			return true
		default:
			return false
		}
	}
	return false
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func (p *parser) name() string {
	start := p.pos
	for !p.eof() && isNameByte(p.peek()) {
		p.advance(1)
	}
	return p.src[start:p.pos]
}

// parseGBNF parses GBNF text into its rules, in order of definition.
func parseGBNF(src string) ([]ruleDef, error) {
	p := &parser{src: src, line: 1, col: 1}
	var rules []ruleDef
	seen := map[string]ruleDef{}
	p.space(true)
	for !p.eof() {
		line, col := p.line, p.col
		name := p.name()
		if name == "" {
			return nil, p.errf("expected a rule name, found %s", p.describe())
		}
		if prev, dup := seen[name]; dup {
			return nil, p.errAt(line, col, "rule %q is defined twice (first at line %d)", name, prev.line)
		}
		p.space(false)
		if !hasPrefixAt(src, p.pos, "::=") {
			return nil, p.errf("expected ::= after rule name %q, found %s", name, p.describe())
		}
		p.advance(3)
		p.space(true)
		body, err := p.alternatives(false)
		if err != nil {
			return nil, err
		}
		switch {
		case p.eof():
		case p.peek() == '\n' || p.peek() == '\r':
		default:
			return nil, p.errf("expected end of line after rule %q, found %s", name, p.describe())
		}
		r := ruleDef{name: name, body: body, line: line, col: col}
		seen[name] = r
		rules = append(rules, r)
		p.space(true)
	}
	if len(rules) == 0 {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: "empty grammar: no rules"}
	}
	return rules, nil
}

func hasPrefixAt(s string, i int, prefix string) bool {
	return len(s)-i >= len(prefix) && s[i:i+len(prefix)] == prefix
}

// describe names what is at pos, for error messages.
func (p *parser) describe() string {
	if p.eof() {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	switch r {
	case '\n', '\r':
		return "end of line"
	}
	return strconv.QuoteRune(r)
}

func (p *parser) alternatives(nested bool) (*expr, error) {
	first, err := p.sequence(nested)
	if err != nil {
		return nil, err
	}
	alts := []*expr{first}
	for p.peek() == '|' {
		p.advance(1)
		p.space(true)
		s, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
	}
	if len(alts) == 1 {
		return first, nil
	}
	return &expr{kind: exprAlt, subs: alts}, nil
}

func (p *parser) sequence(nested bool) (*expr, error) {
	seq := &expr{kind: exprSeq}
	for !p.eof() {
		line, col := p.line, p.col
		var item *expr
		switch c := p.peek(); {
		case c == '"':
			p.advance(1)
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			item = &expr{kind: exprBytes, lit: lit}
		case c == '[':
			p.advance(1)
			ranges, err := p.class(line, col)
			if err != nil {
				return nil, err
			}
			item = &expr{kind: exprClass, ranges: ranges}
		case c == '.':
			p.advance(1)
			item = &expr{kind: exprClass, ranges: allScalars()}
		case c == '(':
			p.advance(1)
			p.space(true)
			inner, err := p.alternatives(true)
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errf("expected ) to close the ( at line %d, column %d, found %s", line, col, p.describe())
			}
			p.advance(1)
			item = inner
		case isNameByte(c):
			name := p.name()
			item = &expr{kind: exprRef, name: name, line: line, col: col}
		default:
			return seq, nil
		}
		p.space(nested)
		for {
			rep, ok, err := p.repetition(nested)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			rep.subs = []*expr{item}
			rep.line, rep.col = line, col
			item = rep
			p.space(nested)
		}
		seq.subs = append(seq.subs, item)
	}
	return seq, nil
}

// repetition parses *, +, ?, {m}, {m,} or {m,n} if one is next.
func (p *parser) repetition(nested bool) (*expr, bool, error) {
	switch p.peek() {
	case '*':
		p.advance(1)
		return &expr{kind: exprRep, min: 0, max: -1}, true, nil
	case '+':
		p.advance(1)
		return &expr{kind: exprRep, min: 1, max: -1}, true, nil
	case '?':
		p.advance(1)
		return &expr{kind: exprRep, min: 0, max: 1}, true, nil
	case '{':
	default:
		return nil, false, nil
	}
	line, col := p.line, p.col
	p.advance(1)
	p.space(nested)
	lo, err := p.count()
	if err != nil {
		return nil, false, err
	}
	hi := lo
	p.space(nested)
	if p.peek() == ',' {
		p.advance(1)
		p.space(nested)
		hi = -1
		if c := p.peek(); c >= '0' && c <= '9' {
			if hi, err = p.count(); err != nil {
				return nil, false, err
			}
			if hi < lo {
				return nil, false, p.errAt(line, col, "repetition {%d,%d} has its maximum below its minimum", lo, hi)
			}
		}
		p.space(nested)
	}
	if p.peek() != '}' {
		return nil, false, p.errf("expected } to close the repetition, found %s", p.describe())
	}
	p.advance(1)
	return &expr{kind: exprRep, min: lo, max: hi}, true, nil
}

func (p *parser) count() (int, error) {
	line, col := p.line, p.col
	start := p.pos
	for c := p.peek(); c >= '0' && c <= '9'; c = p.peek() {
		p.advance(1)
	}
	if start == p.pos {
		return 0, p.errf("expected a number in the repetition, found %s", p.describe())
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil || n > maxRepeat {
		return 0, p.errAt(line, col, "repetition count %s is above the limit of %d", p.src[start:p.pos], maxRepeat)
	}
	return n, nil
}

// literal parses the rest of a "..." string (the opening quote is read) into
// UTF-8 bytes.
func (p *parser) literal() ([]byte, error) {
	var out []byte
	for {
		if p.eof() || p.peek() == '\n' || p.peek() == '\r' {
			return nil, p.errf("unterminated string literal")
		}
		if p.peek() == '"' {
			p.advance(1)
			return out, nil
		}
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		out = utf8.AppendRune(out, r)
	}
}

// class parses the rest of a [...] character class (the [ at line, col is
// read).
func (p *parser) class(line, col int) ([]runeRange, error) {
	negate := false
	if p.peek() == '^' {
		negate = true
		p.advance(1)
	}
	var rs []runeRange
	for {
		if p.eof() || p.peek() == '\n' || p.peek() == '\r' {
			return nil, p.errf("unterminated character class")
		}
		if p.peek() == ']' {
			p.advance(1)
			break
		}
		rline, rcol := p.line, p.col
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.advance(1)
			if p.eof() || p.peek() == '\n' || p.peek() == '\r' {
				return nil, p.errf("unterminated character class")
			}
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(rline, rcol, "character range %s-%s is backwards", strconv.QuoteRune(lo), strconv.QuoteRune(hi))
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	rs = normalizeRanges(rs)
	if negate {
		rs = complementRanges(rs)
	}
	if len(rs) == 0 {
		return nil, p.errAt(line, col, "character class matches no character")
	}
	return rs, nil
}

// char reads one character of a literal or class, decoding escapes. Every
// escape names a code point, as in llama.cpp: \xHH is U+00HH.
func (p *parser) char() (rune, error) {
	line, col := p.line, p.col
	if p.peek() != '\\' {
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && size <= 1 {
			return 0, p.errf("invalid UTF-8 in the grammar text")
		}
		p.advance(size)
		return r, nil
	}
	p.advance(1)
	if p.eof() {
		return 0, p.errf("unterminated escape")
	}
	c := p.peek()
	p.advance(1)
	digits := 0
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '/', '\'':
		return rune(c), nil
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	default:
		return 0, p.errAt(line, col, "unknown escape \\%c", c)
	}
	var v uint32
	for range digits {
		d := p.peek()
		var x byte
		switch {
		case d >= '0' && d <= '9':
			x = d - '0'
		case d >= 'a' && d <= 'f':
			x = d - 'a' + 10
		case d >= 'A' && d <= 'F':
			x = d - 'A' + 10
		default:
			return 0, p.errf("escape \\%c needs %d hex digits, found %s", c, digits, p.describe())
		}
		p.advance(1)
		v = v<<4 | uint32(x)
	}
	if v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
		return 0, p.errAt(line, col, "escape %s is not a Unicode scalar value", p.src[p.pos-2-digits:p.pos])
	}
	return rune(v), nil
}
