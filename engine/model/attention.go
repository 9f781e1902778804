package model

import (
	"math"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// attention is a full (softmax) attention layer with grouped-query heads:
// llama's plain one, or qwen35's gated one, whose query projection yields a
// query and a gate per head, with RMS-normed q and k and the output
// multiplied by sigmoid(gate) (src/models/qwen35.cpp build_layer_attn).
type attention struct {
	heads, kvHeads, headDim int
	gated                   bool
	wq, wk, wv, wo          linear
	qNorm, kNorm            []float32 // nil: none
	eps                     float32
	rope                    rope
	scale                   float32 // 1/sqrt(headDim)
	kScale, vScale          float32 // FP8 KV cache scales (1 unless the file has them)
}

// How attention rounds follows what llama.cpp does on a CPU by default
// (flash attention "auto", which resolves to on):
//
//   - F16 KV cache: ggml's flash attention. A batch of fewer than
//     tiledQueries tokens takes the one-row path (Q rounded to F16, an F16
//     running output); a larger one the tiled path (F32 products, a
//     softmax per block of tiledKV cache slots), and so does a piece of a
//     chunk that large (Batch.Chunk): a row's result on either path
//     depends on its own position only, not on the other rows.
//   - F32 KV cache: with flash attention on, llama.cpp casts an F32 cache to
//     F16 before the op, so F32 only means something with flash attention
//     off; this path is llama.cpp's non-flash attention (build_attn_mha:
//     mul_mat K·Q, soft_max_ext, mul_mat V·P), the one its F32-KV goldens
//     are made with (FA=0 KV=F32).

// tiledQueries is ggml's GGML_FA_TILE_Q: a flash-attention call with at
// least this many query rows takes ggml-cpu's tiled F32 path, a smaller one
// the one-row path that rounds Q to the K cache's type.
const tiledQueries = 64

// tiledKV is GGML_FA_TILE_KV, the KV block of the tiled path.
const tiledKV = 64

// forward runs the layer on the normed rows h of pass p: the projections
// and the per-row steps (the query/gate split, the q and k norms, RoPE)
// over every row at once, then, sequence by sequence, the K and V of its
// tokens written to its cache after its committed ones and its attention,
// and the projected output of every row into out.
func (a *attention) forward(d *decoder, p *pass, li int, h []float32, out []float32) {
	r := p.rows
	n := p.n
	hd := a.headDim
	qDim, kvDim := a.heads*hd, a.kvHeads*hd

	qf := r.qf[:n*a.wq.m.Rows]
	k := r.k[:n*kvDim]
	v := r.v[:n*kvDim]
	d.mm(&a.wq, qf, h, n)
	d.mm(&a.wk, k, h, n)
	d.mm(&a.wv, v, h, n)

	q := qf
	if a.gated {
		// per head: [query (hd) | gate (hd)]
		q = r.q[:n*qDim]
		gate := r.gate[:n*qDim]
		for i := 0; i < n*a.heads; i++ {
			copy(q[i*hd:(i+1)*hd], qf[2*i*hd:(2*i+1)*hd])
			copy(gate[i*hd:(i+1)*hd], qf[(2*i+1)*hd:(2*i+2)*hd])
		}
	}
	if a.qNorm != nil {
		rmsNormRows(q, q, a.qNorm, n*a.heads, hd, a.eps)
	}
	if a.kNorm != nil {
		rmsNormRows(k, k, a.kNorm, n*a.kvHeads, hd, a.eps)
	}

	rd := a.rope.dims
	if !p.csSet {
		for _, s := range p.seqs {
			for i, pos := range s.w.batch.Pos {
				row := s.w.off + i
				a.rope.cache(r.cs[row*rd:(row+1)*rd], pos)
			}
		}
		p.csSet = true
	}
	for i := 0; i < n; i++ {
		cs := r.cs[i*rd : (i+1)*rd]
		a.rope.apply(q[i*qDim:(i+1)*qDim], a.heads, hd, cs)
		a.rope.apply(k[i*kvDim:(i+1)*kvDim], a.kvHeads, hd, cs)
	}

	o := r.o[:n*qDim]
	for _, s := range p.seqs {
		off, m := s.w.off, len(s.w.batch.Tokens)
		a.attend(d, s, li, attnRows{
			q: rowsOf(q, off, m, qDim), k: rowsOf(k, off, m, kvDim), v: rowsOf(v, off, m, kvDim),
			o: rowsOf(o, off, m, qDim), q16: rowsOf(r.q16, off, m, qDim), acc16: rowsOf(r.acc16, off, m, qDim),
		})
	}

	if a.gated {
		gate := r.gate[:n*qDim]
		for j := range o {
			o[j] *= sigmoid(gate[j])
		}
	}
	d.mm(&a.wo, out, o, n)
}

// attnRows are one sequence's rows of a pass that its attention reads and
// writes: queries, keys and values after RoPE, the output, and the
// one-row path's F16 query and accumulator per (token, head).
type attnRows struct {
	q, k, v, o []float32
	q16, acc16 []float32
}

// attend writes the keys and values of the batch of s to its cache after
// the committed tokens and computes the attention output of each of its
// tokens. Everything it decides (one-row or tiled path, the tiles, how
// the work is cut) follows from this sequence's batch alone, so the bits
// do not depend on what other sequences share the pass.
func (a *attention) attend(d *decoder, s *state, li int, ar attnRows) {
	w := &s.w
	n := len(w.batch.Tokens)
	hd := a.headDim
	kvDim := a.kvHeads * hd
	k, v := ar.k, ar.v

	c := &s.kv[li]
	for i := 0; i < n; i++ {
		slot := (w.base + i) * kvDim
		switch {
		case c.k16 != nil:
			for j := 0; j < kvDim; j++ {
				c.k16[slot+j] = tensor.F32ToF16(k[i*kvDim+j])
				c.v16[slot+j] = tensor.F32ToF16(v[i*kvDim+j])
			}
		case c.k8 != nil:
			tensor.EncodeE4M3Row(c.k8[slot:slot+kvDim], k[i*kvDim:(i+1)*kvDim], c.kScale)
			tensor.EncodeE4M3Row(c.v8[slot:slot+kvDim], v[i*kvDim:(i+1)*kvDim], c.vScale)
		default:
			copy(c.k32[slot:slot+kvDim], k[i*kvDim:(i+1)*kvDim])
			copy(c.v32[slot:slot+kvDim], v[i*kvDim:(i+1)*kvDim])
		}
	}

	w.att = attnJob{a: a, c: c, q: ar.q, o: ar.o, q16: ar.q16, acc16: ar.acc16, n: n, tasks: n * a.heads, tiled: w.batch.queries() >= tiledQueries, scratch: w.att.scratch}
	// A chain's tiled attention over an F16 cache goes by tiles of
	// tileTokens tokens of one KV head (runTiles).
	w.att.tiles = w.att.tiled && w.chain && c.k16 != nil && useAttnKernels
	if w.att.tiles {
		w.att.tasks = a.kvHeads * ((n + tileTokens - 1) / tileTokens)
	}
	chunks := 1
	if visible := w.base + n; w.att.tasks > 1 && n*a.heads*visible*hd >= 1<<12 {
		chunks = min(d.pool.Threads(), w.att.tasks)
	}
	w.att.chunks = chunks
	switch {
	case c.k32 != nil:
		// per-chunk scratch of the non-flash path: scores, and lanes per value dim
		w.att.scratch = growF32(w.att.scratch, chunks*(w.maxTokens+32*hd))
	case w.att.tiles:
		w.att.scratch = growF32(w.att.scratch, chunks*a.tileScratch())
	}
	if chunks > 1 {
		d.pool.Run(chunks, w.attFn)
	} else {
		w.runAttention(0, 1)
	}
}

// attnJob is the attention of one layer over one batch. Its (token, head)
// tasks are cut into chunks; a chunk runs on one worker and owns a slice of
// scratch.
type attnJob struct {
	a          *attention
	c          *kvCache
	q, o       []float32
	q16, acc16 []float32 // the one-row paths' scratch per task
	n          int
	tasks      int
	chunks     int
	tiled      bool
	tiles      bool // tasks are (tile, KV head) pairs of runTiles
	scratch    []float32
}

// runAttention computes the outputs of the task chunks [lo, hi).
func (w *work) runAttention(lo, hi int) {
	j := &w.att
	if j.tiles {
		w.runTiles(lo, hi)
		return
	}
	a := j.a
	hd := a.headDim
	group := a.heads / a.kvHeads
	per := w.maxTokens + 32*hd
	for ch := lo; ch < hi; ch++ {
		for t := ch * j.tasks / j.chunks; t < (ch+1)*j.tasks/j.chunks; t++ {
			i, hq := t/a.heads, t%a.heads
			kvOff := (hq / group) * hd // GQA: query head hq reads KV head hq/group
			q := j.q[t*hd : (t+1)*hd]
			o := j.o[t*hd : (t+1)*hd]
			switch {
			case j.c.k8 != nil:
				w.attendFP8(i, q, o, kvOff, j.acc16[t*hd:(t+1)*hd])
			case j.c.k32 != nil:
				w.attendNoFlash(i, q, o, kvOff, j.scratch[ch*per:(ch+1)*per])
			case j.tiled:
				w.attendTiled(i, q, o, kvOff)
			default:
				w.attendF16(i, q, o, kvOff, j.q16[t*hd:(t+1)*hd], j.acc16[t*hd:(t+1)*hd])
			}
		}
	}
}

// visible returns the KV slots query i of the batch sees, in cache order:
// all committed tokens, then its ancestors in the batch and itself. The
// slots are [0, end) when contiguous (a chain), else [0, base) followed by
// base+anc.
func (w *work) visible(i int) (end int, anc []int32) {
	if w.chain {
		return w.base + i + 1, nil
	}
	return w.base, w.anc.idx[w.anc.off[i]:w.anc.off[i+1]]
}

// attendF16 is ggml-cpu's one-row flash attention with an F16 cache
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk): Q rounded to F16,
// K·Q by ggml_vec_dot_f16, an online softmax in F32 whose running output
// is kept in F16 (ggml_vec_scale_f16, ggml_vec_mad_f16), and a final
// division by the running sum.
func (w *work) attendF16(i int, q, o []float32, kvOff int, q16, acc []float32) {
	for d := range q {
		q16[d] = tensor.RoundF16(q[d])
	}
	clear(acc)
	sm := onlineSoftmax{M: float32(math.Inf(-1))}
	end, anc := w.visible(i)
	if useAttnKernels {
		w.runF16(&sm, 0, end, kvOff, q16, acc)
		for _, j := range anc {
			w.runF16(&sm, w.base+int(j), w.base+int(j)+1, kvOff, q16, acc)
		}
	} else {
		for slot := 0; slot < end; slot++ {
			w.stepF16(&sm, slot, kvOff, q16, acc)
		}
		for _, j := range anc {
			w.stepF16(&sm, w.base+int(j), kvOff, q16, acc)
		}
	}
	inv := sm.inverse()
	for d := range o {
		o[d] = acc[d] * inv
	}
}

