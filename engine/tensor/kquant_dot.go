package tensor

import "encoding/binary"

// The K-quant (and IQ4_XS) dot products with Q8_K activations, as ggml's
// AVX2 kernels compute them. Each kernel keeps eight 32-bit integer lanes
// per super-block; lane l sums, over the eight 32-value chunks c of the
// block, scale(c, l) * (w*x summed over values 32c+4l .. 32c+4l+3), where
// scale is that of the 16 (or 32) values the four belong to. Integer sums
// are exact whatever their order, so only the lanes' assignment matters;
// the F32 steps (one fused multiply-add per lane and super-block, the
// minimums, the final hsum_float_8) are spelled out per type.

// kLanes computes the eight lanes of one super-block from its 256 integer
// weight values w, its 16 scales (one per 16 values) and the activations.
func kLanes(s *[8]int32, w *[qkK]int8, sc *[16]int32, x *[qkK]int8) {
	*s = [8]int32{}
	for c := 0; c < 8; c++ {
		for l := 0; l < 8; l++ {
			e := 32*c + 4*l
			p := int32(w[e])*int32(x[e]) + int32(w[e+1])*int32(x[e+1]) +
				int32(w[e+2])*int32(x[e+2]) + int32(w[e+3])*int32(x[e+3])
			s[l] += sc[e/16] * p
		}
	}
}

// unpackQ4K writes a Q4_K (or, with qh, Q5_K) block's 256 unsigned values,
// its scales per 16 values and its 8 mins.
func unpackQ45K(w *[qkK]int8, sc *[16]int32, mins *[8]int32, scales, qh, q []byte) {
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, scales)
		sc[2*j], sc[2*j+1], mins[j] = int32(s), int32(s), int32(m)
	}
	for j := 0; j < 4; j++ {
		for l := 0; l < 32; l++ {
			lo, hi := q[32*j+l]&0xF, q[32*j+l]>>4
			if qh != nil {
				lo |= (qh[l] >> (2 * j) & 1) << 4
				hi |= (qh[l] >> (2*j + 1) & 1) << 4
			}
			w[64*j+l], w[64*j+32+l] = int8(lo), int8(hi)
		}
	}
}

// dotQ4K is ggml_vec_dot_q4_K_q8_K (AVX2).
func dotQ4K(row []byte, act []q8KAct) float32 { return dotQ45K(row, act, false) }

// dotQ5K is ggml_vec_dot_q5_K_q8_K (AVX2).
func dotQ5K(row []byte, act []q8KAct) float32 { return dotQ45K(row, act, true) }

func dotQ45K(row []byte, act []q8KAct, five bool) float32 {
	bb := q4KBytes
	if five {
		bb = q5KBytes
	}
	var acc laneAcc
	var accM [4]float32 // Q4_K: the minimums' four lanes
	var summs float32   // Q5_K: the minimums' scalar
	var w [qkK]int8
	var sc [16]int32
	var sc8 [8]int32
	var mins [8]int32
	var s [8]int32
	for b := range act[:len(row)/bb] {
		blk, a := row[b*bb:(b+1)*bb], &act[b]
		d := a.d * f16At(blk)
		dmin := -a.d * f16At(blk[2:])
		if five {
			unpackQ45K(&w, &sc, &mins, blk[4:16], blk[16:48], blk[48:176])
		} else {
			q4KScales(blk[4:16], &sc8, &mins)
		}
		// _mm_hadd_epi16 of the bsums: sums per 32 values; _mm_madd_epi16
		// with the mins: pairs of them.
		var prod [4]int32
		for k := 0; k < 4; k++ {
			s0 := int32(a.bsums[4*k]) + int32(a.bsums[4*k+1])
			s1 := int32(a.bsums[4*k+2]) + int32(a.bsums[4*k+3])
			prod[k] = mins[2*k]*s0 + mins[2*k+1]*s1
		}
		if five {
			summs = fmaF(dmin, float32((prod[0]+prod[1])+(prod[2]+prod[3])), summs)
			kLanes(&s, &w, &sc, &a.q)
		} else {
			for k := range accM {
				accM[k] = fmaF(dmin, float32(prod[k]), accM[k])
			}
			q4kLanes(blk[16:144], &a.q, &sc8, &s)
		}
		acc.step(d, &s)
	}
	if five {
		return acc.sum() + summs
	}
	return acc.sum() + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
}

