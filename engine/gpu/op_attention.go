package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// AttnParams describes one attention call over a layer's KV cache.
type AttnParams struct {
	Tokens, Heads, KVHeads, HeadDim int
	Base                            int     // committed tokens: cache slots [0, Base) are visible to every token of the batch
	Chain                           bool    // token i sees slots [0, Base+i]; otherwise Anc lists what each sees
	Anc                             Range   // tree batches: int32 off[Tokens+1], then idx (engine/model's ancestry): token i sees slots Base+idx[off[i]:off[i+1]]
	Scale                           float32 // the softmax scale, 1/sqrt(HeadDim)
	KScale, VScale                  float32 // E4M3 cache scales
}

// attGGMLTokens is ggml's GGML_FA_TILE_Q: with an F16 cache, a batch of
// fewer tokens runs ggml-cpu's one-row flash attention (attention_f16.comp
// keeps its roundings); a larger one its tiled float32 path, which
// attention.comp's float32 arithmetic is close to.
const attGGMLTokens = 64

// The shape of attention.comp (its WG, MAXQ, MAXSC and MAXR), and how the
// host cuts the work.
const (
	attGroupSize = 256
	attMaxQ      = 2048 // query values a workgroup holds: rows * HeadDim
	attMaxScores = 1024 // scores of a block: rows * slots
	attMaxRows   = 32
	// attTargetGroups is how many workgroups a call should have before the
	// visible slots are also split between workgroups (flash decoding: a
	// decode step of one token has only KVHeads of them otherwise).
	attTargetGroups = 256
	attMinChunk     = 256 // slots a split takes at least
	attMaxSplits    = 64
)

// attPlan is how Attention cuts a call: a workgroup takes R = G*T query
// rows (G query heads of one KV head, of T consecutive tokens) and one of
// S splits of chunk positions of the slots they see, walked Bk at a time.
type attPlan struct {
	G, T, R, Bk       int
	nTiles, headTiles int
	S, chunk          int
	maxS              int // the splits before chunks were rounded to whole blocks: never fewer for more slots
	groups            int // workgroups of attention.comp
	scratchBytes      int64
}

// attPlanFor cuts a call of tokens query tokens that see at most maxLen
// slots: as many rows a workgroup as its shared memory holds (query heads
// of one KV head first, so that they read each key and value once, then
// consecutive tokens of a chain), and splits of the slots when that leaves
// fewer than attTargetGroups workgroups (decode).
func attPlanFor(tokens, heads, kvHeads, hd int, maxLen int, chain bool) attPlan {
	var p attPlan
	rMax := max(1, min(attMaxRows, attMaxQ/hd))
	group := heads / kvHeads
	p.G = 1
	for g := min(group, rMax); g >= 1; g-- {
		if group%g == 0 {
			p.G = g
			break
		}
	}
	p.T = 1
	if chain {
		p.T = max(1, min(rMax/p.G, tokens))
	}
	p.R = p.G * p.T
	p.Bk = min(attGroupSize, attMaxScores/p.R)
	p.nTiles = (tokens + p.T - 1) / p.T
	p.headTiles = group / p.G
	tasks := p.nTiles * kvHeads * p.headTiles
	p.maxS = 1
	if tasks < attTargetGroups && maxLen > attMinChunk {
		p.maxS = min((maxLen+attMinChunk-1)/attMinChunk, (attTargetGroups+tasks-1)/tasks, attMaxSplits)
	}
	// chunks of whole blocks; rounding them up may leave fewer splits
	p.chunk = (maxLen + p.maxS - 1) / p.maxS
	p.chunk = (p.chunk + p.Bk - 1) / p.Bk * p.Bk
	p.S = (maxLen + p.chunk - 1) / p.chunk
	p.groups = tasks * p.S
	p.scratchBytes = attPartBytes(p.S, tokens, heads, hd)
	return p
}

// attPartBytes is the scratch of S splits' partial results: per split and
// query row, its maximum and sum, and hd values. One split needs none.
func attPartBytes(S, tokens, heads, hd int) int64 {
	if S <= 1 {
		return 0
	}
	return int64(S) * int64(tokens) * int64(heads) * int64(hd+2) * 4
}