// attendFP8 is attention over an FP8 (E4M3) cache. llama.cpp has no FP8
// cache to copy, so this is the one-row flash attention of attendF16 in
// F32 throughout, the same for every batch size (so a prompt gives the same
// bits whatever its chunking): score = DotE4M3(k codes, q) * (kScale *
// 1/sqrt(hd)), an online softmax in F32 with expf, the running output
// acc = acc*ms + vs*E4M3(v codes), and o = acc * (vScale / sum). The
// scales leave the inner loops: FP8 value = code * scale (vLLM's
// convention), so K·q = kScale * Σ code·q and Σ p·V = vScale * Σ p·code.
func (w *work) attendFP8(i int, q, o []float32, kvOff int, acc []float32) {
	c := w.att.c
	hd := len(q)
	sk := c.kScale * w.att.a.scale
	clear(acc)
	sm := onlineSoftmax{M: float32(math.Inf(-1))}
	step := func(slot int) {
		off := slot*c.dim + kvOff
		ms, vs := sm.add(tensor.DotE4M3(c.k8[off:off+hd], q) * sk)
		if ms != 1 {
			tensor.Scale(acc, ms)
		}
		tensor.AxpyE4M3(acc, c.v8[off:off+hd], vs)
	}
	end, anc := w.visible(i)
	if useAttnKernels {
		w.runFP8(&sm, 0, end, kvOff, q, sk, acc)
		for _, j := range anc {
			w.runFP8(&sm, w.base+int(j), w.base+int(j)+1, kvOff, q, sk, acc)
		}
	} else {
		for slot := 0; slot < end; slot++ {
			step(slot)
		}
		for _, j := range anc {
			step(w.base + int(j))
		}
	}
	inv := sm.inverse() * c.vScale
	for d := range o {
		o[d] = acc[d] * inv
	}
}

