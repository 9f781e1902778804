package tensor

import (
	"fmt"
)

// Kernels of the model's attention paths (engine/model attention.go and
// deltanet.go), each a reproduction of a ggml-cpu loop of llama.cpp's x86
// AVX2 build whose exact operation order the model relies on for
// bit-identical logits. Where the CPU has AVX2, FMA and F16C (useSIMD) they
// run in attn_amd64.s; the plain-Go twins here give the same bits
// everywhere (attn_amd64_test.go checks each pair on random and edge
// inputs; engine/model attnkern_test.go the model paths as a whole).
// Lengths are the caller's business: the exported functions panic on
// inconsistent ones.

// AttnExpShift sets dst[i] = expf32(src[i] - m): ggml_v_expf lane by lane
// (the exponentials of ggml_vec_soft_max_f32).
func AttnExpShift(dst, src []float32, m float32) {
	sameLen("AttnExpShift", len(dst), len(src))
	nb := 0
	if useSIMD && len(src) >= 8 {
		nb = len(src) / 8
		attnExpShiftBlocks(&dst[0], &src[0], nb, m)
	}
	for i := 8 * nb; i < len(src); i++ {
		dst[i] = expf32(src[i] - m)
	}
}

// AttnScores64 sets s[l], for the 64 columns l of kt (len(q) rows of 64,
// row d holding dimension d of 64 keys), to the sequential fused chain
// c = fma(q[d], kt[d*64+l], c) from c = +0, d increasing, times scale: the
// scaled K·Q products of ggml-cpu's tiled flash attention (simd_gemm), 64
// keys at a time.
func AttnScores64(s *[64]float32, kt, q []float32, scale float32) {
	if len(kt) != 64*len(q) {
		panic(fmt.Sprintf("tensor: AttnScores64: %d key values for a %d-dim query (want 64 per dim)", len(kt), len(q)))
	}
	if useSIMD && len(q) > 0 {
		attnScores64(s, &kt[0], &q[0], len(q), scale)
		return
	}
	attnScores64Go(s, kt, q, scale)
}

func attnScores64Go(s *[64]float32, kt, q []float32, scale float32) {
	*s = [64]float32{}
	for d, qd := range q {
		row := (*[64]float32)(kt[d*64 : d*64+64])
		for l := range s {
			s[l] = fma32(qd, row[l], s[l])
		}
	}
	for l := range s {
		s[l] *= scale
	}
}

// AttnKT widens rows (at most 64) F16 key rows of hd values, stride values
// apart in k, into kt transposed: kt[d*64+r] = F16ToF32(k[r*stride+d]),
// the layout AttnScores64 reads.
func AttnKT(kt []float32, k []uint16, stride, rows, hd int) {
	if rows <= 0 {
		return
	}
	if rows > 64 || len(kt) < 64*hd || len(k) < (rows-1)*stride+hd || stride < hd {
		panic(fmt.Sprintf("tensor: AttnKT: %d rows of %d, stride %d, from %d values into %d", rows, hd, stride, len(k), len(kt)))
	}
	g, d8 := 0, 0
	if useSIMD {
		g, d8 = rows/8, hd/8
		if g > 0 && d8 > 0 {
			attnKT8(&kt[0], &k[0], 2*stride, g, d8)
		}
	}
	for r := 0; r < rows; r++ {
		d0 := 8 * d8
		if r >= 8*g {
			d0 = 0
		}
		row := k[r*stride : r*stride+hd]
		for d := d0; d < hd; d++ {
			kt[d*64+r] = f16Table[row[d]]
		}
	}
}

// AttnExpSum sets p[i] = expf32(s[i] - mx) (ggml_v_expf) for i < m (1 <= m <= 64) and
// the other lanes of the last block of eight to zero, and returns the sum
// of the blocks of eight up to m, each block's float32 hsum8 (the high four
// lanes added to the low four, then (l0+l2)+(l1+l3)) added in float64 in
// order: ggml_vec_soft_max_f32 over a row of tiled flash attention (the
// lanes past m, masked, add exact zeros).
func AttnExpSum(p, s *[64]float32, m int, mx float32) float64 {
	if m < 1 || m > 64 {
		panic(fmt.Sprintf("tensor: AttnExpSum: %d lanes (want 1 to 64)", m))
	}
	if useSIMD {
		return attnExpSum(&p[0], &s[0], m, mx)
	}
	return attnExpSumGo(p, s, m, mx)
}

