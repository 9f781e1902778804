package speculative

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPickIsBestPrefixClosed: for random tries, pick returns the root
// first, every node after its parent, never more than asked, and (tree
// mode) no unpicked node whose parent was picked scores better than a
// picked one; linear mode is a single chain.
func TestPickIsBestPrefixClosed(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tr draftTree
		tr.reset(7)
		for range rapid.IntRange(0, 40).Draw(rt, "adds") {
			parent := int32(rapid.IntRange(0, len(tr.nodes)-1).Draw(rt, "parent"))
			tok := rapid.Int32Range(0, 5).Draw(rt, "tok")
			lp := rapid.Float64Range(-6, 0).Draw(rt, "logprob")
			tr.add(parent, tok, tr.nodes[parent].score+lp)
		}
		maxNodes := rapid.IntRange(0, 20).Draw(rt, "maxNodes")
		linear := rapid.Bool().Draw(rt, "linear")
		sel := tr.pick(maxNodes, linear)
		if sel[0] != 0 || len(sel) > maxNodes+1 {
			rt.Fatalf("pick(%d) = %v", maxNodes, sel)
		}
		for i, n := range sel {
			if int(tr.nodes[n].batch) != i {
				rt.Fatalf("node %d has batch index %d, listed at %d", n, tr.nodes[n].batch, i)
			}
			if i > 0 {
				p := tr.nodes[n].parent
				if tr.nodes[p].batch < 0 || int(tr.nodes[p].batch) >= i {
					rt.Fatalf("node %d listed at %d before its parent %d", n, i, p)
				}
				if linear && tr.nodes[p].batch != int32(i-1) {
					rt.Fatalf("linear pick is not a chain: %v", sel)
				}
			}
		}
		// siblings of one parent never share a token
		for i := range tr.nodes {
			var toks []int32
			for c := tr.nodes[i].firstChild; c >= 0; c = tr.nodes[c].nextSibling {
				if slices.Contains(toks, tr.nodes[c].tok) {
					rt.Fatalf("node %d has two children with token %d", i, tr.nodes[c].tok)
				}
				toks = append(toks, tr.nodes[c].tok)
			}
		}
		if linear || len(sel) < maxNodes+1 {
			return
		}
		worst := tr.nodes[sel[len(sel)-1]].score
		for _, n := range sel[1:] {
			worst = min(worst, tr.nodes[n].score)
		}
		for i := range tr.nodes {
			nd := &tr.nodes[i]
			if nd.batch < 0 && nd.parent >= 0 && tr.nodes[nd.parent].batch >= 0 && nd.score > worst {
				// a better frontier node was left out: allowed only when
				// the picked one was popped before this became reachable
				// and scored better than everything then in the frontier,
				// which best-first guarantees; so this is a bug.
				rt.Fatalf("frontier node %d (score %.3f) left out while a node of score %.3f was picked", i, nd.score, worst)
			}
		}
	})
}

// TestSuffixDraft: continuations of the context's last tokens come from
// earlier documents and from earlier in the same one, the longest match
// scoring best; separators end continuations; the bounded stream compacts
// and still finds recent text.
func TestSuffixDraft(t *testing.T) {
	x := newSuffixIndex(64)
	for _, doc := range [][]int32{
		{1, 2, 3, 4, 5, 6},
		{9, 2, 3, 7, 8},
	} {
		x.separate()
		for _, tok := range doc {
			x.push(tok)
		}
	}
	ctx := []int32{1, 2, 3}
	x.separate()
	for _, tok := range ctx {
		x.push(tok)
	}
	var tr draftTree
	tr.reset(3)
	x.draft(&tr, ctx, 3, 100)
	sel := tr.pick(10, false)
	var got [][]int32
	for _, n := range sel[1:] {
		if tr.nodes[n].firstChild < 0 {
			var path []int32
			for m := n; m > 0; m = tr.nodes[m].parent {
				path = append([]int32{tr.nodes[m].tok}, path...)
			}
			got = append(got, path)
		}
	}
	want := [][]int32{{4, 5, 6}, {7, 8}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("continuations %v, want %v (longest match first)", got, want)
	}
	if a, b := tr.nodes[sel[1]], tr.nodes[sel[len(sel)-1]]; a.tok != 4 || a.score <= b.score {
		t.Errorf("the longer match's continuation does not score best: %+v vs %+v", a, b)
	}
	// compaction keeps the newer half and its chains
	for i := range int32(100) {
		x.push(100 + i%7)
	}
	if len(x.hist) > 64 {
		t.Fatalf("stream holds %d tokens, bound 64", len(x.hist))
	}
	ctx = []int32{100 + 5, 100 + 6}
	tr.reset(ctx[1])
	x.draft(&tr, ctx, 2, 1000)
	if len(tr.nodes) < 3 || tr.nodes[1].tok != 100 {
		t.Fatalf("after compaction the periodic text is not found: %+v", tr.nodes)
	}
}