// dotQ6K is ggml_vec_dot_q6_K_q8_K (AVX2): unsigned 6-bit values, the
// offset of 32 taken off the lanes at the end as 32*sum(bsums*scales) by
// lane pairs.
func dotQ6K(row []byte, act []q8KAct) float32 {
	var acc laneAcc
	var sc [16]int32
	var scv [64]int32
	var s [8]int32
	for b := range act[:len(row)/q6KBytes] {
		blk, a := row[b*q6KBytes:(b+1)*q6KBytes], &act[b]
		ql, qh, scales := blk[0:128], blk[128:192], blk[192:208]
		d := a.d * f16At(blk[208:])
		for i := range sc {
			sc[i] = int32(int8(scales[i]))
		}
		for c := 0; c < 8; c++ { // lanes 0-3 of a chunk are its first 16 values
			lo, hi := sc[2*c], sc[2*c+1]
			scv[8*c], scv[8*c+1], scv[8*c+2], scv[8*c+3] = lo, lo, lo, lo
			scv[8*c+4], scv[8*c+5], scv[8*c+6], scv[8*c+7] = hi, hi, hi, hi
		}
		q6kLanes(ql, qh, &a.q, &scv, &s)
		for m := 0; m < 8; m++ {
			s[m] -= (int32(a.bsums[2*m])*sc[2*m] + int32(a.bsums[2*m+1])*sc[2*m+1]) << 5
		}
		acc.step(d, &s)
	}
	return acc.sum()
}

// dotQ2K is ggml_vec_dot_q2_K_q8_K (AVX2): the minimums go into the same
// lanes first (mins times bsums by pairs), then the scaled values.
func dotQ2K(row []byte, act []q8KAct) float32 {
	var acc laneAcc
	for b := range act[:len(row)/q2KBytes] {
		q2KStep(&acc, row[b*q2KBytes:(b+1)*q2KBytes], &act[b])
	}
	return acc.sum()
}

// q2KStep is one Q2_K block's step of dotQ2K's lanes.
func q2KStep(acc *laneAcc, blk []byte, a *q8KAct) {
	var w [qkK]int8
	var sc [16]int32
	var s [8]int32
	scales, q := blk[0:16], blk[16:80]
	d := a.d * f16At(blk[80:])
	dmin := -a.d * f16At(blk[82:])
	var prod [8]int32
	for l := 0; l < 8; l++ {
		prod[l] = int32(scales[2*l]>>4)*int32(a.bsums[2*l]) + int32(scales[2*l+1]>>4)*int32(a.bsums[2*l+1])
	}
	acc.step(dmin, &prod)
	for i := range sc {
		sc[i] = int32(scales[i] & 0xF)
	}
	for j := 0; j < 2; j++ {
		for v := 0; v < 4; v++ {
			for p := 0; p < 32; p++ {
				w[128*j+32*v+p] = int8(q[32*j+p] >> (2 * v) & 3)
			}
		}
	}
	kLanes(&s, &w, &sc, &a.q)
	acc.step(d, &s)
}

// dotQ3K is ggml_vec_dot_q3_K_q8_K (AVX2).
func dotQ3K(row []byte, act []q8KAct) float32 {
	var acc laneAcc
	for b := range act[:len(row)/q3KBytes] {
		q3KStep(&acc, row[b*q3KBytes:(b+1)*q3KBytes], &act[b])
	}
	return acc.sum()
}

// q3KStep is one Q3_K block's step of dotQ3K's lanes.
func q3KStep(acc *laneAcc, blk []byte, a *q8KAct) {
	var w [qkK]int8
	var sc [16]int32
	var s [8]int32
	hm, q := blk[0:32], blk[32:96]
	d := a.d * f16At(blk[108:])
	s6 := q3KScales(blk[96:108])
	for i := range sc {
		sc[i] = int32(s6[i]) - 32
	}
	for j := 0; j < 2; j++ {
		for v := 0; v < 4; v++ {
			bit := uint(4*j + v)
			for p := 0; p < 32; p++ {
				x := int8(q[32*j+p] >> (2 * v) & 3)
				if hm[p]>>bit&1 == 0 {
					x -= 4
				}
				w[128*j+32*v+p] = x
			}
		}
	}
	kLanes(&s, &w, &sc, &a.q)
	acc.step(d, &s)
}

