package chat

// jsonScanner validates one JSON value a byte at a time, so that a tool
// call's arguments can be passed on while they are generated and a bad byte
// is seen the moment it arrives. It is strict RFC 8259 (no raw control
// characters in strings, no leading zeros, no trailing commas).
type jsonScanner struct {
	stack   []byte // open containers: '{' or '['
	state   scanState
	key     bool   // the string being scanned is an object key
	literal string // the literal being matched ("true", "false", "null")
	pos     int    // bytes of literal matched, or hex digits of \u read
}

type scanState uint8

const (
	sValue         scanState = iota // a value may start (whitespace allowed)
	sString                         // inside a string
	sStringEsc                      // after a backslash
	sStringHex                      // inside \uXXXX
	sNumMinus                       // after '-'
	sNumZero                        // after a leading '0'
	sNumInt                         // in the integer digits
	sNumDot                         // after '.', a digit must follow
	sNumFrac                        // in the fraction digits
	sNumE                           // after 'e' or 'E'
	sNumESign                       // after the exponent's sign
	sNumExp                         // in the exponent digits
	sLiteral                        // matching true/false/null
	sObjKeyOrEnd                    // after '{': a key or '}'
	sObjKey                         // after ',' in an object: a key
	sObjColon                       // after a key: ':'
	sArrValueOrEnd                  // after '[': a value or ']'
	sAfterValue                     // after a value inside a container: ',' or the closer
	sDone                           // the value is complete
)

type scanResult uint8

const (
	scanContinue  scanResult = iota // c belongs to the value, more to come
	scanEnd                         // c completed the value
	scanEndBefore                   // the value ended just before c (a number); c is not part of it
	scanError                       // c cannot continue a JSON value
)

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// valueDone is called when a value (scalar or container) has just completed.
func (s *jsonScanner) valueDone() scanResult {
	if len(s.stack) == 0 {
		s.state = sDone
		return scanEnd
	}
	s.state = sAfterValue
	return scanContinue
}

// step feeds one byte.
func (s *jsonScanner) step(c byte) scanResult {
	switch s.state {
	case sValue, sArrValueOrEnd:
		if isJSONSpace(c) {
			return scanContinue
		}
		if c == ']' && s.state == sArrValueOrEnd {
			s.stack = s.stack[:len(s.stack)-1]
			return s.valueDone()
		}
		return s.startValue(c)
	case sString:
		switch {
		case c == '"':
			if s.key {
				s.key = false
				s.state = sObjColon
				return scanContinue
			}
			return s.valueDone()
		case c == '\\':
			s.state = sStringEsc
		case c < 0x20:
			return scanError
		}
		return scanContinue
	case sStringEsc:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.state = sString
		case 'u':
			s.state, s.pos = sStringHex, 0
		default:
			return scanError
		}
		return scanContinue
	case sStringHex:
		if !isHex(c) {
			return scanError
		}
		if s.pos++; s.pos == 4 {
			s.state = sString
		}
		return scanContinue
	case sNumMinus:
		switch {
		case c == '0':
			s.state = sNumZero
		case c >= '1' && c <= '9':
			s.state = sNumInt
		default:
			return scanError
		}
		return scanContinue
	case sNumZero, sNumInt, sNumFrac, sNumExp:
		switch {
		case c >= '0' && c <= '9' && s.state != sNumZero:
			return scanContinue
		case c == '.' && (s.state == sNumZero || s.state == sNumInt):
			s.state = sNumDot
			return scanContinue
		case (c == 'e' || c == 'E') && s.state != sNumExp:
			s.state = sNumE
			return scanContinue
		}
		// The number ended before c.
		if r := s.valueDone(); r == scanEnd {
			return scanEndBefore
		}
		return s.step(c)
	case sNumDot:
		if c >= '0' && c <= '9' {
			s.state = sNumFrac
			return scanContinue
		}
		return scanError
	case sNumE:
		switch {
		case c == '+' || c == '-':
			s.state = sNumESign
		case c >= '0' && c <= '9':
			s.state = sNumExp
		default:
			return scanError
		}
		return scanContinue
	case sNumESign:
		if c >= '0' && c <= '9' {
			s.state = sNumExp
			return scanContinue
		}
		return scanError
	case sLiteral:
		if c != s.literal[s.pos] {
			return scanError
		}
		if s.pos++; s.pos == len(s.literal) {
			return s.valueDone()
		}
		return scanContinue
	case sObjKeyOrEnd, sObjKey:
		switch {
		case isJSONSpace(c):
		case c == '"':
			s.state, s.key = sString, true
		case c == '}' && s.state == sObjKeyOrEnd:
			s.stack = s.stack[:len(s.stack)-1]
			return s.valueDone()
		default:
			return scanError
		}
		return scanContinue
	case sObjColon:
		switch {
		case isJSONSpace(c):
		case c == ':':
			s.state = sValue
		default:
			return scanError
		}
		return scanContinue
	case sAfterValue:
		top := s.stack[len(s.stack)-1]
		switch {
		case isJSONSpace(c):
		case c == ',':
			if top == '{' {
				s.state = sObjKey
			} else {
				s.state = sValue
			}
		case (c == '}' && top == '{') || (c == ']' && top == '['):
			s.stack = s.stack[:len(s.stack)-1]
			return s.valueDone()
		default:
			return scanError
		}
		return scanContinue
	}
	return scanError // sDone: nothing may follow
}

const maxJSONDepth = 512

func (s *jsonScanner) startValue(c byte) scanResult {
	switch {
	case c == '{' || c == '[':
		if len(s.stack) >= maxJSONDepth {
			return scanError
		}
		s.stack = append(s.stack, c)
		if c == '{' {
			s.state = sObjKeyOrEnd
		} else {
			s.state = sArrValueOrEnd
		}
	case c == '"':
		s.state, s.key = sString, false
	case c == '-':
		s.state = sNumMinus
	case c == '0':
		s.state = sNumZero
	case c >= '1' && c <= '9':
		s.state = sNumInt
	case c == 't':
		s.state, s.literal, s.pos = sLiteral, "true", 1
	case c == 'f':
		s.state, s.literal, s.pos = sLiteral, "false", 1
	case c == 'n':
		s.state, s.literal, s.pos = sLiteral, "null", 1
	default:
		return scanError
	}
	return scanContinue
}

// endable reports whether the scanner is inside a top-level number that
// the next byte could still extend or end.
func (s *jsonScanner) endable() bool {
	switch s.state {
	case sNumZero, sNumInt, sNumFrac, sNumExp:
		return len(s.stack) == 0
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
