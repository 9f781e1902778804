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
//     softmax per block of tiledKV cache slots).
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

// forward runs the layer on the n normed rows h of the batch, writes K and
// V of every token to the cache after the committed ones, and leaves the
// projected output in out.
func (a *attention) forward(d *decoder, s *state, li int, h []float32, n int, out []float32) {
	w := &s.w
	hd := a.headDim
	qDim, kvDim := a.heads*hd, a.kvHeads*hd

	qf := w.qf[:n*a.wq.m.Rows]
	k := w.k[:n*kvDim]
	v := w.v[:n*kvDim]
	d.mm(&a.wq, qf, h, n)
	d.mm(&a.wk, k, h, n)
	d.mm(&a.wv, v, h, n)

	q := qf
	if a.gated {
		// per head: [query (hd) | gate (hd)]
		q = w.q[:n*qDim]
		gate := w.gate[:n*qDim]
		for r := 0; r < n*a.heads; r++ {
			copy(q[r*hd:(r+1)*hd], qf[2*r*hd:(2*r+1)*hd])
			copy(gate[r*hd:(r+1)*hd], qf[(2*r+1)*hd:(2*r+2)*hd])
		}
	}
	if a.qNorm != nil {
		rmsNormRows(q, q, a.qNorm, n*a.heads, hd, a.eps)
	}
	if a.kNorm != nil {
		rmsNormRows(k, k, a.kNorm, n*a.kvHeads, hd, a.eps)
	}

	rd := a.rope.dims
	if !w.csSet {
		for i := 0; i < n; i++ {
			a.rope.cache(w.cs[i*rd:(i+1)*rd], w.batch.Pos[i])
		}
		w.csSet = true
	}
	for i := 0; i < n; i++ {
		cs := w.cs[i*rd : (i+1)*rd]
		a.rope.apply(q[i*qDim:(i+1)*qDim], a.heads, hd, cs)
		a.rope.apply(k[i*kvDim:(i+1)*kvDim], a.kvHeads, hd, cs)
	}

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

	o := w.o[:n*qDim]
	w.att = attnJob{a: a, c: c, q: q, o: o, n: n, tasks: n * a.heads, tiled: n >= tiledQueries, scratch: w.att.scratch}
	chunks := 1
	if visible := w.base + n; w.att.tasks > 1 && w.att.tasks*visible*hd >= 1<<12 {
		chunks = min(d.pool.Threads(), w.att.tasks)
	}
	w.att.chunks = chunks
	if c.k32 != nil {
		// per-chunk scratch of the non-flash path: scores, and lanes per value dim
		w.att.scratch = growF32(w.att.scratch, chunks*(w.maxTokens+32*hd))
	}
	if chunks > 1 {
		d.pool.Run(chunks, w.attFn)
	} else {
		w.runAttention(0, 1)
	}

	if a.gated {
		gate := w.gate[:n*qDim]
		for j := range o {
			o[j] *= sigmoid(gate[j])
		}
	}
	d.mm(&a.wo, out, o, n)
}

// attnJob is the attention of one layer over one batch. Its (token, head)
// tasks are cut into chunks; a chunk runs on one worker and owns a slice of
// scratch.
type attnJob struct {
	a       *attention
	c       *kvCache
	q, o    []float32
	n       int
	tasks   int
	chunks  int
	tiled   bool
	scratch []float32
}

// runAttention computes the outputs of the task chunks [lo, hi).
func (w *work) runAttention(lo, hi int) {
	j := &w.att
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
				w.attendFP8(i, q, o, kvOff, w.acc16[t*hd:(t+1)*hd])
			case j.c.k32 != nil:
				w.attendNoFlash(i, q, o, kvOff, j.scratch[ch*per:(ch+1)*per])
			case j.tiled:
				w.attendTiled(i, q, o, kvOff)
			default:
				w.attendF16(i, q, o, kvOff, w.q16[t*hd:(t+1)*hd], w.acc16[t*hd:(t+1)*hd])
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
	for slot := 0; slot < end; slot++ {
		w.stepF16(&sm, slot, kvOff, q16, acc)
	}
	for _, j := range anc {
		w.stepF16(&sm, w.base+int(j), kvOff, q16, acc)
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
	for slot := 0; slot < end; slot++ {
		step(slot)
	}
	for _, j := range anc {
		step(w.base + int(j))
	}
	inv := sm.inverse() * c.vScale
	for d := range o {
		o[d] = acc[d] * inv
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
	mx := float32(math.Inf(-1))
	for p := range sc {
		off := slotAt(p)*dim + kvOff
		var s float32
		if tinyKQ {
			s = tinyDot(c.k32[off:off+hd], q)
		} else {
			s = dotF32(c.k32[off:off+hd], q)
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