// AttnScratchBytes is the scratch Attention needs for a call of p's shape,
// and for every call with the same heads and at most p.Tokens tokens and
// p.Base+p.Tokens visible slots, chain or tree (so a state sizes it once
// for its largest batch and context).
func AttnScratchBytes(p AttnParams) int64 {
	if p.Tokens <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.Heads%p.KVHeads != 0 {
		return 0
	}
	maxLen := p.Base + p.Tokens
	var most int64
	// Only calls of fewer than attTargetGroups workgroups are split, so
	// the loop stops long before a prefill's token count.
	for t := 1; t <= p.Tokens; t++ {
		// maxS, unlike S, grows with the slots: it bounds every
		// shorter call's S
		tree := attPlanFor(t, p.Heads, p.KVHeads, p.HeadDim, maxLen, false)
		chain := attPlanFor(t, p.Heads, p.KVHeads, p.HeadDim, maxLen, true)
		most = max(most, attPartBytes(tree.maxS, t, p.Heads, p.HeadDim), attPartBytes(chain.maxS, t, p.Heads, p.HeadDim))
		if tree.maxS == 1 && chain.maxS == 1 {
			break
		}
	}
	return most
}

// Attention records softmax attention of the Tokens*Heads query vectors q
// (HeadDim float32 values each, token-major) over the cache slots each
// token sees (p says which), into out (the same layout). Query head h
// reads KV head h/(Heads/KVHeads). The caches k and v hold rows of
// KVHeads*HeadDim values of kvType (F32, F16 or E4M3 codes, whose values
// are code*KScale and code*VScale). Scores are q.k*Scale, the softmax is
// an online one in float32 (the running maximum subtracted), and scratch
// holds AttnScratchBytes(p) bytes (or none, when that is 0). HeadDim must
// be a multiple of 4 and at most 2048.
//
// The CPU engine rounds differently per path (F16: ggml's flash attention,
// Q rounded to F16 for small batches; F32: the non-flash path); this
// computes every path in float32 from the cache's exact values.
func (r *Recorder) Attention(out, q Range, k, v Range, kvType tensor.DType, p AttnParams, scratch Range) {
	var j [1]attnJob
	if r.planAttention(&j[0], out, q, k, v, kvType, p, scratch) {
		r.attentions(j[:])
	}
}

// attnJob is one Attention call, checked and planned (planAttention): its
// dispatch and, when the slots are split, the combine that follows it.
type attnJob struct {
	name         string
	spec         [8]uint32
	nspec        int
	grid         [3]uint32
	push         [22]uint32
	npush        int
	bufs         [6]Range
	combine      bool
	combineGrid  [3]uint32
	combinePush  [6]uint32
	out, scratch Range
}

// planAttention checks the arguments of an Attention call (as Attention
// takes them) and plans it into j; false (the error stuck in r) when they
// are bad or there is nothing to do.
func (r *Recorder) planAttention(j *attnJob, out, q Range, k, v Range, kvType tensor.DType, p AttnParams, scratch Range) bool {
	if r.err != nil || !r.open || p.Tokens <= 0 {
		return false
	}
	code, size, ok := attKVType(kvType)
	switch {
	case !ok:
		r.ewFail("Attention: KV cache type %s (want F32, F16 or E4M3)", kvType)
		return false
	case p.Heads <= 0 || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0:
		r.ewFail("Attention: %d query heads over %d KV heads (want a positive multiple)", p.Heads, p.KVHeads)
		return false
	case p.HeadDim <= 0 || p.HeadDim%4 != 0 || p.HeadDim > attMaxQ:
		r.ewFail("Attention: head dimension %d (want a multiple of 4, at most %d)", p.HeadDim, attMaxQ)
		return false
	case p.Base < 0:
		r.ewFail("Attention: %d committed tokens", p.Base)
		return false
	}
	hd := p.HeadDim
	qBytes := 4 * int64(p.Tokens) * int64(p.Heads) * int64(hd)
	cacheBytes := int64(p.Base+p.Tokens) * int64(p.KVHeads*hd) * size
	if !r.ewCheck("Attention", "out", out, qBytes) || !r.ewCheck("Attention", "q", q, qBytes) ||
		!r.ewCheck("Attention", "K cache", k, cacheBytes) || !r.ewCheck("Attention", "V cache", v, cacheBytes) {
		return false
	}
	chain := uint32(1)
	anc := q // bound but unread by chains
	if !p.Chain {
		if !r.ewCheck("Attention", "ancestry", p.Anc, 4*int64(p.Tokens+1)) {
			return false
		}
		chain, anc = 0, p.Anc
	}
	*j = attnJob{}
	r.dev.countMACs(attMACs(p), r.dev.attCoop(kvType, p))
	if r.dev.attCoop(kvType, p) {
		return r.planAttentionCoop(j, out, q, k, v, anc, chain, kvType, p, scratch)
	}
	if kvType == tensor.F16 && p.Tokens < attGGMLTokens && hd <= 256 && r.dev.info.Float64 {
		// llama.cpp's one-row flash attention, roundings and all
		j.name, j.grid = "attention_f16", Groups(p.Tokens*p.Heads)
		j.npush = copy(j.push[:], []uint32{
			uint32(p.Tokens), uint32(p.Heads), uint32(p.KVHeads), uint32(hd),
			uint32(p.Base), chain, ewWord(q), ewWord(out),
			ewWord(k), ewWord(v), ewWord(anc), 0,
			F32(p.Scale),
		})
		j.bufs = [6]Range{out.Buf.All(), q.Buf.All(), k.Buf.All(), v.Buf.All(), anc.Buf.All(), anc.Buf.All()}
		return true
	}
	pl := attPlanFor(p.Tokens, p.Heads, p.KVHeads, hd, p.Base+p.Tokens, p.Chain)
	j.name, j.spec, j.nspec, j.grid = "attention", [8]uint32{code}, 1, Groups(pl.groups)
	return r.setSplitArgs(j, p, pl, chain, [4]int{pl.G, pl.T, pl.nTiles, pl.headTiles}, pl.Bk, kvType, out, q, k, v, anc, scratch)
}