// dotIQ4XS is ggml_vec_dot_iq4_xs_q8_K (AVX2), which llama.cpp runs for
// one to seven vectors. From eight (on matrices whose rows are a multiple
// of 8) it takes its IQP panels instead (ggml-cpu/iqp.cpp: the whole
// super-block's integer sum, one fused multiply-add per super-block, no
// lanes), other bits; MatMul keeps this arithmetic for any number of
// vectors (docs/performance/kquants.md, "Exactness").
func dotIQ4XS(row []byte, act []q8KAct) float32 {
	var acc laneAcc
	for b := range act[:len(row)/iq4XSBytes] {
		iq4XSStep(&acc, row[b*iq4XSBytes:(b+1)*iq4XSBytes], &act[b])
	}
	return acc.sum()
}

// iq4XSStep is one IQ4_XS block's step of dotIQ4XS's lanes.
func iq4XSStep(acc *laneAcc, blk []byte, a *q8KAct) {
	var w [qkK]int8
	var sc [16]int32
	var s [8]int32
	sh := binary.LittleEndian.Uint16(blk[2:])
	sl, qs := blk[4:8], blk[8:136]
	for ib := 0; ib < 8; ib++ {
		ls := int32(sl[ib/2]>>(4*(ib%2))&0xF) | int32(sh>>(2*ib)&3)<<4
		sc[2*ib], sc[2*ib+1] = ls-32, ls-32
		q := qs[16*ib:]
		for j := 0; j < 16; j++ {
			w[32*ib+j], w[32*ib+16+j] = kvaluesIQ4NL[q[j]&0xF], kvaluesIQ4NL[q[j]>>4]
		}
	}
	kLanes(&s, &w, &sc, &a.q)
	acc.step(f16At(blk)*a.d, &s)
}

// llama.cpp's CPU backend repacks Q4_0, IQ4_NL and Q4_K matrices whose row
// count is a multiple of 8 into blocks of eight interleaved rows on CPUs
// with AVX2 (ggml-cpu/repack.cpp: block_q4_0x8, block_iq4_nlx8,
// block_q4_Kx8), and multiplies them with its gemv/gemm kernels
// (ggml-cpu/arch/x86/repack.cpp), which keep one F32 accumulator per
// output: per block, acc = fma(float(integer dot of the block), d_w*d_x,
// acc); Q4_K's minimums in a second accumulator, subtracted at the end.
// The activations are quantized to the same values as for vec_dot.
// MatMul follows that arithmetic for those matrices (repackedAVX2), so
// that the tokens match llama.cpp's AVX2 build. Q4_0 and IQ4_NL's gemm
// (four vectors at a time, the n % 4 left over through gemv) has the
// gemv's arithmetic; Q4_K's gemm does not: it adds to the accumulators
// once per 64 values (per pair of sub-blocks, four fused multiply-adds a
// super-block) where the gemv adds once per super-block. MatMul keeps
// the gemv's at every number of vectors, so that a sequence's bits do not
// depend on its batch; llama.cpp's prompt batches part from it there
// (docs/performance/kquants.md, "Exactness").
func repackedAVX2(t DType, rows int) bool {
	return rows%8 == 0 && (t == Q4_0 || t == IQ4_NL || t == Q4_K)
}

// dotLegacyRepacked is gemv_q4_b32_8x8_q8_0_lut_avx's arithmetic for one
// row (Q4_0, IQ4_NL).
func dotLegacyRepacked(t DType, row []byte, act []q8Act) float32 {
	bb := t.BlockBytes()
	var w [32]int8
	var acc float32
	for b := range act[:len(row)/bb] {
		blk := row[b*bb : (b+1)*bb]
		unpackLegacy(t, &w, blk)
		var s int32
		for j := range w {
			s += int32(w[j]) * int32(act[b].q[j])
		}
		acc = fmaF(float32(s), f16At(blk)*act[b].d, acc)
	}
	return acc
}

// dotQ4KRepacked is ggml_gemv_q4_K_8x8_q8_K's arithmetic for one row
// (not its gemm's: see above).
func dotQ4KRepacked(row []byte, act []q8KAct) float32 {
	var sc, mins [8]int32
	var lanes [8]int32
	var acc, accMin float32
	for b := range act[:len(row)/q4KBytes] {
		blk, a := row[b*q4KBytes:(b+1)*q4KBytes], &act[b]
		q4KScales(blk[4:16], &sc, &mins)
		q4kLanes(blk[16:144], &a.q, &sc, &lanes)
		var s, sm int32
		for j := 0; j < 8; j++ {
			s += lanes[j] // the lanes' sum is the sub-blocks' scaled sum
			sm += mins[j] * (int32(a.bsums[2*j]) + int32(a.bsums[2*j+1]))
		}
		acc = fmaF(float32(s), f16At(blk)*a.d, acc)
		accMin = fmaF(float32(sm), f16At(blk[2:])*a.d, accMin)
	}
	return acc - accMin
}