// runFP8 takes the cache slots [lo, hi) in order as attendFP8's step does,
// f16Block at a time: their scores, the online softmax over them in order,
// then their values into the running output (tensor.AttnAccE4M3, the same
// Scale and AxpyE4M3 steps in the same order).
func (w *work) runFP8(sm *onlineSoftmax, lo, hi, kvOff int, q []float32, sk float32, acc []float32) {
	c := w.att.c
	dim, hd := c.dim, len(q)
	var ms, vs [f16Block]float32
	for b := lo; b < hi; b += f16Block {
		m := min(f16Block, hi-b)
		for r := 0; r < m; r++ {
			off := (b+r)*dim + kvOff
			ms[r], vs[r] = sm.add(tensor.DotE4M3(c.k8[off:off+hd], q) * sk)
		}
		tensor.AttnAccE4M3(acc, c.v8[b*dim+kvOff:], dim, ms[:m], vs[:m])
	}
}

// onlineSoftmax is the running maximum M and sum S of the one-row path.
type onlineSoftmax struct{ M, S float32 }

// add takes score s and returns the factor ms that rescales the running
// output and the weight vs of the new value.
func (sm *onlineSoftmax) add(s float32) (ms, vs float32) {
	ms, vs = 1, 1
	if s > sm.M {
		ms = expf(sm.M - s)
		sm.M = s
	} else {
		vs = expf(s - sm.M)
	}
	sm.S = float32(sm.S*ms) + vs
	return ms, vs
}

