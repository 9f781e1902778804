package tokenizer

import (
	"fmt"
	"strings"
)

// bpeModel is byte-level BPE: a word's bytes start as one symbol each (the
// token of the byte's GPT-2 character) and the adjacent pair with the lowest
// merge rank is merged until no pair has a merge; ties go to the leftmost
// pair (Hugging Face's BPE and llama.cpp's llm_tokenizer_bpe_session agree).
type bpeModel struct {
	byteTok [256]int32       // token of each byte's character, -1 if the vocab lacks it
	merges  map[uint64]merge // (left id, right id) -> merge
}

type merge struct {
	rank int32
	id   int32 // token of the merged text
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPEModel(v *Vocab, toID map[string]int32) (*bpeModel, error) {
	m := &bpeModel{merges: make(map[uint64]merge, len(v.Merges))}
	for b := 0; b < 256; b++ {
		id, ok := toID[string(byteToRune[b])]
		if !ok {
			id = -1
		}
		m.byteTok[b] = id
	}
	var buf []byte
	for rank, s := range v.Merges {
		// As llama.cpp: split at the first space after the first byte.
		sp := -1
		if len(s) > 1 {
			sp = strings.IndexByte(s[1:], ' ')
		}
		if sp < 0 {
			return nil, fmt.Errorf("tokenizer merges[%d] = %q: want two tokens separated by a space", rank, s)
		}
		left, right := s[:sp+1], s[sp+2:]
		a, okA := toID[left]
		b, okB := toID[right]
		buf = append(append(buf[:0], left...), right...)
		c, okC := toID[string(buf)]
		if !okA || !okB || !okC {
			// A merge whose parts or result are not tokens can never apply
			// to token symbols; llama.cpp would fall back to bytes for it.
			continue
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; dup {
			continue // the first (lowest) rank wins
		}
		m.merges[k] = merge{rank: int32(rank), id: c}
	}
	return m, nil
}

// smallWord is the length up to which encodeWord rescans all pairs after each
// merge; longer words use a heap, so a pathological word stays O(n log n).
const smallWord = 48

// encodeWord appends the tokens of one pre-token word (raw bytes) to out.
func (m *bpeModel) encodeWord(out []int32, word string) []int32 {
	if len(word) <= smallWord {
		return m.encodeSmall(out, word)
	}
	return m.encodeHeap(out, word)
}

func (m *bpeModel) encodeSmall(out []int32, word string) []int32 {
	var symBuf [smallWord]int32
	var rankBuf [smallWord]int32 // rankBuf[i]: rank of merging sym[i] and sym[i+1], -1 if none
	var idBuf [smallWord]int32
	n := len(word)
	sym, rank, mid := symBuf[:n], rankBuf[:n], idBuf[:n]
	for i := 0; i < n; i++ {
		sym[i] = m.byteTok[word[i]]
	}
	pair := func(i int) {
		rank[i] = -1
		if i+1 < n && sym[i] >= 0 && sym[i+1] >= 0 {
			if mg, ok := m.merges[pairKey(sym[i], sym[i+1])]; ok {
				rank[i], mid[i] = mg.rank, mg.id
			}
		}
	}
	for i := 0; i < n; i++ {
		pair(i)
	}
	for {
		best := -1
		for i := 0; i < n-1; i++ {
			if rank[i] >= 0 && (best < 0 || rank[i] < rank[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		sym[best] = mid[best]
		copy(sym[best+1:], sym[best+2:n])
		copy(rank[best+1:], rank[best+2:n])
		copy(mid[best+1:], mid[best+2:n])
		n--
		sym, rank, mid = sym[:n], rank[:n], mid[:n]
		pair(best)
		if best > 0 {
			pair(best - 1)
		}
	}
	for _, id := range sym {
		if id >= 0 {
			out = append(out, id)
		}
	}
	return out
}

type bpeSym struct {
	id         int32
	prev, next int32
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

func (m *bpeModel) encodeHeap(out []int32, word string) []int32 {
	n := len(word)
	syms := make([]bpeSym, n)
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
