package grammar

import (
	"slices"
	"unicode/utf8"
)

// A character class is a set of Unicode scalar values (code points other
// than the surrogates). The matcher works on bytes, so a class becomes a few
// sequences of byte ranges that together match exactly the UTF-8 encodings of
// its members, as regex engines compile classes.

type runeRange struct{ lo, hi rune }

type byteRange struct{ lo, hi byte }

const (
	surrogateLo = 0xD800
	surrogateHi = 0xDFFF
)

func allScalars() []runeRange {
	return []runeRange{{0, surrogateLo - 1}, {surrogateHi + 1, utf8.MaxRune}}
}

// normalizeRanges sorts and merges ranges and removes the surrogates.
func normalizeRanges(rs []runeRange) []runeRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var merged []runeRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	var out []runeRange
	for _, r := range merged {
		// Cut out the surrogates; what is left of r is at most two pieces.
		if r.lo < surrogateLo {
			out = append(out, runeRange{r.lo, min(r.hi, surrogateLo-1)})
		}
		if r.hi > surrogateHi {
			out = append(out, runeRange{max(r.lo, surrogateHi+1), r.hi})
		}
	}
	// Pieces either side of the surrogates stay separate ranges: they are not
	// adjacent code points.
	return out
}

// complementRanges returns the scalars not in rs (normalized).
func complementRanges(rs []runeRange) []runeRange {
	var out []runeRange
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, runeRange{next, utf8.MaxRune})
	}
	return normalizeRanges(out)
}

// utf8Sequences returns byte-range sequences that match exactly the UTF-8
// encodings of the scalars in rs (normalized).
func utf8Sequences(rs []runeRange) [][]byteRange {
	var out [][]byteRange
	for _, r := range rs {
		out = appendUTF8Sequences(out, r.lo, r.hi)
	}
	return out
}

// appendUTF8Sequences splits lo..hi (no surrogates inside) until each piece
// has encodings of one length whose bytes vary independently: then the piece
// is the product of one byte range per position.
func appendUTF8Sequences(out [][]byteRange, lo, hi rune) [][]byteRange {
	for _, b := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= b && hi > b {
			out = appendUTF8Sequences(out, lo, b)
			return appendUTF8Sequences(out, b+1, hi)
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1 // the low i continuation bytes
		if lo&^m == hi&^m {
			continue
		}
		if lo&m != 0 {
			out = appendUTF8Sequences(out, lo, lo|m)
			return appendUTF8Sequences(out, (lo|m)+1, hi)
		}
		if hi&m != m {
			out = appendUTF8Sequences(out, lo, (hi&^m)-1)
			return appendUTF8Sequences(out, hi&^m, hi)
		}
	}
	a := utf8.AppendRune(nil, lo)
	b := utf8.AppendRune(nil, hi)
	seq := make([]byteRange, n)
	for i := range seq {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(out, seq)
}