func (sm *onlineSoftmax) inverse() float32 {
	if sm.S == 0 {
		return 0
	}
	return 1 / sm.S
}

// f16Block is how many cache slots runF16 scores before it runs their
// softmax and values.
const f16Block = 256

// runF16 takes the cache slots [lo, hi) in order, as stepF16 does one by
// one: the scores of f16Block slots at a time (tensor.AttnDotF16Rows), the
// online softmax over them in order, then their values into the running
// output (tensor.AttnAccF16, which keeps every ggml_vec_scale_f16 and
// ggml_vec_mad_f16 of stepF16 in the same order). The scores do not depend
// on the softmax, and each output dimension is its own chain, so only the
// grouping of the work changes.
func (w *work) runF16(sm *onlineSoftmax, lo, hi, kvOff int, q16, acc []float32) {
	c := w.att.c
	dim := c.dim
	scale := w.att.a.scale
	var s, ms, vs [f16Block]float32
	for b := lo; b < hi; b += f16Block {
		m := min(f16Block, hi-b)
		off := b*dim + kvOff
		tensor.AttnDotF16Rows(s[:m], c.k16[off:], dim, q16)
		for r := 0; r < m; r++ {
			ms[r], vs[r] = sm.add(s[r] * scale)
		}
		tensor.AttnAccF16(acc, c.v16[off:], dim, ms[:m], vs[:m])
	}
}

// stepF16 takes one cache slot: q16 and acc hold F16 values widened to
// float32.
func (w *work) stepF16(sm *onlineSoftmax, slot, kvOff int, q16, acc []float32) {
	c := w.att.c
	off := slot*c.dim + kvOff
	hd := len(q16)
	ms, vs := sm.add(dotF16(c.k16[off:off+hd], q16) * w.att.a.scale)
	if ms != 1 {
		scaleF16(acc, ms)
	}
	madF16(acc, c.v16[off:off+hd], vs)
}

