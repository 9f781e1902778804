package tensor

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// The dot-product kernels. Every function here computes each (row, vector)
// dot product in one fixed order, whatever the number of vectors handled at
// once, so that MatMul's results equal MatVec's bit for bit. The orders are
// those of ggml's x86 kernels (AVX2 with FMA), so that results match
// llama.cpp on x86 bit for bit where llama.cpp itself is consistent:
//
// Float types (F32, F16, BF16; tinyBLAS<8,__m256>, llamafile's sgemm, which
// ggml uses for two or more vectors): eight lanes, lane k accumulating the
// columns j with j%8 == k in increasing j as acc = fma(w, x, acc), then
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) (hsum). For F16 and BF16 every
// product is exact in F32, so the fused step is a plain add of float32(w*x);
// F32 products are not, and the fma is computed exactly (see midpoint).
// ggml's single-vector kernels (ggml_vec_dot_f16 and _f32) use 32 lanes
// instead, so for one vector llama.cpp's float results differ from its own
// batched ones, and from these, in the last bits.
//
// Q8_0: the order of ggml_vec_dot_q8_0_q8_0 (one vector) and tinyBLAS_Q0_AVX
// (several), which agree. Eight lanes: lane l accumulates, block after block,
// fma(d, float32(isum_l), acc_l) where d = d_w*d_x (rounded to F32) and
// isum_l is the exact integer sum of the four products of quants 4l..4l+3
// of the block; the lanes are added as above.

// f32View and u16View reinterpret little-endian weight bytes in place (the
// engine builds for little-endian machines only, see bigendian.go).
func f32View(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func u16View(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// hsum8 adds eight lanes as ggml's hsum_float_8 and tinyBLAS's hsum do.
func hsum8(a0, a1, a2, a3, a4, a5, a6, a7 float32) float32 {
	return (a0 + a4 + (a2 + a6)) + (a1 + a5 + (a3 + a7))
}

// Lane accumulators that need an exact F32 fma (F32 weights, Q8_0) are F32
// values held in float64 variables. One step acc = fma(a, b, acc) is computed
// as r = acc + a*b in float64, where a*b is exact (at most 48 significant
// bits), and then rounded to F32. That second rounding is wrong only when r
// is inexact and lands exactly halfway between two F32 values, which is rare
// (midpoint); the step is then redone with the exact fma32. The test looks
// at the bits of r below F32 precision in the normal range: it misses a
// midpoint of the F32 subnormal grid, which needs an inexact r below 2^-126
// and therefore (Sterbenz) both acc and a*b below 2^-125 in magnitude:
// never the case for Q8_0 (scales are at least 2^-24), and for F32 only with
// weights times activations around 1e-38.
const (
	midMask = 1<<29 - 1
	midHalf = 1 << 28
)

// midpoint reports whether the float64 r lies halfway between two F32 values
// (in the F32 normal range), where rounding it again may differ from
// rounding the exact sum once.
func midpoint(r float64) bool { return math.Float64bits(r)&midMask == midHalf }

// fmaStep is the exact lane step for the rare cases that need it.
func fmaStep(acc, a, b float64) float64 {
	return float64(fma32(float32(a), float32(b), float32(acc)))
}

// dotExact is the canonical float dot product for rows whose products are
// exact in F32 (F16 and BF16 values, widened): the fused step is a plain add.
func dotExact(w, x []float32) float32 {
	x = x[:len(w)]
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		ww := (*[8]float32)(w[i : i+8])
		xx := (*[8]float32)(x[i : i+8])
		a0 += float32(ww[0] * xx[0])
		a1 += float32(ww[1] * xx[1])
		a2 += float32(ww[2] * xx[2])
		a3 += float32(ww[3] * xx[3])
		a4 += float32(ww[4] * xx[4])
		a5 += float32(ww[5] * xx[5])
		a6 += float32(ww[6] * xx[6])
		a7 += float32(ww[7] * xx[7])
	}
	var t [8]float32
	for k := 0; i < len(w); i, k = i+1, k+1 {
		t[k] = float32(w[i] * x[i])
	}
	a0, a1, a2, a3 = a0+t[0], a1+t[1], a2+t[2], a3+t[3]
	a4, a5, a6, a7 = a4+t[4], a5+t[5], a6+t[6], a7+t[7]
	return hsum8(a0, a1, a2, a3, a4, a5, a6, a7)
}

// dot2Exact is dotExact(w, x0) and dotExact(w, x1) in one pass over w.
func dot2Exact(w, x0, x1 []float32) (float32, float32) {
	x0 = x0[:len(w)]
	x1 = x1[:len(w)]
	var a, b [8]float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		ww := (*[8]float32)(w[i : i+8])
		xa := (*[8]float32)(x0[i : i+8])
		xb := (*[8]float32)(x1[i : i+8])
		for k := 0; k < 8; k += 4 {
			w0, w1, w2, w3 := ww[k], ww[k+1], ww[k+2], ww[k+3]
			a[k] += float32(w0 * xa[k])
			b[k] += float32(w0 * xb[k])
			a[k+1] += float32(w1 * xa[k+1])
			b[k+1] += float32(w1 * xb[k+1])
			a[k+2] += float32(w2 * xa[k+2])
			b[k+2] += float32(w2 * xb[k+2])
			a[k+3] += float32(w3 * xa[k+3])
			b[k+3] += float32(w3 * xb[k+3])
		}
	}
	var ta, tb [8]float32
	for k := 0; i < len(w); i, k = i+1, k+1 {
		ta[k] = float32(w[i] * x0[i])
		tb[k] = float32(w[i] * x1[i])
	}
	for k := range a {
		a[k] += ta[k]
		b[k] += tb[k]
	}
	return hsum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]),
		hsum8(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
}

