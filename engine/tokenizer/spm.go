package tokenizer

import "strings"

// SentencePiece-style BPE with scores, as llama.cpp's llm_tokenizer_spm:
// the fragment's UTF-8 characters are the first symbols; the adjacent pair
// whose concatenation is a token with the highest score is merged first (ties
// to the leftmost), until no adjacent pair forms a token. A final symbol that
// is not a token (a character outside the vocabulary) becomes byte tokens.

type spmSym struct {
	off, n     int32 // bytes of the escaped text
	prev, next int32
}

type spmCand struct {
	score       float32
	left, right int32
	size        int32
}

// before orders the queue: highest score first, then leftmost.
func (a spmCand) before(b spmCand) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
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
	var syms []spmSym
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		syms = append(syms, spmSym{off: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1

	var h mergeHeap[spmCand]
	push := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l], syms[r]
		id, ok := t.toID[text[a.off:a.off+a.n+b.n]]
		if !ok {
			return
		}
		h.push(spmCand{score: t.vocab.Scores[id], left: l, right: r, size: a.n + b.n})
	}
	for i := 1; i < len(syms); i++ {
		push(int32(i-1), int32(i))
	}
	for len(h) > 0 {
		c := h.pop()
		l, r := &syms[c.left], &syms[c.right]
		// Skip a pair one of whose symbols has since been merged.
		if l.n == 0 || r.n == 0 || l.n+r.n != c.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		push(l.prev, c.left)
		push(c.left, l.next)
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