func attnExpSumGo(p, s *[64]float32, m int, mx float32) float64 {
	var sum float64
	for b := 0; b < m; b += 8 {
		for i := b; i < b+8; i++ {
			p[i] = 0
			if i < m {
				p[i] = expf32(s[i] - mx)
			}
		}
		sum += float64(hsum8(p[b], p[b+1], p[b+2], p[b+3], p[b+4], p[b+5], p[b+6], p[b+7]))
	}
	return sum
}

// DeltaStep is one token of the gated delta rule for one value head, in
// the order and rounding of ggml-cpu's gated_delta_net op: S (len(k) rows
// of len(k), row j being column j of the paper's state) is scaled by eg
// (e^g), then for every row j
//
//	delta_j = (v[j] - S_j·k) * beta
//	S_j    += k * delta_j          (fused: S = fma(k, delta_j, S))
//	o[j]    = (S_j·q) * scale
//
// with the dot products in ggml_vec_dot_f32's order (see ggmlDotF32). The
// rows are independent, so each is finished before the next is read: the
// same operations as the op's whole-matrix passes, in one pass over S.
func DeltaStep(S, q, k, v []float32, eg, beta, scale float32, o []float32) {
	dk := len(k)
	if len(S) != dk*dk || len(q) != dk || len(v) != dk || len(o) != dk {
		panic(fmt.Sprintf("tensor: DeltaStep: state of %d, q %d, k %d, v %d, o %d (want %d² and %d)", len(S), len(q), dk, len(v), len(o), dk, dk))
	}
	if useSIMD && dk > 0 && dk%32 == 0 {
		if useVec512 {
			deltaStepRows2(&S[0], &k[0], &q[0], &v[0], dk, eg, beta, scale, &o[0])
		} else {
			deltaStepRows(&S[0], &k[0], &q[0], &v[0], dk, eg, beta, scale, &o[0])
		}
		return
	}
	deltaStepGo(S, q, k, v, eg, beta, scale, o)
}

func deltaStepGo(S, q, k, v []float32, eg, beta, scale float32, o []float32) {
	dk := len(k)
	for j := 0; j < dk; j++ {
		row := S[j*dk : (j+1)*dk]
		for i := range row {
			row[i] *= eg
		}
		delta := (v[j] - ggmlDotF32(row, k)) * beta
		for i := range row {
			row[i] = fma32(k[i], delta, row[i])
		}
		o[j] = ggmlDotF32(row, q) * scale
	}
}

// ggmlDotF32 is ggml_vec_dot_f32 in llama.cpp's x86 AVX2+FMA build: four
// 8-lane FMA accumulators over blocks of 32 (ggmlDotF32Blocks in SIMD, or
// its twin ggmlDotF32Lanes), ggmlReduce32, then the leftovers added one by
// one to a float32 sum as rounded products, except the last len%4, which
// are fused (GCC vectorised the others' multiplies).
func ggmlDotF32(x, y []float32) float32 { return ggmlDotF32On(x, y, useSIMD || useNEON) }

// ggmlDotF32On is ggmlDotF32 with the blocks in the SIMD kernel (simd) or
// in its plain-Go twin; tests compare the two.
func ggmlDotF32On(x, y []float32, simd bool) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 31
	var sum float32
	switch {
	case np > 0 && simd:
		sum = f32Sum(&x[0], &y[0], np/32)
	case np > 0:
		var acc [32]float32
		ggmlDotF32Lanes(x[:np], y[:np], &acc)
		sum = ggmlReduce32(&acc)
	}
	return ggmlDotF32Tail(x, y, np, sum)
}

// ggmlDotF32Tail adds the columns from np (a multiple of 32) to sum, the
// blocks' reduced lanes, as ggml_vec_dot_f32 does its leftovers.
func ggmlDotF32Tail(x, y []float32, np int, sum float32) float32 {
	n := len(x)
	tail := n - (n-np)%4
	for i := np; i < tail; i++ {
		sum += float32(x[i] * y[i])
	}
	for i := tail; i < n; i++ {
		sum = fma32(x[i], y[i], sum)
	}
	return sum
}

// ggmlDotF32Lanes is ggmlDotF32Blocks in plain Go: acc[j] = fma(x[i],
// y[i], acc[j]) for i = j mod 32, in order; len(x) is a multiple of 32.
func ggmlDotF32Lanes(x, y []float32, acc *[32]float32) {
	for i := 0; i < len(x); i += 32 {
		xx, yy := (*[32]float32)(x[i:i+32]), (*[32]float32)(y[i:i+32])
		for j := range acc {
			acc[j] = fma32(xx[j], yy[j], acc[j])
		}
	}
}

