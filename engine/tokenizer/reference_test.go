package tokenizer

import "strings"

// The merge loops as they were before the mergeQueue: a binary heap of
// candidates, stale ones skipped when popped (llama.cpp's and Hugging Face's
// way). They are the reference the property tests hold encodeLong and
// encodeSPM to, on any input; they cost O(n log n) too, but up to three
// 24-byte entries a symbol and a cache miss on every pop.

// mergeHeap is the priority queue both BPE variants merged from before the
// mergeQueue: candidates ordered by their own before method (best first).
type mergeHeap[T interface{ before(T) bool }] []T

func (h *mergeHeap[T]) push(c T) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap[T]) pop() T {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && s[l].before(s[m]) {
			m = l
		}
		if r < last && s[r].before(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
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

type bpeCand struct {
	rank        int32
	left, right int32 // symbol indices
	lid, rid    int32 // their tokens when the candidate was made
	id          int32 // merged token
}

func (a bpeCand) before(b bpeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

func (m *bpeModel) encodeHeapReference(out []int32, word string) []int32 {
	n := len(word)
	syms := make([]bpeSym, n) // bpeSym as encodeLong has it
	for i := range syms {
		syms[i] = bpeSym{id: m.byteTok[word[i]], prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[n-1].next = -1
	var h mergeHeap[bpeCand]
	push := func(l, r int32) {
		if l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0 {
			return
		}
		mg, ok := m.merges[pairKey(syms[l].id, syms[r].id)]
		if !ok {
			return
		}
		h.push(bpeCand{rank: mg.rank, left: l, right: r, lid: syms[l].id, rid: syms[r].id, id: mg.id})
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i), int32(i+1))
	}
	const dead = -2
	for len(h) > 0 {
		c := h.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.id == dead || r.id == dead || l.next != c.right || l.id != c.lid || r.id != c.rid {
			continue // stale
		}
		l.id = c.id
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.id = dead
		push(l.prev, c.left)
		push(c.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		if id := syms[i].id; id >= 0 {
			out = append(out, id)
		}
	}
	return out
}

func (t *Tokenizer) encodeSPMHeapReference(out []int32, frag string, prefixSpace bool) []int32 {
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