// q4kLanesGo is the integer core of the Q4_K products: the eight lanes of
// one super-block (q: its 128 quant bytes) with the chunks' scales sc.
// The twin of q4kLanesAVX2.
func q4kLanesGo(q []byte, x *[qkK]int8, sc *[8]int32, s *[8]int32) {
	q = q[:128]
	*s = [8]int32{}
	for j := 0; j < 4; j++ {
		for l := 0; l < 8; l++ {
			var lo, hi int32
			for t := 0; t < 4; t++ {
				b := q[32*j+4*l+t]
				lo += int32(b&0xF) * int32(x[64*j+4*l+t])
				hi += int32(b>>4) * int32(x[64*j+32+4*l+t])
			}
			s[l] += sc[2*j]*lo + sc[2*j+1]*hi
		}
	}
}

// q6kLanesGo is the integer core of the Q6_K product, the values taken
// unsigned (0..63). The twin of q6kLanesAVX2.
func q6kLanesGo(ql, qh []byte, x *[qkK]int8, scv *[64]int32, s *[8]int32) {
	ql, qh = ql[:128], qh[:64]
	*s = [8]int32{}
	for n := 0; n < 2; n++ {
		l4, h4 := ql[64*n:], qh[32*n:]
		for l := 0; l < 8; l++ {
			var p [4]int32
			for t := 0; t < 4; t++ {
				i := 4*l + t
				xs := x[128*n+i:]
				p[0] += int32(l4[i]&0xF|(h4[i]&3)<<4) * int32(xs[0])
				p[1] += int32(l4[i+32]&0xF|(h4[i]>>2&3)<<4) * int32(xs[32])
				p[2] += int32(l4[i]>>4|(h4[i]>>4&3)<<4) * int32(xs[64])
				p[3] += int32(l4[i+32]>>4|(h4[i]>>6&3)<<4) * int32(xs[96])
			}
			for k := 0; k < 4; k++ {
				s[l] += scv[8*(4*n+k)+l] * p[k]
			}
		}
	}
}

// q4KScales decodes a Q4_K block's 6-bit scales and mins.
func q4KScales(scales []byte, sc, mins *[8]int32) {
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, scales)
		sc[j], mins[j] = int32(s), int32(m)
	}
}

// q4kDotsGo gives, for one Q4_K block (q: its 128 quant bytes) and the n
// activation blocks act[0], act[stride], ..., the integer sums of the
// repacked arithmetic: out[v] = sum over the 8 sub-blocks c of sc[c] *
// (w*x over c's 32 values). The twin of q4kDotsAVX2, which unpacks the
// block once for all n.
func q4kDotsGo(q []byte, act []q8KAct, stride, n int, sc *[8]int16, out []int32) {
	q = q[:128]
	for v := 0; v < n; v++ {
		x := &act[v*stride].q
		var s int32
		for j := 0; j < 4; j++ {
			var lo, hi int32
			for k := 0; k < 32; k++ {
				b := q[32*j+k]
				lo += int32(b&0xF) * int32(x[64*j+k])
				hi += int32(b>>4) * int32(x[64*j+32+k])
			}
			s += int32(sc[2*j])*lo + int32(sc[2*j+1])*hi
		}
		out[v] = s
	}
}