// dotF16 is dotExact over an F16 weight row widened on the fly; x holds
// activations already rounded to F16 values.
func dotF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	tab := f16Table
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		ww := (*[8]uint16)(w[i : i+8])
		xx := (*[8]float32)(x[i : i+8])
		a0 += float32(tab[ww[0]] * xx[0])
		a1 += float32(tab[ww[1]] * xx[1])
		a2 += float32(tab[ww[2]] * xx[2])
		a3 += float32(tab[ww[3]] * xx[3])
		a4 += float32(tab[ww[4]] * xx[4])
		a5 += float32(tab[ww[5]] * xx[5])
		a6 += float32(tab[ww[6]] * xx[6])
		a7 += float32(tab[ww[7]] * xx[7])
	}
	var t [8]float32
	for k := 0; i < len(w); i, k = i+1, k+1 {
		t[k] = float32(tab[w[i]] * x[i])
	}
	a0, a1, a2, a3 = a0+t[0], a1+t[1], a2+t[2], a3+t[3]
	a4, a5, a6, a7 = a4+t[4], a5+t[5], a6+t[6], a7+t[7]
	return hsum8(a0, a1, a2, a3, a4, a5, a6, a7)
}

// bf16 widens a bfloat16 code; the shift compiles to two instructions.
func bf16(h uint16) float32 { return BF16ToF32(h) }

// dotBF16 is dotExact over a BF16 weight row widened on the fly; x holds
// activations already rounded to BF16 values.
func dotBF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		ww := (*[8]uint16)(w[i : i+8])
		xx := (*[8]float32)(x[i : i+8])
		a0 += float32(bf16(ww[0]) * xx[0])
		a1 += float32(bf16(ww[1]) * xx[1])
		a2 += float32(bf16(ww[2]) * xx[2])
		a3 += float32(bf16(ww[3]) * xx[3])
		a4 += float32(bf16(ww[4]) * xx[4])
		a5 += float32(bf16(ww[5]) * xx[5])
		a6 += float32(bf16(ww[6]) * xx[6])
		a7 += float32(bf16(ww[7]) * xx[7])
	}
	var t [8]float32
	for k := 0; i < len(w); i, k = i+1, k+1 {
		t[k] = float32(bf16(w[i]) * x[i])
	}
	a0, a1, a2, a3 = a0+t[0], a1+t[1], a2+t[2], a3+t[3]
	a4, a5, a6, a7 = a4+t[4], a5+t[5], a6+t[6], a7+t[7]
	return hsum8(a0, a1, a2, a3, a4, a5, a6, a7)
}

// The Q8_0 lane steps fma(d, isum, acc) use the float64 scheme above: d*isum
// is exact (24 x 17 bits).

// q8Fma is the exact lane step for the rare blocks that need it.
func q8Fma(acc, d float64, s int32) float64 { return fmaStep(acc, d, float64(s)) }

// q8Hsum is hsum8 of lanes held in float64.
func q8Hsum(a0, a1, a2, a3, a4, a5, a6, a7 float64) float32 {
	return hsum8(float32(a0), float32(a1), float32(a2), float32(a3), float32(a4), float32(a5), float32(a6), float32(a7))
}

