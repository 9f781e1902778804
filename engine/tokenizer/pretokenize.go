package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The Qwen pre-tokenizer, hand-written. Hugging Face's tokenizer.json for
// Qwen2/Qwen3 splits text with
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// ("Isolated": every match is a word, and the alternatives cover every
// character, so nothing falls between matches). Qwen3.5 ("qwen35") reads
// \p{L} as [\p{L}\p{M}] in the letter run and excludes \p{M} from the
// punctuation run, which is the same as classing marks as letters.
// Go's regexp has no lookahead, so nextWord walks the alternatives in order
// with rune classes instead; llama.cpp does the same in
// unicode_regex_split_custom_qwen2. \s is Unicode White_Space (as in
// Oniguruma, which Hugging Face tokenizers uses, and llama.cpp); the case
// folding of the contractions is ASCII-only, as in llama.cpp and
// transformers.js.

type runeClass uint8

const (
	classOther runeClass = iota // anything else: punctuation, symbols, controls, invalid UTF-8
	classLetter
	classNumber
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]runeClass) {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = classLetter
		case c >= '0' && c <= '9':
			t[c] = classNumber
		case c == ' ', c >= '\t' && c <= '\r':
			t[c] = classSpace
		}
	}
	return t
}()

type preTokenizer struct {
	marksAreLetters bool // qwen35
}

// classAt returns the class and the byte width of the rune at s[i] (i < len(s)).
// An invalid UTF-8 byte is one classOther rune of width 1.
func (p preTokenizer) classAt(s string, i int) (runeClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && w <= 1:
		return classOther, 1
	case unicode.IsLetter(r):
		return classLetter, w
	case p.marksAreLetters && unicode.IsMark(r):
		return classLetter, w
	case unicode.IsNumber(r):
		return classNumber, w
	case unicode.IsSpace(r):
		return classSpace, w
	}
	return classOther, w
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// nextWord returns the end of the pre-token that starts at s[pos] (pos < len(s)).
func (p preTokenizer) nextWord(s string, pos int) int {
	n := len(s)
	c0, w0 := p.classAt(s, pos)
	b0 := s[pos]

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if b0 == '\'' && pos+1 < n {
		switch lowerASCII(s[pos+1]) {
		case 's', 't', 'm', 'd':
			return pos + 2
		}
		if pos+2 < n {
			a, b := lowerASCII(s[pos+1]), lowerASCII(s[pos+2])
			if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
				return pos + 3
			}
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	if b0 != '\r' && b0 != '\n' && c0 != classNumber {
		end := -1
		if c0 == classLetter {
			end = pos + w0
		} else if pos+w0 < n {
			if c1, w1 := p.classAt(s, pos+w0); c1 == classLetter {
				end = pos + w0 + w1
			}
		}
		if end >= 0 {
			for end < n {
				c, w := p.classAt(s, end)
				if c != classLetter {
					break
				}
				end += w
			}
			return end
		}
	}

	// \p{N}
	if c0 == classNumber {
		return pos + w0
	}

	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	start := -1
	if c0 == classOther {
		start = pos
	} else if b0 == ' ' && pos+1 < n {
		if c1, _ := p.classAt(s, pos+1); c1 == classOther {
			start = pos + 1
		}
	}
	if start >= 0 {
		end := start
		for end < n {
			c, w := p.classAt(s, end)
			if c != classOther {
				break
			}
			end += w
		}
		for end < n && (s[end] == '\r' || s[end] == '\n') {
			end++
		}
		return end
	}

	// Here s[pos] is whitespace. Measure the run.
	end, lastStart, afterNewline, runes := pos, pos, -1, 0
	for end < n {
		c, w := p.classAt(s, end)
		if c != classSpace {
			break
		}
		if s[end] == '\r' || s[end] == '\n' {
			afterNewline = end + 1
		}
		lastStart = end
		end += w
		runes++
	}
	// \s*[\r\n]+: up to the last newline of the run.
	if afterNewline >= 0 {
		return afterNewline
	}
	// \s+(?!\S): the run less its last character when a non-space follows.
	if end < n && runes > 1 {
		return lastStart
	}
	// \s+
	return end
}