// q4KRepackedRows computes rows [lo,hi) of a repacked Q4_K product for all
// j.n vectors, with dotQ4KRepacked's bits: one vector a whole row per call
// (dotQ4KRepackedRow); several, eight rows at a time against groups of up
// to q4kTileVectors vectors in a register tile (q4kTile), and rows past
// the last group of eight each weight block decoded once for all vectors
// (q4kStep).
func (j *mmJob) q4KRepackedRows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/qkK, m.rowBytes()
	if n == 1 { // decode: whole rows in one call
		for r := lo; r < hi; r++ {
			j.dst[r] = dotQ4KRepackedRow(m.Data[r*rb:(r+1)*rb], j.actK[:nb])
		}
		return
	}
	acc := growF32(&j.kAcc[worker], max(2*n, 16*min(n, q4kTileVectors)))
	r := lo
	if useSIMD {
		rbuf := growI32(&j.kSum[worker], 64*min(n, q4kTileVectors))
		for ; r+8 <= hi; r += 8 {
			w := m.Data[r*rb : (r+8)*rb]
			for v0 := 0; v0 < n; v0 += q4kTileVectors {
				g := min(q4kTileVectors, n-v0)
				a := acc[:16*g]
				clear(a)
				q4kTile(w, rb, j.actK[v0*nb:], nb, nb, g, rbuf, a)
				for v := 0; v < g; v++ {
					out := j.dst[(v0+v)*m.Rows+r : (v0+v)*m.Rows+r+8]
					for i := range out {
						out[i] = a[16*v+i] - a[16*v+8+i]
					}
				}
			}
		}
	}
	var sm [4]uint32
	for ; r < hi; r++ {
		acc := acc[:2*n]
		clear(acc)
		row := m.Data[r*rb : (r+1)*rb]
		for b := 0; b < nb; b++ {
			blk := row[b*q4KBytes : (b+1)*q4KBytes]
			q4KScaleBytes(blk[4:16], &sm)
			q4kStep(blk[16:144], j.actK[b:], nb, n, &sm, f16At(blk), f16At(blk[2:]), acc)
		}
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = acc[2*v] - acc[2*v+1]
		}
	}
}

// q4kTileVectors is how many vectors one q4kTile call takes: their lanes
// (256 bytes each) and accumulators stay in the core's first-level cache.
const q4kTileVectors = 32

// q4KScaleBytes unpacks a Q4_K block's twelve scale bytes as ggml's
// kernels do (the utmp shuffle): bytes 0-7 of sm the eight 6-bit scales,
// bytes 8-15 the eight mins; scaleMinK4 gives the same values one at a
// time.
func q4KScaleBytes(s []byte, sm *[4]uint32) {
	const kmask1, kmask2, kmask3 = 0x3f3f3f3f, 0x0f0f0f0f, 0x03030303
	u0, u1, u2 := binary.LittleEndian.Uint32(s[0:]), binary.LittleEndian.Uint32(s[4:]), binary.LittleEndian.Uint32(s[8:12])
	sm[3] = (u2>>4)&kmask2 | ((u1>>6)&kmask3)<<4
	sm[2] = u1 & kmask1
	sm[1] = u2&kmask2 | ((u0>>6)&kmask3)<<4
	sm[0] = u0 & kmask1
}

// q4kStepGo is one repacked Q4_K block's step against n activation blocks
// (act[0], act[stride], ...): acc[2v] and acc[2v+1] are vector v's
// accumulators of dotQ4KRepacked; sm as q4KScaleBytes leaves it. The twin
// of q4kStepAVX2.
func q4kStepGo(q []byte, act []q8KAct, stride, n int, sm *[4]uint32, dW, dminW float32, acc []float32) {
	var sc [8]int16
	var mins [8]int32
	for i := 0; i < 8; i++ {
		sc[i] = int16(sm[i/4] >> (8 * (i % 4)) & 0xFF)
		mins[i] = int32(sm[2+i/4] >> (8 * (i % 4)) & 0xFF)
	}
	var sums [1]int32
	for v := 0; v < n; v++ {
		a := &act[v*stride]
		q4kDotsGo(q, act[v*stride:], 1, 1, &sc, sums[:])
		var s int32
		for k := 0; k < 8; k++ {
			s += mins[k] * (int32(a.bsums[2*k]) + int32(a.bsums[2*k+1]))
		}
		acc[2*v] = fmaF(float32(sums[0]), dW*a.d, acc[2*v])
		acc[2*v+1] = fmaF(float32(s), dminW*a.d, acc[2*v+1])
	}
}

func growF32(s *[]float32, n int) []float32 {
	if cap(*s) < n {
		*s = make([]float32, n)
	}
	return (*s)[:n]
}

func growI32(s *[]int32, n int) []int32 {
	if cap(*s) < n {
		*s = make([]int32, n)
	}
	return (*s)[:n]
}