// ggmlReduce32 is GGML_F32x8_REDUCE over 4 vectors of 8 lanes (acc[j*8+l]):
// x0 += x2, x1 += x3, x0 += x1, the high half added to the low, then two
// horizontal adds.
func ggmlReduce32(acc *[32]float32) float32 {
	var x0 [8]float32
	for l := 0; l < 8; l++ {
		x0[l] = (acc[l] + acc[16+l]) + (acc[8+l] + acc[24+l])
	}
	t0, t1, t2, t3 := x0[0]+x0[4], x0[1]+x0[5], x0[2]+x0[6], x0[3]+x0[7]
	return (t0 + t1) + (t2 + t3)
}

// AttnDotF16Rows sets dst[r] to ggml_vec_dot_f16 of the F16 row r of k
// (rows stride values apart, len(q) values each) with q, whose values must
// be F16 values widened to float32 (so every product is exact): four 8-lane
// float32 accumulators over blocks of 32 (GGML_F16_STEP) reduced as
// ggmlReduce32, the leftovers added in float64 (ggml_float), the result
// rounded to float32. The one-row flash attention's K·Q scores.
func AttnDotF16Rows(dst []float32, k []uint16, stride int, q []float32) {
	hd, rows := len(q), len(dst)
	if rows == 0 {
		return
	}
	if need := (rows-1)*stride + hd; len(k) < need || stride < hd {
		panic(fmt.Sprintf("tensor: AttnDotF16Rows: %d values for %d rows of %d, stride %d", len(k), rows, hd, stride))
	}
	np := hd &^ 31
	switch {
	case np == 0:
		clear(dst)
	case useSIMD:
		attnDotF16Rows(&dst[0], &k[0], 2*stride, &q[0], np/32, rows)
	default:
		for r := range dst {
			row := k[r*stride : r*stride+np]
			var acc [32]float32
			for i := 0; i < np; i += 32 {
				for j := range acc {
					acc[j] += float32(f16Table[row[i+j]] * q[i+j])
				}
			}
			dst[r] = ggmlReduce32(&acc)
		}
	}
	if np == hd {
		return
	}
	for r := range dst {
		row := k[r*stride+np : r*stride+hd]
		sum := float64(dst[r])
		for i, h := range row {
			sum += float64(f16Table[h] * q[np+i])
		}
		dst[r] = float32(sum)
	}
}

// AttnAccF16 runs the running output of the one-row flash attention over
// len(ms) F16 value rows (stride values apart, len(acc) each): for r = 0, 1,
// ... in order, when ms[r] != 1, acc = f16(acc*ms[r]) (ggml_vec_scale_f16),
// then acc = f16(fma(F16(v row r), vs[r], acc)) (ggml_vec_mad_f16), f16(x)
// being x rounded to F16 and back (RoundF16). acc holds F16 values widened.
// A NaN rounds to a NaN of F16C's VCVTPS2PH (which keeps the payload) in
// the SIMD kernel and to ggml's soft-float NaN in the twin: NaNs match only
// as NaNs.
func AttnAccF16(acc []float32, v []uint16, stride int, ms, vs []float32) {
	rows := len(ms)
	if len(vs) != rows {
		panic(fmt.Sprintf("tensor: AttnAccF16: %d scales, %d weights", rows, len(vs)))
	}
	if rows == 0 {
		return
	}
	if need := (rows-1)*stride + len(acc); len(v) < need || stride < len(acc) {
		panic(fmt.Sprintf("tensor: AttnAccF16: %d values for %d rows of %d, stride %d", len(v), rows, len(acc), stride))
	}
	nb := 0
	if useSIMD {
		nb = len(acc) / 8
		if nb > 0 {
			attnAccF16(&acc[0], &v[0], 2*stride, &ms[0], &vs[0], rows, nb)
		}
	}
	if 8*nb < len(acc) {
		attnAccF16Go(acc[8*nb:], v[8*nb:], stride, ms, vs)
	}
}

func attnAccF16Go(acc []float32, v []uint16, stride int, ms, vs []float32) {
	for r, m := range ms {
		if m != 1 {
			for d := range acc {
				acc[d] = RoundF16(acc[d] * m)
			}
		}
		row := v[r*stride : r*stride+len(acc)]
		for d := range acc {
			acc[d] = RoundF16(fma32(f16Table[row[d]], vs[r], acc[d]))
		}
	}
}

// SiLUVec is SiLU, which now runs whole blocks of eight in AVX2
// (ggml_v_silu) itself; kept for its callers.
func SiLUVec(x []float32) { SiLU(x) }

