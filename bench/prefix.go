package bench

import "sort"

// prefixIndex answers, for each new token sequence, the length of the
// longest prefix it shares with any sequence added before: the most prompt
// tokens an ideal prefix cache (unbounded, token-granular) could serve.
//
// Sequences are kept in lexicographic order; the earlier sequence sharing
// the longest prefix with s is always next to s in that order, so one binary
// search and two comparisons answer each query.
type prefixIndex struct {
	sorted [][]int32
}

// add inserts s and returns its longest prefix shared with an earlier one.
func (p *prefixIndex) add(s []int32) int {
	i := sort.Search(len(p.sorted), func(i int) bool { return compareTokens(p.sorted[i], s) >= 0 })
	best := 0
	if i > 0 {
		best = commonPrefix(p.sorted[i-1], s)
	}
	if i < len(p.sorted) {
		best = max(best, commonPrefix(p.sorted[i], s))
	}
	p.sorted = append(p.sorted, nil)
	copy(p.sorted[i+1:], p.sorted[i:])
	p.sorted[i] = s
	return best
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func compareTokens(a, b []int32) int {
	n := commonPrefix(a, b)
	switch {
	case n < len(a) && n < len(b):
		if a[n] < b[n] {
			return -1
		}
		return 1
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}
