package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine/model"
)

// The cost model learns a pass's cost from measured passes and picks
// chunks that keep a pass within the budget all along a long prompt,
// smaller as the chunk's position grows, also when its idea of what
// attention costs against the matrix products (keyCost) is off by 2x.
func TestPassCostChunk(t *testing.T) {
	for _, off := range []float64{0.5, 1, 2} {
		t.Run(fmt.Sprintf("keyCost-x%g", off), func(t *testing.T) { testPassCostChunk(t, off) })
	}
}

func testPassCostChunk(t *testing.T, off float64) {
	const (
		decode   = 25e-3 // a decode-only pass of 2 sequences, seconds
		perToken = 1.2e-3
		perKey   = 4e-8 // attention: seconds per key a prompt token attends to
		slowdown = 2.5
	)
	truth := func(n, pos int) float64 { return perToken*float64(n) + perKey*chunkKeys(n, pos) }
	rng := rand.New(rand.NewPCG(1, 2))
	noisy := func(s float64) time.Duration { return time.Duration(s * (1 + 0.05*(rng.Float64()-0.5)) * 1e9) }

	c := newPassCost(off * perKey / perToken)
	if k := c.chunk(256, 0, MinPrefillChunk, (slowdown-1)*decode); k != MinPrefillChunk {
		t.Fatalf("knowing nothing: chunk %d, want %d", k, MinPrefillChunk)
	}
	for range 5 {
		c.observe(2, 0, 0, noisy(decode))
	}
	if f := c.fixed(2); f < 0.9*decode || f > 1.1*decode {
		t.Fatalf("decode-only pass %.4f s, want about %.4f", f, decode)
	}
	// A 16k prompt beside the decoders, as the batcher would run it.
	budget := (slowdown - 1) * c.fixed(2)
	var chunks []int
	for pos := 0; pos < 16384; {
		n := c.chunk(min(256, 16384-pos), pos, MinPrefillChunk, budget)
		pass := decode + truth(n, pos)
		if len(chunks) > 4 && pass > 1.1*slowdown*decode {
			t.Fatalf("at %d: a chunk of %d makes a pass of %.1f ms, over %.1f x %.1f ms", pos, n, pass*1e3, slowdown, decode*1e3)
		}
		if len(chunks) > 4 && n < min(256, 16384-pos) && truth(n+n/5+1, pos) < (slowdown-1)*decode {
			t.Fatalf("at %d: chunk %d is too small (%d would fit)", pos, n, n+n/5+1)
		}
		c.observe(2, n, chunkKeys(n, pos), noisy(pass))
		chunks = append(chunks, n)
		pos += n
	}
	early, late := chunks[5], chunks[len(chunks)-2]
	if late >= early {
		t.Fatalf("chunks do not shrink as attention grows: %d early, %d late", early, late)
	}
	t.Logf("%d passes; chunks %v ... %v", len(chunks), chunks[:8], chunks[len(chunks)-4:])
}

// The batcher's budget: with nobody else decoding a chunk runs whole;
// beside a decode step it is cut to what fits; before any decode-only
// pass was measured the chunk sits one pass out (which measures one), so
// that it is not cut to the minimum for good; a piece over a pass's
// allowance waits for passes that save up for it.
func TestBatcherBudget(t *testing.T) {
	b := &Batcher{slowdown: 2.5, cost: newPassCost(0)}
	chunk := func() *fwdReq {
		bt := model.ChainBatch(make([]int32, 256), 1000, false)
		return &fwdReq{seq: model.SeqBatch{Batch: bt}, prefill: true, floor: MinPrefillChunk, ran: 256}
	}
	decode := &fwdReq{seq: model.SeqBatch{Batch: model.ChainBatch(make([]int32, 1), 50, false)}, ran: 1}

	p := chunk()
	if run, held := b.budget([]*fwdReq{p}); len(run) != 1 || held != nil || p.ran != 256 {
		t.Fatalf("alone: run %d, held %d, ran %d", len(run), len(held), p.ran)
	}
	p = chunk()
	run, held := b.budget([]*fwdReq{decode, p})
	if len(run) != 1 || run[0] != decode || len(held) != 1 || held[0] != p || p.ran != 256 {
		t.Fatalf("no decode pass measured: run %v, held %v", run, held)
	}
	b.cost.observe(1, 0, 0, 20*time.Millisecond)
	b.cost.observe(0, 256, 0, 20*time.Millisecond+256*time.Millisecond) // 1 ms a token
	p = chunk()
	run, held = b.budget([]*fwdReq{decode, p})
	if len(run) != 2 || held != nil || p.ran != 30 || len(p.seq.Batch.Tokens) != 30 || len(p.seq.Batch.Pos) != 30 || p.seq.Batch.Pos[0] != 1000 {
		t.Fatalf("beside a decode step: ran %d (%d tokens), want 30 (1.5 x 20 ms at 1 ms a token)", p.ran, len(p.seq.Batch.Tokens))
	}
	if b.stats.BudgetedChunks != 1 {
		t.Fatalf("budgeted chunks %d", b.stats.BudgetedChunks)
	}

	// A floor of 64 tokens (64 ms) is over a pass's 30 ms: the chunk sits
	// out two passes, then runs on their saved allowance (3 x 30 ms: 90
	// tokens), and the credit is spent.
	for i := range 3 {
		p = chunk()
		p.floor = 64
		run, held = b.budget([]*fwdReq{decode, p})
		if i < 2 && (len(run) != 1 || len(held) != 1) || i == 2 && (len(run) != 2 || len(held) != 0) {
			t.Fatalf("pass %d: run %d, held %d (credit %.3f s)", i, len(run), len(held), b.credit)
		}
	}
	if p.ran != 90 || b.credit != 0 || b.stats.HeldChunks != 3 {
		t.Fatalf("after saving up: ran %d, credit %.3f s, held %d times", p.ran, b.credit, b.stats.HeldChunks)
	}
}