// AttnDotF32Rows sets dst[r] to ggmlDotF32 (ggml_vec_dot_f32) of row r of k
// (rows stride values apart, len(q) values each) with q: the non-flash
// attention's K·Q scores over an F32 cache.
func AttnDotF32Rows(dst []float32, k []float32, stride int, q []float32) {
	hd, rows := len(q), len(dst)
	if rows == 0 {
		return
	}
	if need := (rows-1)*stride + hd; len(k) < need || stride < hd {
		panic(fmt.Sprintf("tensor: AttnDotF32Rows: %d values for %d rows of %d, stride %d", len(k), rows, hd, stride))
	}
	np := hd &^ 31
	if !useSIMD || np == 0 {
		for r := range dst {
			dst[r] = ggmlDotF32(k[r*stride:r*stride+hd], q)
		}
		return
	}
	attnDotF32Rows(&dst[0], &k[0], 4*stride, &q[0], np/32, rows)
	if np == hd {
		return
	}
	tail := hd - (hd-np)%4
	for r := range dst {
		row := k[r*stride : r*stride+hd]
		sum := dst[r]
		for i := np; i < tail; i++ {
			sum += float32(row[i] * q[i])
		}
		for i := tail; i < hd; i++ {
			sum = fma32(row[i], q[i], sum)
		}
		dst[r] = sum
	}
}

// AttnMadF32 sets y[i] = fma(x[i], a, y[i]) (ggml_vec_mad_f32's fused
// step) for i < len(y).
func AttnMadF32(y, x []float32, a float32) {
	x = x[:len(y)]
	nb := 0
	if useSIMD && len(y) >= 8 {
		nb = len(y) / 8
		attnMadF32(&y[0], &x[0], nb, a)
	}
	for i := 8 * nb; i < len(y); i++ {
		y[i] = fma32(x[i], a, y[i])
	}
}

// AttnWidenF16 widens rows F16 rows of hd values, stride values apart in
// src, into dst packed (row r at dst[r*hd:]).
func AttnWidenF16(dst []float32, src []uint16, stride, rows, hd int) {
	if rows <= 0 {
		return
	}
	if len(dst) < rows*hd || len(src) < (rows-1)*stride+hd || stride < hd {
		panic(fmt.Sprintf("tensor: AttnWidenF16: %d rows of %d, stride %d, from %d values into %d", rows, hd, stride, len(src), len(dst)))
	}
	if useSIMD && hd%8 == 0 && hd > 0 {
		attnWidenF16(&dst[0], &src[0], 2*stride, rows, hd/8)
		return
	}
	for r := 0; r < rows; r++ {
		for d, h := range src[r*stride : r*stride+hd] {
			dst[r*hd+d] = f16Table[h]
		}
	}
}

// AttnMadRows is AttnMadF16Rows over F32 rows: for j = 0, 1, ... in order,
// o[d] = fma(p[j], v[j*stride+d], o[d]).
func AttnMadRows(o []float32, v []float32, stride int, p []float32) {
	if len(p) == 0 || len(o) == 0 {
		return
	}
	if need := (len(p)-1)*stride + len(o); len(v) < need || stride < len(o) {
		panic(fmt.Sprintf("tensor: AttnMadRows: %d values for %d rows of %d, stride %d", len(v), len(p), len(o), stride))
	}
	nb := 0
	if useSIMD {
		nb = len(o) / 8
		if nb > 0 {
			attnMadRows(&o[0], &v[0], 4*stride, &p[0], len(p), nb)
		}
	}
	if 8*nb < len(o) {
		attnMadRowsGo(o[8*nb:], v[8*nb:], stride, p)
	}
}

func attnMadRowsGo(o []float32, v []float32, stride int, p []float32) {
	for j, pj := range p {
		row := v[j*stride : j*stride+len(o)]
		for d := range o {
			o[d] = fma32(pj, row[d], o[d])
		}
	}
}

// AttnScores64x2 is AttnScores64 for two queries over the same keys (one
// pass over kt serves both).
func AttnScores64x2(s0, s1 *[64]float32, kt, q0, q1 []float32, scale float32) {
	if len(q1) != len(q0) {
		panic(fmt.Sprintf("tensor: AttnScores64x2: queries of %d and %d", len(q0), len(q1)))
	}
	if useSIMD && len(q0) > 0 && len(kt) == 64*len(q0) {
		attnScores64x2(s0, s1, &kt[0], &q0[0], &q1[0], len(q0), scale)
		return
	}
	AttnScores64(s0, kt, q0, scale)
	AttnScores64(s1, kt, q1, scale)
}