// setSplitArgs fills in j what attention.comp and attention_cm.comp take
// alike: the push constants (g: query heads and tokens a workgroup, its
// token tiles and head tiles; bk: attention.comp's slots a block, 0 for
// attention_cm), the buffers, and the combine of the slot splits' partial
// results in scratch; false (the error stuck in r) when scratch is short.
func (r *Recorder) setSplitArgs(j *attnJob, p AttnParams, pl attPlan, chain uint32, g [4]int, bk int, kvType tensor.DType, out, q, k, v, anc, scratch Range) bool {
	part := out // bound but unwritten without splits
	if pl.S > 1 {
		if !r.ewCheck("Attention", "scratch", scratch, pl.scratchBytes) {
			return false
		}
		part = scratch
	}
	sk, vs := p.Scale, float32(1)
	if kvType == tensor.E4M3 {
		sk, vs = p.KScale*p.Scale, p.VScale
	}
	j.npush = copy(j.push[:], []uint32{
		uint32(p.Tokens), uint32(p.Heads), uint32(p.KVHeads), uint32(p.HeadDim),
		uint32(p.Base), chain, ewWord(q), ewWord(out),
		ewWord(k), ewWord(v), ewWord(anc), ewWord(part),
		uint32(g[0]), uint32(g[1]), uint32(g[2]), uint32(g[3]),
		uint32(pl.S), uint32(pl.chunk), uint32(bk), 0,
		F32(sk), F32(vs),
	})
	j.bufs = [6]Range{out.Buf.All(), q.Buf.All(), k.Buf.All(), v.Buf.All(), anc.Buf.All(), part.Buf.All()}
	if pl.S > 1 {
		rows := p.Tokens * p.Heads
		j.combine, j.combineGrid = true, Groups(rows)
		j.combinePush = [6]uint32{uint32(rows), uint32(p.HeadDim), uint32(pl.S), ewWord(out), ewWord(scratch), F32(vs)}
		j.out, j.scratch = out, scratch
	}
	return true
}

// attentions records the planned calls jobs, on distinct outputs and
// scratch: every call's dispatch, then, where the slots were split, a
// barrier and the combines. So the calls of a pass over several sequences
// run side by side, each as it would alone.
func (r *Recorder) attentions(jobs []attnJob) {
	combine := false
	for i := range jobs {
		j := &jobs[i]
		nb := 6
		if j.name == "attention_f16" {
			nb = 5
		}
		r.Dispatch(j.name, j.spec[:j.nspec], j.grid, j.push[:j.npush], j.bufs[:nb]...)
		combine = combine || j.combine
	}
	if !combine {
		return
	}
	r.Barrier()
	for i := range jobs {
		if j := &jobs[i]; j.combine {
			r.Dispatch("attention_combine", nil, j.combineGrid, j.combinePush[:], j.out.Buf.All(), j.scratch.Buf.All())
		}
	}
}