// attendNoFlash is llama.cpp's attention without flash attention, over an
// F32 cache: scores by ggml_vec_dot_f32 (the query is a permuted, so
// non-contiguous, matrix and no GEMM takes it, except for a single query
// head), scaled, softmax by ggml_soft_max_f32 (ggml_v_expf over blocks of 8
// cache slots, block sums added in float64, then multiplied by
// float32(1/sum)), and P·V by ggml_vec_dot_f32 for one token or, for a
// batch, llamafile's tinyBLAS sgemm (one 8-lane FMA accumulator per output).
// Cache slots are cells: slot s falls in lane s%8 (s%32 for vec_dot), as
// the masked cells in between add exact zeros.
func (w *work) attendNoFlash(i int, q, o []float32, kvOff int, scratch []float32) {
	c := w.att.c
	a := w.att.a
	hd, dim := a.headDim, c.dim
	end, anc := w.visible(i)
	total := end + len(anc)
	slotAt := func(p int) int {
		if p < end {
			return p
		}
		return w.base + int(anc[p-end])
	}
	batch := w.att.n >= 2
	sc := scratch[:total]
	tinyKQ := batch && a.heads == 1 && hd%8 == 0
	if useAttnKernels && !tinyKQ {
		w.attendNoFlashKernels(q, o, kvOff, scratch, sc, end, anc, batch && hd%4 == 0)
		return
	}
	mx := float32(math.Inf(-1))
	for p := range sc {
		off := slotAt(p)*dim + kvOff
		var s float32
		if tinyKQ {
			s = tinyDot(c.k32[off:off+hd], q)
		} else {
			s = tensor.Dot(c.k32[off:off+hd], q)
		}
		sc[p] = s * a.scale
		mx = max(mx, sc[p])
	}
	var sum float64
	for p := 0; p < total; {
		block := slotAt(p) / 8
		var lanes [8]float32
		for ; p < total && slotAt(p)/8 == block; p++ {
			sc[p] = vExpf(sc[p] - mx)
			lanes[slotAt(p)%8] = sc[p]
		}
		sum += float64(hsum8(&lanes))
	}
	inv := float32(1 / sum)
	for p := range sc {
		sc[p] *= inv
	}
	if batch && hd%4 == 0 {
		lanes := scratch[len(scratch)-32*hd : len(scratch)-24*hd] // hd × 8
		clear(lanes)
		for p, pr := range sc {
			slot := slotAt(p)
			off := slot*dim + kvOff
			l := slot % 8
			for d := 0; d < hd; d++ {
				lanes[d*8+l] = fma32(c.v32[off+d], pr, lanes[d*8+l])
			}
		}
		for d := 0; d < hd; d++ {
			o[d] = hsum8((*[8]float32)(lanes[d*8 : d*8+8]))
		}
		return
	}
	acc := scratch[len(scratch)-32*hd:] // hd × 32
	clear(acc)
	for p, pr := range sc {
		slot := slotAt(p)
		off := slot*dim + kvOff
		l := slot % 32
		for d := 0; d < hd; d++ {
			acc[d*32+l] = fma32(c.v32[off+d], pr, acc[d*32+l])
		}
	}
	for d := 0; d < hd; d++ {
		o[d] = reduce32((*[32]float32)(acc[d*32 : d*32+32]))
	}
}

