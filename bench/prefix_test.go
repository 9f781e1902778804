package bench

import (
	"testing"

	"pgregory.net/rapid"
)

// TestPrefixIndexMatchesNaive: the sorted-neighbour answer equals the
// longest common prefix with every earlier sequence, found the slow way.
func TestPrefixIndexMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A small alphabet and short sequences make shared prefixes common.
		seqs := rapid.SliceOfN(rapid.SliceOfN(rapid.Int32Range(0, 3), 0, 12), 1, 40).Draw(t, "seqs")
		var idx prefixIndex
		for i, s := range seqs {
			want := 0
			for _, e := range seqs[:i] {
				want = max(want, commonPrefix(e, s))
			}
			if got := idx.add(s); got != want {
				t.Fatalf("sequence %d %v: got %d, want %d", i, s, got, want)
			}
		}
	})
}