// dotQ8 is the Q8_0 dot product of one weight row with one vector, whose
// blocks are act[0], act[1], ...
func dotQ8(row []byte, act []q8Act) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float64
	act = act[:len(row)/q8BlockBytes]
	for b := range act {
		blk := row[b*q8BlockBytes : (b+1)*q8BlockBytes : (b+1)*q8BlockBytes]
		a := &act[b]
		d := float64(f16Table[binary.LittleEndian.Uint16(blk)] * a.d)
		// Two halves of four lanes keep the register pressure low.
		a0, a1, a2, a3 = q8Half(a0, a1, a2, a3, d, (*[16]byte)(blk[2:18]), (*[16]int8)(a.q[0:16]))
		a4, a5, a6, a7 = q8Half(a4, a5, a6, a7, d, (*[16]byte)(blk[18:34]), (*[16]int8)(a.q[16:32]))
	}
	return q8Hsum(a0, a1, a2, a3, a4, a5, a6, a7)
}

// q8Half does the lane steps of four lanes (16 quants) of one block.
func q8Half(a0, a1, a2, a3, d float64, q *[16]byte, x *[16]int8) (float64, float64, float64, float64) {
	s0 := int32(int8(q[0]))*int32(x[0]) + int32(int8(q[1]))*int32(x[1]) + int32(int8(q[2]))*int32(x[2]) + int32(int8(q[3]))*int32(x[3])
	s1 := int32(int8(q[4]))*int32(x[4]) + int32(int8(q[5]))*int32(x[5]) + int32(int8(q[6]))*int32(x[6]) + int32(int8(q[7]))*int32(x[7])
	s2 := int32(int8(q[8]))*int32(x[8]) + int32(int8(q[9]))*int32(x[9]) + int32(int8(q[10]))*int32(x[10]) + int32(int8(q[11]))*int32(x[11])
	s3 := int32(int8(q[12]))*int32(x[12]) + int32(int8(q[13]))*int32(x[13]) + int32(int8(q[14]))*int32(x[14]) + int32(int8(q[15]))*int32(x[15])
	r0 := a0 + d*float64(s0)
	r1 := a1 + d*float64(s1)
	r2 := a2 + d*float64(s2)
	r3 := a3 + d*float64(s3)
	if midpoint(r0) || midpoint(r1) || midpoint(r2) || midpoint(r3) {
		return q8Fma(a0, d, s0), q8Fma(a1, d, s1), q8Fma(a2, d, s2), q8Fma(a3, d, s3)
	}
	return float64(float32(r0)), float64(float32(r1)), float64(float32(r2)), float64(float32(r3))
}

// q8Pair holds one activation block of two vectors for dot2Q8: quant k of
// vector 0 plus quant k of vector 1 times 2^32, so that one 64-bit multiply
// by a weight quant yields both products. The lane sum of vector 0 (at most
// 4*128*128 in magnitude) is the sign-extended low half; vector 1's is what
// remains, shifted down.
type q8Pair struct {
	x [32]uint64
	d [2]float32
}

func packQ8Pair(p *q8Pair, a0, a1 *q8Act) {
	for k := range p.x {
		p.x[k] = uint64(int64(a0.q[k]) + int64(a1.q[k])<<32)
	}
	p.d = [2]float32{a0.d, a1.d}
}

// dot2Q8 is dotQ8 for the two vectors packed in the blocks act[0], act[1], ...
func dot2Q8(row []byte, act []q8Pair) (float32, float32) {
	var acc0, acc1 [8]float64
	act = act[:len(row)/q8BlockBytes]
	for b := range act {
		blk := row[b*q8BlockBytes : (b+1)*q8BlockBytes : (b+1)*q8BlockBytes]
		p := &act[b]
		dw := f16Table[binary.LittleEndian.Uint16(blk)]
		d0, d1 := float64(dw*p.d[0]), float64(dw*p.d[1])
		q := (*[32]byte)(blk[2:34])
		x := &p.x
		for l := 0; l < 8; l++ {
			k := 4 * l
			t := uint64(int64(int8(q[k])))*x[k] + uint64(int64(int8(q[k+1])))*x[k+1] +
				uint64(int64(int8(q[k+2])))*x[k+2] + uint64(int64(int8(q[k+3])))*x[k+3]
			lo := int64(int32(t))
			s0, s1 := int32(lo), int32((int64(t)-lo)>>32)
			r0 := acc0[l] + d0*float64(s0)
			r1 := acc1[l] + d1*float64(s1)
			if midpoint(r0) || midpoint(r1) {
				acc0[l], acc1[l] = q8Fma(acc0[l], d0, s0), q8Fma(acc1[l], d1, s1)
			} else {
				acc0[l], acc1[l] = float64(float32(r0)), float64(float32(r1))
			}
		}
	}
	return q8Hsum(acc0[0], acc0[1], acc0[2], acc0[3], acc0[4], acc0[5], acc0[6], acc0[7]),
		q8Hsum(acc1[0], acc1[1], acc1[2], acc1[3], acc1[4], acc1[5], acc1[6], acc1[7])
}