// attendNoFlashKernels is attendNoFlash (but for its tinyBLAS K·Q case) with
// the same operations grouped for the kernels: the scores of the contiguous
// slots [0, end) by tensor.AttnDotF32Rows (ggml_vec_dot_f32 each), the
// exponentials by tensor.AttnExpShift, and P·V with the lane accumulators
// laid out lane-major (lane l of every value dim together), so that a slot
// is one fused tensor.AttnMadF32 into its lane's row; every (dim, lane)
// cell still takes its slots in order. lanes8 selects tinyBLAS's 8 lanes
// (a batch) over ggml_vec_dot_f32's 32.
func (w *work) attendNoFlashKernels(q, o []float32, kvOff int, scratch, sc []float32, end int, anc []int32, lanes8 bool) {
	c := w.att.c
	a := w.att.a
	hd, dim := a.headDim, c.dim
	slotAt := func(p int) int {
		if p < end {
			return p
		}
		return w.base + int(anc[p-end])
	}
	if end > 0 {
		tensor.AttnDotF32Rows(sc[:end], c.k32[kvOff:], dim, q)
	}
	for p := end; p < len(sc); p++ {
		off := slotAt(p)*dim + kvOff
		tensor.AttnDotF32Rows(sc[p:p+1], c.k32[off:off+hd], dim, q)
	}
	mx := float32(math.Inf(-1))
	for p := range sc {
		sc[p] *= a.scale
		mx = max(mx, sc[p])
	}
	tensor.AttnExpShift(sc, sc, mx)
	var sum float64
	for p := 0; p < len(sc); {
		block := slotAt(p) / 8
		var lanes [8]float32
		for ; p < len(sc) && slotAt(p)/8 == block; p++ {
			lanes[slotAt(p)%8] = sc[p]
		}
		sum += float64(hsum8(&lanes))
	}
	inv := float32(1 / sum)
	for p := range sc {
		sc[p] *= inv
	}
	L := 32
	if lanes8 {
		L = 8
	}
	acc := scratch[len(scratch)-32*hd : len(scratch)-(32-L)*hd] // L rows of hd
	clear(acc)
	for p, pr := range sc {
		slot := slotAt(p)
		off := slot*dim + kvOff
		l := slot % L
		tensor.AttnMadF32(acc[l*hd:(l+1)*hd], c.v32[off:off+hd], pr)
	}
	for d := 0; d < hd; d++ {
		if lanes8 {
			var x [8]float32
			for l := range x {
				x[l] = acc[l*hd+d]
			}
			o[d] = hsum8(&x)
		} else {
			var x [32]float32
			for l := range x {
				x[l] = acc[l*hd+d]
			}
			o[d] = reduce32(&x)
		}
	}
}

// attendTiled is ggml-cpu's tiled flash attention, taken for batches of at
// least tiledQueries tokens (ggml_compute_forward_flash_attn_ext_tiled): K
// and V converted to F32, K·Q and P·V as sequential FMA chains (simd_gemm),
// and a softmax per block of tiledKV cache slots with ggml_v_expf and sums
// in float64.
func (w *work) attendTiled(i int, q, o []float32, kvOff int) {
	c := w.att.c
	a := w.att.a
	hd, dim := a.headDim, c.dim
	clear(o)
	M := float32(math.Inf(-1))
	var S float32

	// the visible slots, in cache order, walked block by block
	end, anc := w.visible(i)
	total := end + len(anc)
	slotAt := func(p int) int {
		if p < end {
			return p
		}
		return w.base + int(anc[p-end])
	}
	var scores, probs [tiledKV]float32
	var slots [tiledKV]int
	for p := 0; p < total; {
		block := slotAt(p) / tiledKV
		m := 0
		for ; p < total && slotAt(p)/tiledKV == block; p++ {
			slots[m] = slotAt(p)
			m++
		}
		tileMax := float32(math.Inf(-1))
		for j := 0; j < m; j++ {
			off := slots[j]*dim + kvOff
			var s float32
			for d := 0; d < hd; d++ {
				s = fma32(q[d], w.kvAt(c.k16, c.k32, off+d), s)
			}
			s *= a.scale
			scores[j] = s
			tileMax = max(tileMax, s)
		}
		Mnew := max(M, tileMax)
		if Mnew > M {
			ms := expf(M - Mnew)
			tensor.Scale(o, ms)
			S *= ms
		}
		M = Mnew
		// ggml_vec_soft_max_f32 over the whole block of tiledKV scores,
		// masked ones being -inf: float sums of 8 lanes, added in float64.
		for j := range probs {
			probs[j] = 0
		}
		var pos [tiledKV]int
		for j := 0; j < m; j++ {
			pos[j] = slots[j] % tiledKV
			probs[pos[j]] = vExpf(scores[j] - M)
		}
		var sum float64
		for b := 0; b < tiledKV; b += 8 {
			sum += float64(hsum8((*[8]float32)(probs[b : b+8])))
		}
		S = float32(float64(S) + sum)
		for j := 0; j < m; j++ {
			off := slots[j]*dim + kvOff
			p := probs[pos[j]]
			for d := 0; d < hd; d++ {
				o[d] = fma32(p, w.kvAt(c.v16, c.v32, off+d), o[d])
			}
		}
	}
	inv := float32(0)
	if S != 0 {
		inv = 1 / S
	}
	tensor.Scale(o, inv)
}

