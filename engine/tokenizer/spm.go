package tokenizer

import (
	"math"
	"strings"
)

// SentencePiece-style BPE with scores, as llama.cpp's llm_tokenizer_spm:
// the fragment's UTF-8 characters are the first symbols; the adjacent pair
// whose concatenation is a token with the highest score is merged first (ties
// to the leftmost, picked by a mergeQueue), until no adjacent pair forms a
// token. A final symbol that is not a token (a character outside the
// vocabulary) becomes byte tokens. There is no pre-tokenizer, so a whole
// fragment (the text between special tokens) is one word here.

type spmSym struct {
	off, n     int32 // bytes of the escaped text
	prev, next int32
}

// spmKey is the mergeQueue key of a token score: lower for a higher score.
// -0 keys as +0, so that scores equal as floats tie (and go to the leftmost
// pair) as in llama.cpp's comparison; NaN, which no real vocab has and
// which llama.cpp's queue orders arbitrarily, keys as -Inf.
func spmKey(score float32) uint32 {
	switch {
	case score == 0:
		score = 0
	case score != score:
		score = float32(math.Inf(-1))
	}
	u := math.Float32bits(score)
	if u&(1<<31) != 0 {
		u = ^u // negative: a larger magnitude is a lower score
	} else {
		u |= 1 << 31
	}
	return ^u // u grows with the score; never noMerge, as u is never 0
}

// utf8Len is llama.cpp's unicode_len_utf8: the length a lead byte announces.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

func (t *Tokenizer) encodeSPM(out []int32, frag string, prefixSpace bool) []int32 {
	if prefixSpace {
		frag = " " + frag
	}
	text := strings.ReplaceAll(frag, " ", "\u2581")
	if text == "" {
		return out
	}
	chars := 0
	for off := 0; off < len(text); off += utf8Len(text[off]) {
		chars++
	}
	syms := make([]spmSym, 0, chars)
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		syms = append(syms, spmSym{off: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1

	// The key of merging symbol l with the next: the score of their
	// concatenation, when that is a token.
	keyAt := func(l int32) uint32 {
		a := syms[l]
		if a.next < 0 {
			return noMerge
		}
		id, ok := t.toID[text[a.off:a.off+a.n+syms[a.next].n]]
		if !ok {
			return noMerge
		}
		return spmKey(t.vocab.Scores[id])
	}
	keys := make([]uint32, len(syms))
	for i := range syms {
		keys[i] = keyAt(int32(i))
	}
	q := newMergeQueue(keys)
	for {
		l := q.best()
		if l < 0 {
			break
		}
		s := &syms[l]
		r := s.next
		s.n += syms[r].n
		s.next = syms[r].next
		if s.next >= 0 {
			syms[s.next].prev = int32(l)
		}
		q.set(int(r), noMerge)
		q.set(l, keyAt(int32(l)))
		if s.prev >= 0 {
			q.set(int(s.prev), keyAt(s.prev))
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.off : s.off+s.n]
		if id, ok := t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteTok[piece[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}
