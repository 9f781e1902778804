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
	byRank  []int32          // token of the merge of each rank, -1 where the merge cannot apply
}

type merge struct {
	rank int32
	id   int32 // token of the merged text
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPEModel(v *Vocab, toID map[string]int32) (*bpeModel, error) {
	m := &bpeModel{merges: make(map[uint64]merge, len(v.Merges)), byRank: make([]int32, len(v.Merges))}
	for b := 0; b < 256; b++ {
		id, ok := toID[string(byteToRune[b])]
		if !ok {
			id = -1
		}
		m.byteTok[b] = id
	}
	var buf []byte
	for rank, s := range v.Merges {
		m.byRank[rank] = -1
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
		m.byRank[rank] = c
	}
	return m, nil
}

// smallWord is the length up to which encodeWord rescans all pairs after each
// merge; longer words use a mergeQueue, so a pathological word (15 MiB of one
// letter in a chat message) stays O(n log n) in time and about 16 bytes a
// byte in memory.
const smallWord = 48

// encodeWord appends the tokens of one pre-token word (raw bytes) to out.
func (m *bpeModel) encodeWord(out []int32, word string) []int32 {
	if len(word) <= smallWord {
		return m.encodeSmall(out, word)
	}
	return m.encodeLong(out, word)
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

// bpeSym is a symbol of encodeLong, at the index of its first byte.
type bpeSym struct {
	id         int32 // -1 for a byte the vocab lacks
	prev, next int32 // neighbouring symbols, -1 at the ends
}

// pairRank is the queue key of merging tokens a and b: its rank.
func (m *bpeModel) pairRank(a, b int32) uint32 {
	if a < 0 || b < 0 {
		return noMerge
	}
	if mg, ok := m.merges[pairKey(a, b)]; ok {
		return uint32(mg.rank)
	}
	return noMerge
}

// encodeLong merges like encodeSmall (lowest rank first, leftmost on ties)
// with a mergeQueue over the symbols.
func (m *bpeModel) encodeLong(out []int32, word string) []int32 {
	n := len(word)
	syms := make([]bpeSym, n)
	for i := range syms {
		syms[i] = bpeSym{id: m.byteTok[word[i]], prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[n-1].next = -1
	keys := make([]uint32, n)
	for i := 0; i+1 < n; i++ {
		keys[i] = m.pairRank(syms[i].id, syms[i+1].id)
	}
	keys[n-1] = noMerge
	q := newMergeQueue(keys)
	for {
		l := q.best()
		if l < 0 {
			break
		}
		s := &syms[l]
		r := s.next
		s.id = m.byRank[keys[l]]
		s.next = syms[r].next
		q.set(int(r), noMerge)
		if s.next >= 0 {
			syms[s.next].prev = int32(l)
			q.set(l, m.pairRank(s.id, syms[s.next].id))
		} else {
			q.set(l, noMerge)
		}
		if s.prev >= 0 {
			q.set(int(s.prev), m.pairRank(syms[s.prev].id, s.id))
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		if id := syms[i].id; id >= 0 {
			out = append(out, id)
		}
	}
	return out
}