// useAttnKernels selects the restructured loops of attention and the
// DeltaNet (runTiles, the tensor.Attn* and tensor.Delta* kernels); false
// runs the plain per-query loops they reproduce bit for bit, which tests
// compare them with.
var useAttnKernels = true

// tileTokens is how many consecutive tokens of a chain share one pass over
// the F16 cache in runTiles (with every query head of a KV head).
const tileTokens = 32

// tileScratch is the scratch runTiles needs per chunk: a block of tiledKV
// keys widened to F32 and transposed (hd rows of tiledKV), the block's
// values widened (tiledKV rows of hd), then the running maximum and sum of
// every query of a tile.
func (a *attention) tileScratch() int {
	return 2*tiledKV*a.headDim + 2*tileTokens*(a.heads/a.kvHeads)
}

// runTiles is attendTiled for a chain batch over an F16 cache, computed by
// tiles: a task is tileTokens consecutive tokens with the query heads of one
// KV head, and walks the cache once, block by block, for all its queries
// (each block's keys are widened and transposed once for them all). Chunk
// ch takes tasks ch, ch+chunks, ..., which spreads the long (late) tiles of
// a causal batch over the chunks.
func (w *work) runTiles(lo, hi int) {
	j := &w.att
	per := j.a.tileScratch()
	for ch := lo; ch < hi; ch++ {
		sc := j.scratch[ch*per : (ch+1)*per]
		for t := ch; t < j.tasks; t += j.chunks {
			w.attendTile(t/j.a.kvHeads*tileTokens, t%j.a.kvHeads, sc)
		}
	}
}

// attendTile computes the outputs of the tokens [i0, i0+tileTokens) of the
// batch for the query heads of KV head g. Per query it performs exactly the
// operations of attendTiled, in the same order: the scaled K·Q chains (64
// keys at a time by tensor.AttnScores64, the keys widened and transposed
// once per block by tensor.AttnKT), the block softmax (tensor.AttnExpSum:
// ggml_v_expf lane by lane and the float64 sum of the blocks' hsum8) and the
// P·V chains (tensor.AttnMadRows, over the block's values widened once by
// tensor.AttnWidenF16). Two query heads of a token go through the x2
// kernels together (a pair shares the block's m).
func (w *work) attendTile(i0, g int, sc []float32) {
	j := &w.att
	a, c := j.a, j.c
	hd, dim := a.headDim, c.dim
	group := a.heads / a.kvHeads
	kvOff := g * hd
	i1 := min(i0+tileTokens, j.n)
	kt := sc[:tiledKV*hd]
	vf := sc[tiledKV*hd : 2*tiledKV*hd]
	ms := sc[2*tiledKV*hd : 2*tiledKV*hd+tileTokens*group]
	ss := sc[2*tiledKV*hd+tileTokens*group : 2*tiledKV*hd+2*tileTokens*group]
	for qi := range (i1 - i0) * group {
		ms[qi], ss[qi] = float32(math.Inf(-1)), 0
		t := (i0+qi/group)*a.heads + g*group + qi%group
		clear(j.o[t*hd : (t+1)*hd])
	}
	var scores, probs, scores1, probs1 [tiledKV]float32
	end := w.base + i1 // query i sees the slots [0, base+i+1)
	for b0 := 0; b0 < end; b0 += tiledKV {
		bEnd := min(b0+tiledKV, end)
		tensor.AttnKT(kt, c.k16[b0*dim+kvOff:], dim, bEnd-b0, hd)
		tensor.AttnWidenF16(vf, c.v16[b0*dim+kvOff:], dim, bEnd-b0, hd)
		for i := max(i0, b0-w.base); i < i1; i++ {
			m := min(w.base+i+1, bEnd) - b0
			// the query heads of token i by pairs, which share the kernels' passes
			for h := 0; h < group; h += 2 {
				qi := (i-i0)*group + h
				t := i*a.heads + g*group + h
				q := j.q[t*hd : (t+1)*hd]
				o := j.o[t*hd : (t+1)*hd]
				if h+1 == group {
					tensor.AttnScores64(&scores, kt, q, a.scale)
					tileSoftmax(&probs, &scores, m, &ms[qi], &ss[qi], o)
					tensor.AttnMadRows(o, vf, hd, probs[:m])
					continue
				}
				q1 := j.q[(t+1)*hd : (t+2)*hd]
				o1 := j.o[(t+1)*hd : (t+2)*hd]
				tensor.AttnScores64x2(&scores, &scores1, kt, q, q1, a.scale)
				tileSoftmax(&probs, &scores, m, &ms[qi], &ss[qi], o)
				tileSoftmax(&probs1, &scores1, m, &ms[qi+1], &ss[qi+1], o1)
				tensor.AttnMadRowsx2(o, o1, vf, hd, probs[:m], probs1[:m])
			}
		}
	}
	for qi := range (i1 - i0) * group {
		t := (i0+qi/group)*a.heads + g*group + qi%group
		inv := float32(0)
		if ss[qi] != 0 {
			inv = 1 / ss[qi]
		}
		tensor.Scale(j.o[t*hd:(t+1)*hd], inv)
	}
}

