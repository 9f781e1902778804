package tokenizer

// mergeHeap is the priority queue both BPE variants merge from: candidates
// ordered by their own before method (best first). A plain binary heap on a
// slice, so a word's encoding allocates only the slice.
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