// AttnMadRowsx2 is AttnMadRows for two outputs with their own weights (as
// many) over the same rows.
func AttnMadRowsx2(o0, o1 []float32, v []float32, stride int, p0, p1 []float32) {
	if len(o1) != len(o0) || len(p1) != len(p0) {
		panic(fmt.Sprintf("tensor: AttnMadRowsx2: outputs of %d and %d, weights %d and %d", len(o0), len(o1), len(p0), len(p1)))
	}
	if len(p0) == 0 || len(o0) == 0 {
		return
	}
	if need := (len(p0)-1)*stride + len(o0); len(v) < need || stride < len(o0) {
		panic(fmt.Sprintf("tensor: AttnMadRowsx2: %d values for %d rows of %d, stride %d", len(v), len(p0), len(o0), stride))
	}
	nb := 0
	if useSIMD {
		nb = len(o0) / 8
		if nb > 0 {
			attnMadRowsx2(&o0[0], &o1[0], &v[0], 4*stride, &p0[0], &p1[0], len(p0), nb)
		}
	}
	if 8*nb < len(o0) {
		attnMadRowsGo(o0[8*nb:], v[8*nb:], stride, p0)
		attnMadRowsGo(o1[8*nb:], v[8*nb:], stride, p1)
	}
}

// ConvTaps is the causal depthwise convolution of one token over c
// channels and k taps (ggml_ssm_conv in llama.cpp's x86 build): out[ch] =
// the sum, from +0 and in tap order, of u_j[ch]*taps[j*c+ch] for j < k,
// where u_j is row j of the window win (k-1 rows of c) and u_{k-1} = mix.
// The first k - k%4 taps add rounded products (GCC's blocks of 4 and 8),
// the last k%4 are fused. taps is tap-major (k rows of c).
func ConvTaps(out, win, mix, taps []float32, k int) {
	c := len(out)
	if len(mix) != c || len(taps) != k*c || len(win) < (k-1)*c || k < 1 {
		panic(fmt.Sprintf("tensor: ConvTaps: %d channels, mix %d, %d taps in %d, window %d", c, len(mix), k, len(taps), len(win)))
	}
	unfused := k - k%4
	nb := 0
	if useSIMD && c >= 8 {
		nb = c / 8
		var w0 *float32
		if k > 1 {
			w0 = &win[0]
		} else {
			w0 = &mix[0] // not read
		}
		convTapsBlocks(&out[0], w0, &mix[0], &taps[0], c, k, unfused, nb)
	}
	for ch := 8 * nb; ch < c; ch++ {
		var sum float32
		for j := 0; j < k; j++ {
			u := mix[ch]
			if j < k-1 {
				u = win[j*c+ch]
			}
			if j < unfused {
				sum += float32(u * taps[j*c+ch])
			} else {
				sum = fma32(u, taps[j*c+ch], sum)
			}
		}
		out[ch] = sum
	}
}

// AttnAccE4M3 is AttnAccF16 for the FP8 cache's F32 running output: for r
// = 0, 1, ... in order, when ms[r] != 1, acc *= ms[r] (Scale); then acc +=
// float32(vs[r] * E4M3(v row r)) (AxpyE4M3), rows stride codes apart.
func AttnAccE4M3(acc []float32, v []byte, stride int, ms, vs []float32) {
	rows := len(ms)
	if len(vs) != rows {
		panic(fmt.Sprintf("tensor: AttnAccE4M3: %d scales, %d weights", rows, len(vs)))
	}
	if rows == 0 {
		return
	}
	if need := (rows-1)*stride + len(acc); len(v) < need || stride < len(acc) {
		panic(fmt.Sprintf("tensor: AttnAccE4M3: %d codes for %d rows of %d, stride %d", len(v), rows, len(acc), stride))
	}
	nb := 0
	if useSIMD {
		nb = len(acc) / 8
		if nb > 0 {
			attnAccE4M3(&acc[0], &v[0], stride, &ms[0], &vs[0], rows, nb)
		}
	}
	if 8*nb < len(acc) {
		attnAccE4M3Go(acc[8*nb:], v[8*nb:], stride, ms, vs)
	}
}

func attnAccE4M3Go(acc []float32, v []byte, stride int, ms, vs []float32) {
	for r, m := range ms {
		if m != 1 {
			for d := range acc {
				acc[d] *= m
			}
		}
		axpyE4M3(acc, v[r*stride:r*stride+len(acc)], vs[r])
	}
}
