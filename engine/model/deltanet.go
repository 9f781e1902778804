package model

import (
	"math"
	"sync"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// deltaNet is a Gated DeltaNet layer (Yang et al., "Gated Delta Networks",
// arXiv:2412.06464) as qwen35 runs it in llama.cpp (src/models/qwen35.cpp
// build_layer_attn_linear and ggml-cpu's gated_delta_net op):
//
//	mix = W_qkv x; z = W_z x; beta = sigmoid(W_b x); g = ssm_a * softplus(W_a x + dt_bias)
//	q,k,v = split(silu(causal depthwise conv of mix, kernel K)); q,k L2-normed per head
//	per value head h (q,k from key head h mod key heads, ggml's tiled broadcast;
//	llama.cpp's converter reorders the value heads so that this is Qwen's grouping):
//	  S = e^g S; S += k (beta (v - S^T k))^T; o = S^T q / sqrt(d)
//	out = W_out (rmsnorm(o) * w_norm * silu(z))
//
// ssm_a holds -exp(A_log) already (the converter stores it so).
type deltaNet struct {
	kHeads, vHeads, headDim, kernel int
	keyDim, valueDim, convDim       int
	wqkv, wz, wBeta, wAlpha, wOut   linear
	conv                            []float32 // per channel, kernel taps oldest first (ssm_conv1d [kernel, channels])
	dtBias, a                       []float32 // per value head
	norm                            []float32 // gated RMSNorm weight (head size), not zero-centred
	eps                             float32
	scale                           float32 // 1/sqrt(head size)

	convT     []float32 // conv tap-major (kernel rows of channels), for tensor.ConvTaps
	convTOnce sync.Once
}

// inputs per token that a pending tree keeps for Commit: conv input, g, beta.
func (dn *deltaNet) savedRow() int { return dn.convDim + 2*dn.vHeads }

// forward runs the layer on the normed rows h of pass p: the input
// projections and gates over every row at once, the conv and the
// recurrence sequence by sequence on its own state (deltaNet.recur), then
// the gated norm and the output projection of every row into out.
func (dn *deltaNet) forward(d *decoder, p *pass, li int, h []float32, out []float32) {
	r := p.rows
	n := p.n
	C, V, Hv := dn.convDim, dn.valueDim, dn.vHeads
	mix := r.mix[:n*C]
	z := r.z[:n*V]
	beta := r.beta[:n*Hv]
	g := r.g[:n*Hv]
	d.mm(&dn.wqkv, mix, h, n)
	d.mm(&dn.wz, z, h, n)
	d.mm(&dn.wBeta, beta, h, n)
	d.mm(&dn.wAlpha, g, h, n)
	for j := range beta {
		beta[j] = sigmoid(beta[j])
	}
	for i := 0; i < n; i++ {
		for hv := 0; hv < Hv; hv++ {
			g[i*Hv+hv] = softplus(g[i*Hv+hv]+dn.dtBias[hv]) * dn.a[hv]
		}
	}

	qkv, o := r.qkv[:n*C], r.do[:n*V]
	for _, s := range p.seqs {
		off, m := s.w.off, len(s.w.batch.Tokens)
		dn.recur(d, s, li, deltaRows{
			mix: rowsOf(mix, off, m, C), qkv: rowsOf(qkv, off, m, C),
			g: rowsOf(g, off, m, Hv), beta: rowsOf(beta, off, m, Hv), o: rowsOf(o, off, m, V),
		})
	}

	// gated RMSNorm per value head: rmsnorm(o)*w * silu(z)
	dv := dn.headDim
	for i := 0; i < n*Hv; i++ {
		or := o[i*dv : (i+1)*dv]
		zr := z[i*dv : (i+1)*dv]
		tensor.RMSNorm(or, or, dn.norm, dn.eps)
		dn.silu(d, zr)
		tensor.Mul(or, zr)
	}
	d.mm(&dn.wOut, out, o, n)
}

// deltaRows are one sequence's rows of a pass that its conv and recurrence
// read and write: the conv input (mix), g and beta in, the conv output
// (q, k, v per token) and the recurrence's output o.
type deltaRows struct {
	mix, qkv, g, beta, o []float32
}

// recur runs the conv and the gated delta rule of the batch of s, whose
// inputs are in dr: a chain on its committed state, a pending batch on
// per-node scratch (keeping its inputs for Commit).
func (dn *deltaNet) recur(d *decoder, s *state, li int, dr deltaRows) {
	w := &s.w
	n := len(w.batch.Tokens)
	C, Hv := dn.convDim, dn.vHeads
	rec := &s.rec[li]
	if !w.pending {
		dn.runChain(d, w, rec, dr, n)
		return
	}
	row := dn.savedRow()
	rec.saved = growF32(rec.saved, n*row)
	for i := 0; i < n; i++ {
		r := rec.saved[i*row : (i+1)*row]
		copy(r[:C], dr.mix[i*C:(i+1)*C])
		copy(r[C:C+Hv], dr.g[i*Hv:(i+1)*Hv])
		copy(r[C+Hv:], dr.beta[i*Hv:(i+1)*Hv])
	}
	dn.runTree(d, w, rec, dr, n)
}

// runChain advances the committed state rec through the n tokens whose
// inputs are in dr, writing each token's output to dr.o.
func (dn *deltaNet) runChain(d *decoder, w *work, rec *recurrent, dr deltaRows, n int) {
	C := dn.convDim
	for i := 0; i < n; i++ {
		dn.convToken(d, dr.qkv[i*C:(i+1)*C], rec.conv, dr.mix[i*C:(i+1)*C])
		dn.shift(rec.conv, rec.conv, dr.mix[i*C:(i+1)*C])
	}
	w.dn = deltaJob{dn: dn, rec: rec, rows: dr, n: n, chain: true}
	dn.runHeads(d, w, n)
}

// runTree computes every node of a tree batch from its parent's state (the
// committed state for a root) into per-node scratch; rec is not changed.
func (dn *deltaNet) runTree(d *decoder, w *work, rec *recurrent, dr deltaRows, n int) {
	C := dn.convDim
	win := (dn.kernel - 1) * C
	w.treeScratch(n)
	for i := 0; i < n; i++ {
		src := rec.conv
		if p := w.batch.Parent[i]; p >= 0 {
			src = w.nodeWin[int(p)*win : (int(p)+1)*win]
		}
		mix := dr.mix[i*C : (i+1)*C]
		dn.convToken(d, dr.qkv[i*C:(i+1)*C], src, mix)
		dn.shift(w.nodeWin[i*win:(i+1)*win], src, mix)
	}
	w.dn = deltaJob{dn: dn, rec: rec, rows: dr, n: n, parent: w.batch.Parent}
	dn.runHeads(d, w, n)
}

// replay commits the nodes in path of a pending tree: it runs their saved
// inputs as a chain on the committed state, which gives the same state as
// the tree pass computed for the path's last node. It runs in the state's
// own rows (the pass that made the tree may have used the decoder's).
func (dn *deltaNet) replay(d *decoder, s *state, li int, path []int) {
	w := &s.w
	rec := &s.rec[li]
	n := len(path)
	C, Hv, row := dn.convDim, dn.vHeads, dn.savedRow()
	w.rowBufs.grow(w.ws, n)
	dr := deltaRows{mix: w.mix[:n*C], qkv: w.qkv[:n*C], g: w.g[:n*Hv], beta: w.beta[:n*Hv], o: w.do[:n*dn.valueDim]}
	for k, idx := range path {
		r := rec.saved[idx*row : (idx+1)*row]
		copy(dr.mix[k*C:(k+1)*C], r[:C])
		copy(dr.g[k*Hv:(k+1)*Hv], r[C:C+Hv])
		copy(dr.beta[k*Hv:(k+1)*Hv], r[C+Hv:])
	}
	dn.runChain(d, w, rec, dr, n)
}

func (dn *deltaNet) runHeads(d *decoder, w *work, n int) {
	if n*dn.vHeads*dn.headDim*dn.headDim >= 1<<14 && dn.vHeads > 1 {
		d.pool.Run(dn.vHeads, w.dnFn)
	} else {
		w.runDelta(0, dn.vHeads)
	}
}

// convToken is the causal depthwise convolution of one token followed by
// SiLU (ggml_ssm_conv, ggml_silu) and the L2 norms of q and k: out =
// silu(sum_j conv[ch][j] * u_j) over the window u = (win..., mix).
// ggml's x86 build multiplies in blocks of 4 and 8 taps and adds in order,
// fusing only the last kernel%4 taps.
//
// With useAttnKernels, tensor.ConvTaps does the same per channel, eight
// channels at a time, over the taps transposed once (convT).
func (dn *deltaNet) convToken(d *decoder, out, win, mix []float32) {
	K, C := dn.kernel, dn.convDim
	if useAttnKernels {
		dn.convTOnce.Do(dn.transposeConv)
		tensor.ConvTaps(out[:C], win[:(K-1)*C], mix[:C], dn.convT, K)
	} else {
		unfused := K - K%4
		for ch := 0; ch < C; ch++ {
			taps := dn.conv[ch*K : (ch+1)*K]
			var sum float32
			for j := 0; j < K; j++ {
				u := mix[ch]
				if j < K-1 {
					u = win[j*C+ch]
				}
				if j < unfused {
					sum += float32(u * taps[j])
				} else {
					sum = fma32(u, taps[j], sum)
				}
			}
			out[ch] = sum
		}
	}
	dn.silu(d, out)
	dk := dn.headDim
	for hd := 0; hd < 2*dn.kHeads; hd++ { // q heads, then k heads
		l2Norm(out[hd*dk:(hd+1)*dk], dn.eps)
	}
}

// silu is d.silu.
func (dn *deltaNet) silu(d *decoder, x []float32) { d.silu(x) }

// transposeConv fills convT: the taps tap-major.
func (dn *deltaNet) transposeConv() {
	K, C := dn.kernel, dn.convDim
	dn.convT = make([]float32, K*C)
	for ch := 0; ch < C; ch++ {
		for j := 0; j < K; j++ {
			dn.convT[j*C+ch] = dn.conv[ch*K+j]
		}
	}
}

// shift writes the window after a token: the last K-2 rows of src, then mix.
func (dn *deltaNet) shift(dst, src, mix []float32) {
	C := dn.convDim
	rows := dn.kernel - 1
	if rows == 0 {
		return
	}
	copy(dst[:(rows-1)*C], src[C:rows*C])
	copy(dst[(rows-1)*C:rows*C], mix)
}

// deltaJob is the recurrence of one layer over one batch, split by value
// head between workers.
type deltaJob struct {
	dn     *deltaNet
	rec    *recurrent
	rows   deltaRows
	n      int
	chain  bool
	parent []int32
}

func (w *work) runDelta(lo, hi int) {
	j := &w.dn
	dn := j.dn
	dk, Hv, C := dn.headDim, dn.vHeads, dn.convDim
	size := dk * dk
	for hv := lo; hv < hi; hv++ {
		kh := hv % dn.kHeads
		delta := w.delta[hv*dk : (hv+1)*dk]
		for i := 0; i < j.n; i++ {
			var S []float32
			if j.chain {
				S = j.rec.s[hv*size : (hv+1)*size]
			} else {
				S = w.nodeS[(i*Hv+hv)*size : (i*Hv+hv+1)*size]
				src := j.rec.s[hv*size : (hv+1)*size]
				if p := j.parent[i]; p >= 0 {
					src = w.nodeS[(int(p)*Hv+hv)*size : (int(p)*Hv+hv+1)*size]
				}
				copy(S, src)
			}
			row := j.rows.qkv[i*C : (i+1)*C]
			q := row[kh*dk : (kh+1)*dk]
			k := row[dn.keyDim+kh*dk : dn.keyDim+(kh+1)*dk]
			v := row[2*dn.keyDim+hv*dk : 2*dn.keyDim+(hv+1)*dk]
			o := j.rows.o[(i*Hv+hv)*dk : (i*Hv+hv+1)*dk]
			dn.step(S, q, k, v, j.rows.g[i*Hv+hv], j.rows.beta[i*Hv+hv], o, delta)
		}
	}
}

// step is one token of the gated delta rule for one value head, in the
// order and rounding of ggml-cpu's gated_delta_net op. S is d_v rows of d_k
// (row j is column j of the paper's S).
//
// With useAttnKernels, tensor.DeltaStep does the same operations row by
// row in one pass (AVX2 where the CPU has it).
func (dn *deltaNet) step(S, q, k, v []float32, g, beta float32, o, delta []float32) {
	if useAttnKernels {
		tensor.DeltaStep(S, q, k, v, expf(g), beta, dn.scale, o)
		return
	}
	dk := dn.headDim
	tensor.Scale(S, expf(g))
	for j := 0; j < dk; j++ {
		delta[j] = (v[j] - tensor.Dot(S[j*dk:(j+1)*dk], k)) * beta
	}
	for j := 0; j < dk; j++ {
		madF32(S[j*dk:(j+1)*dk], k, delta[j])
	}
	for j := 0; j < dk; j++ {
		o[j] = tensor.Dot(S[j*dk:(j+1)*dk], q) * dn.scale
	}
}

func deltaScale(headDim int) float32 {
	return 1 / float32(math.Sqrt(float64(headDim)))
}