// q6kStepGo is one Q6_K block's step of dotQ6K against n activation
// blocks (act[0], act[stride], ...): acc[8v:8v+8] are vector v's lanes;
// sc holds the block's 16 int8 scales. scratch is the kernel's (unused
// here). The twin of q6kStepAVX2.
func q6kStepGo(ql, qh, sc []byte, act []q8KAct, stride, n int, scratch *[144]int16, dW float32, acc []float32) {
	var lv [64]int32
	var s [8]int32
	var s16 [16]int32
	for i := range s16 {
		s16[i] = int32(int8(sc[i]))
	}
	for c := 0; c < 8; c++ { // lanes 0-3 of a chunk are its first 16 values
		for l := 0; l < 8; l++ {
			lv[8*c+l] = s16[2*c+l/4]
		}
	}
	for v := 0; v < n; v++ {
		a := &act[v*stride]
		q6kLanesGo(ql, qh, &a.q, &lv, &s)
		for m := 0; m < 8; m++ {
			s[m] -= (int32(a.bsums[2*m])*s16[2*m] + int32(a.bsums[2*m+1])*s16[2*m+1]) << 5
		}
		la := (*laneAcc)(acc[8*v : 8*v+8])
		la.step(a.d*dW, &s)
	}
}

// q6KRows computes rows [lo,hi) of a Q6_K product for all j.n vectors,
// with dotQ6K's bits: one vector a whole row per call (dotQ6KRow);
// several, two rows at a time in a register tile where the CPU has
// AVX-512 (q6kTile), else (and a last odd row) each weight block decoded
// once for all vectors (q6kStep).
func (j *mmJob) q6KRows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/qkK, m.rowBytes()
	if n == 1 { // decode: whole rows in one call
		for r := lo; r < hi; r++ {
			j.dst[r] = dotQ6KRow(m.Data[r*rb:(r+1)*rb], j.actK[:nb])
		}
		return
	}
	acc := growF32(&j.kAcc[worker], 16*n)
	r := lo
	if useTile512 {
		for ; r+2 <= hi; r += 2 {
			clear(acc)
			q6kTile(m.Data[r*rb:(r+2)*rb], rb, j.actK, nb, nb, n, acc)
			for v := 0; v < n; v++ {
				j.dst[v*m.Rows+r] = (*laneAcc)(acc[16*v : 16*v+8]).sum()
				j.dst[v*m.Rows+r+1] = (*laneAcc)(acc[16*v+8 : 16*v+16]).sum()
			}
		}
	}
	var scratch [144]int16
	for ; r < hi; r++ {
		acc := acc[:8*n]
		clear(acc)
		row := m.Data[r*rb : (r+1)*rb]
		for b := 0; b < nb; b++ {
			blk := row[b*q6KBytes : (b+1)*q6KBytes]
			q6kStep(blk[0:128], blk[128:192], blk[192:208], j.actK[b:], nb, n, &scratch, f16At(blk[208:]), acc)
		}
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = (*laneAcc)(acc[8*v : 8*v+8]).sum()
		}
	}
}

// q5KRows computes rows [lo,hi) of a Q5_K product for several vectors,
// two rows at a time in a register tile (q5kTile: AVX-512 or AVX2), with
// dotQ5K's bits; a last odd row goes vector by vector.
func (j *mmJob) q5KRows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/qkK, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 32*n)
	r := lo
	for ; r+2 <= hi; r += 2 {
		clear(acc)
		q5kTile(m.Data[r*rb:(r+2)*rb], rb, j.actK, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = (*laneAcc)(acc[32*v:32*v+8]).sum() + acc[32*v+16]
			j.dst[v*m.Rows+r+1] = (*laneAcc)(acc[32*v+8:32*v+16]).sum() + acc[32*v+20]
		}
	}
	for ; r < hi; r++ {
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dotQ5KRow(m.Data[r*rb:(r+1)*rb], j.actK[v*nb:(v+1)*nb])
		}
	}
}

// q2KRows computes rows [lo,hi) of a Q2_K product for several vectors,
// two rows at a time in a register tile (q2kTile: AVX-512 or AVX2), with
// dotQ2K's bits; a last odd row goes vector by vector.
func (j *mmJob) q2KRows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/qkK, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 16*n)
	r := lo
	for ; r+2 <= hi; r += 2 {
		clear(acc)
		q2kTile(m.Data[r*rb:(r+2)*rb], rb, j.actK, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = (*laneAcc)(acc[16*v : 16*v+8]).sum()
			j.dst[v*m.Rows+r+1] = (*laneAcc)(acc[16*v+8 : 16*v+16]).sum()
		}
	}
	for ; r < hi; r++ {
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dotQ2KRow(m.Data[r*rb:(r+1)*rb], j.actK[v*nb:(v+1)*nb])
		}
	}
}