// tileSoftmax is one query's online softmax step over a block of m scores
// in attendTiled's order: the block maximum, the rescaling of the running
// output o and sum *S when the running maximum *M grows, then the
// probabilities (tensor.AttnExpSum) and their float64 sum added to *S.
func tileSoftmax(probs, scores *[tiledKV]float32, m int, M, S *float32, o []float32) {
	tileMax := float32(math.Inf(-1))
	for _, s := range scores[:m] {
		tileMax = max(tileMax, s)
	}
	Mnew := max(*M, tileMax)
	if Mnew > *M {
		e := expf(*M - Mnew)
		tensor.Scale(o, e)
		*S *= e
	}
	*M = Mnew
	sum := tensor.AttnExpSum(probs, scores, m, Mnew)
	*S = float32(float64(*S) + sum)
}

func (w *work) kvAt(h []uint16, f []float32, i int) float32 {
	if h != nil {
		return tensor.F16ToF32(h[i])
	}
	return f[i]
}

// loadAttention reads blk.N.attn_{q,k,v,output} (and, for qwen35's gated
// attention, attn_q_norm and attn_k_norm). A gated layer's attn_q yields
// query and gate: twice the query rows.
func loadAttention(l *loader, prefix string, hp *Hyper, gated bool, r rope) (*attention, error) {
	E, hd := hp.Embd, hp.HeadDim
	a := &attention{
		heads: hp.Heads, kvHeads: hp.KVHeads, headDim: hd, gated: gated,
		eps: hp.NormEps, rope: r,
		scale: 1 / float32(math.Sqrt(float64(hd))),
	}
	var err error
	if a.kScale, a.vScale, err = l.kvScales(prefix); err != nil {
		return nil, err
	}
	if _, ok := l.f.Tensor(prefix + "attn_qkv.weight"); ok {
		return nil, l.errorf("tensor %q: fused QKV projections are not supported (want %sattn_q, attn_k and attn_v)", prefix+"attn_qkv.weight", prefix)
	}
	qRows := hp.Heads * hd
	if gated {
		qRows *= 2
	}
	if a.wq, err = l.matrix(prefix+"attn_q", E, qRows); err != nil {
		return nil, err
	}
	if a.wk, err = l.matrix(prefix+"attn_k", E, hp.KVHeads*hd); err != nil {
		return nil, err
	}
	if a.wv, err = l.matrix(prefix+"attn_v", E, hp.KVHeads*hd); err != nil {
		return nil, err
	}
	if a.wo, err = l.matrix(prefix+"attn_output", hp.Heads*hd, E); err != nil {
		return nil, err
	}
	if gated {
		if a.qNorm, err = l.vector(prefix+"attn_q_norm.weight", hd); err != nil {
			return nil, err
		}
		if a.kNorm, err = l.vector(prefix+"attn_k_norm.weight", hd); err != nil {
			return nil, err
		}
	}
	return a, nil
}
