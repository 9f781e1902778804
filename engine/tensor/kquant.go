package tensor

import (
	"encoding/binary"
	"math"
)

// llama.cpp's K-quant and legacy block types (ggml-common.h), decoded as
// ggml's dequantize_row_* do (ggml-quants.c), and their dot products with
// activations quantized as ggml's CPU backend quantizes them for each type
// (its vec_dot_type): Q8_0 for Q4_0, Q5_0 and IQ4_NL, Q8_1 for Q4_1 and
// Q5_1, Q8_K for the K-quants and IQ4_XS. The dot products sum in the
// order of ggml's AVX2 kernels (ggml-cpu/arch/x86/quants.c,
// ggml_vec_dot_*): integer sums per 32-bit lane (exact), one fused
// multiply-add per lane and block, ggml's hsum_float_8 at the end, and
// the scalar terms (minimums) as the compiler contracts them, into fused
// multiply-adds.
//
// Block layouts, little endian, in bytes:
//
//	Q4_0   (32 values, 18): d f16, qs[16] (value j: low nibble of qs[j], j+16: high nibble), x = d*(q-8)
//	Q4_1   (32, 20):        d f16, m f16, qs[16], x = d*q + m
//	Q5_0   (32, 22):        d f16, qh[4] (bit j: fifth bit of value j), qs[16], x = d*(q-16)
//	Q5_1   (32, 24):        d f16, m f16, qh[4], qs[16], x = d*q + m
//	Q2_K   (256, 84):       scales[16] (4-bit scale | 4-bit min << 4), qs[64], d f16, dmin f16
//	Q3_K   (256, 110):      hmask[32], qs[64], scales[12] (16 6-bit scales, -32), d f16
//	Q4_K   (256, 144):      d f16, dmin f16, scales[12] (8 6-bit scales, 8 6-bit mins), qs[128]
//	Q5_K   (256, 176):      d f16, dmin f16, scales[12], qh[32], qs[128]
//	Q6_K   (256, 210):      ql[128], qh[64], scales[16] int8, d f16
//	IQ4_NL (32, 18):        d f16, qs[16], x = d*kvaluesIQ4NL[q]
//	IQ4_XS (256, 136):      d f16, scales_h u16, scales_l[4], qs[128]
const (
	qkK = 256 // values per K-quant super-block (QK_K)

	q4_0Bytes  = 18
	q4_1Bytes  = 20
	q5_0Bytes  = 22
	q5_1Bytes  = 24
	q2KBytes   = 84
	q3KBytes   = 110
	q4KBytes   = 144
	q5KBytes   = 176
	q6KBytes   = 210
	iq4NLBytes = 18
	iq4XSBytes = 136
)

// kvaluesIQ4NL is ggml's kvalues_iq4nl: the 16 non-linear 4-bit levels.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func f16At(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j (0..7) of a Q4_K or Q5_K block's 12 scale bytes.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// q3KScales unpacks a Q3_K block's 16 6-bit scales (with the -32 offset
// not yet applied), as dequantize_row_q3_K's kmask shuffle does.
func q3KScales(s []byte) (out [16]int8) {
	for j := 0; j < 16; j++ {
		var lo, hi byte
		if j < 8 {
			lo = s[j] & 0xF
		} else {
			lo = s[j-8] >> 4
		}
		hi = (s[8+j%4] >> (2 * (j / 4))) & 3
		out[j] = int8(lo | hi<<4)
	}
	return out
}

// dequantizeBlocks decodes the legacy and K-quant types (dequantizeRow's
// cases beyond F32, F16, BF16, Q8_0 and NVFP4). The float arithmetic is
// ggml's as its reference C spells it: separate multiply and subtract
// (ggml-base is built without FMA contraction in llama.cpp's releases);
// the float32() around the minimums' products keeps Go's arm64 compiler
// from fusing them into the subtraction (the spec lets it, across
// statements).
func dequantizeBlocks(t DType, dst []float32, src []byte) {
	switch t {
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[b*q4_0Bytes:], dst[b*32:b*32+32]
			d := f16At(blk)
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				y[j] = float32(int(q&0xF)-8) * d
				y[j+16] = float32(int(q>>4)-8) * d
			}
		}
	case Q4_1:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[b*q4_1Bytes:], dst[b*32:b*32+32]
			d, m := f16At(blk), f16At(blk[2:])
			for j := 0; j < 16; j++ {
				q := blk[4+j]
				y[j] = float32(float32(q&0xF)*d) + m
				y[j+16] = float32(float32(q>>4)*d) + m
			}
		}
	case Q5_0:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[b*q5_0Bytes:], dst[b*32:b*32+32]
			d := f16At(blk)
			qh := binary.LittleEndian.Uint32(blk[2:])
			for j := 0; j < 16; j++ {
				q := blk[6+j]
				h0 := byte(qh>>j<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				y[j] = float32(int(q&0xF|h0)-16) * d
				y[j+16] = float32(int(q>>4|h1)-16) * d
			}
		}
	case Q5_1:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[b*q5_1Bytes:], dst[b*32:b*32+32]
			d, m := f16At(blk), f16At(blk[2:])
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 16; j++ {
				q := blk[8+j]
				h0 := byte(qh>>j<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				y[j] = float32(float32(q&0xF|h0)*d) + m
				y[j+16] = float32(float32(q>>4|h1)*d) + m
			}
		}
	case IQ4_NL:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[b*iq4NLBytes:], dst[b*32:b*32+32]
			d := f16At(blk)
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				y[j] = d * float32(kvaluesIQ4NL[q&0xF])
				y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
			}
		}
	case Q2_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*q2KBytes:], dst[b*qkK:(b+1)*qkK]
			scales, q := blk[0:16], blk[16:80]
			d, dmin := f16At(blk[80:]), f16At(blk[82:])
			is, k := 0, 0
			for n := 0; n < 2; n++ {
				for shift := uint(0); shift < 8; shift += 2 {
					for half := 0; half < 2; half++ {
						sc := scales[is]
						is++
						dl, ml := d*float32(sc&0xF), float32(dmin*float32(sc>>4))
						for l := 0; l < 16; l++ {
							y[k] = float32(dl*float32((q[32*n+16*half+l]>>shift)&3)) - ml
							k++
						}
					}
				}
			}
		}
	case Q3_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*q3KBytes:], dst[b*qkK:(b+1)*qkK]
			hm, q := blk[0:32], blk[32:96]
			sc := q3KScales(blk[96:108])
			d := f16At(blk[108:])
			is, k := 0, 0
			m := byte(1)
			for n := 0; n < 2; n++ {
				for shift := uint(0); shift < 8; shift += 2 {
					for half := 0; half < 2; half++ {
						dl := d * float32(int(sc[is])-32)
						is++
						for l := 0; l < 16; l++ {
							v := int((q[32*n+16*half+l] >> shift) & 3)
							if hm[16*half+l]&m == 0 {
								v -= 4
							}
							y[k] = dl * float32(v)
							k++
						}
					}
					m <<= 1
				}
			}
		}
	case Q4_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*q4KBytes:], dst[b*qkK:(b+1)*qkK]
			d, dmin := f16At(blk), f16At(blk[2:])
			scales, q := blk[4:16], blk[16:144]
			for j := 0; j < 4; j++ {
				sc1, m1 := scaleMinK4(2*j, scales)
				sc2, m2 := scaleMinK4(2*j+1, scales)
				d1, mm1 := d*float32(sc1), float32(dmin*float32(m1))
				d2, mm2 := d*float32(sc2), float32(dmin*float32(m2))
				qq, out := q[32*j:32*j+32], y[64*j:64*j+64]
				for l := 0; l < 32; l++ {
					out[l] = float32(d1*float32(qq[l]&0xF)) - mm1
					out[l+32] = float32(d2*float32(qq[l]>>4)) - mm2
				}
			}
		}
	case Q5_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*q5KBytes:], dst[b*qkK:(b+1)*qkK]
			d, dmin := f16At(blk), f16At(blk[2:])
			scales, qh, q := blk[4:16], blk[16:48], blk[48:176]
			for j := 0; j < 4; j++ {
				sc1, m1 := scaleMinK4(2*j, scales)
				sc2, m2 := scaleMinK4(2*j+1, scales)
				d1, mm1 := d*float32(sc1), float32(dmin*float32(m1))
				d2, mm2 := d*float32(sc2), float32(dmin*float32(m2))
				u1, u2 := byte(1)<<(2*j), byte(2)<<(2*j)
				qq, out := q[32*j:32*j+32], y[64*j:64*j+64]
				for l := 0; l < 32; l++ {
					lo, hi := qq[l]&0xF, qq[l]>>4
					if qh[l]&u1 != 0 {
						lo += 16
					}
					if qh[l]&u2 != 0 {
						hi += 16
					}
					out[l] = float32(d1*float32(lo)) - mm1
					out[l+32] = float32(d2*float32(hi)) - mm2
				}
			}
		}
	case Q6_K:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*q6KBytes:], dst[b*qkK:(b+1)*qkK]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			d := f16At(blk[208:])
			for n := 0; n < 2; n++ {
				l4, h4, s4, out := ql[64*n:], qh[32*n:], sc[8*n:], y[128*n:]
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(l4[l]&0xF|(h4[l]>>0&3)<<4) - 32
					q2 := int(l4[l+32]&0xF|(h4[l]>>2&3)<<4) - 32
					q3 := int(l4[l]>>4|(h4[l]>>4&3)<<4) - 32
					q4 := int(l4[l+32]>>4|(h4[l]>>6&3)<<4) - 32
					out[l] = float32(d*float32(int8(s4[is]))) * float32(q1)
					out[l+32] = float32(d*float32(int8(s4[is+2]))) * float32(q2)
					out[l+64] = float32(d*float32(int8(s4[is+4]))) * float32(q3)
					out[l+96] = float32(d*float32(int8(s4[is+6]))) * float32(q4)
				}
			}
		}
	case IQ4_XS:
		for b := 0; b < len(dst)/qkK; b++ {
			blk, y := src[b*iq4XSBytes:], dst[b*qkK:(b+1)*qkK]
			d := f16At(blk)
			sh := binary.LittleEndian.Uint16(blk[2:])
			sl, qs := blk[4:8], blk[8:136]
			for ib := 0; ib < 8; ib++ {
				ls := int(sl[ib/2]>>(4*(ib%2))&0xF) | int(sh>>(2*ib)&3)<<4
				dl := d * float32(ls-32)
				q, out := qs[16*ib:], y[32*ib:]
				for j := 0; j < 16; j++ {
					out[j] = dl * float32(kvaluesIQ4NL[q[j]&0xF])
					out[j+16] = dl * float32(kvaluesIQ4NL[q[j]>>4])
				}
			}
		}
	}
}

// q8KAct is one super-block of 256 activations quantized to Q8_K
// (ggml's block_q8_K): quants, their sums per 16, and the scale.
type q8KAct struct {
	q     [qkK]int8
	bsums [16]int16
	d     float32
}

// nearestInt is ggml's nearest_int: round half to even through the
// 1.5*2^23 trick, for |f| <= 4194303.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// quantizeQ8KGo is ggml's quantize_row_q8_K_ref (which ggml-cpu's x86
// quantize_row_q8_K calls): scale -127/max where max is the value of
// largest magnitude (its sign kept), quants rounded half to even. The
// twin of quantizeQ8KAVX2 (quantizeQ8K picks).
func quantizeQ8KGo(dst []q8KAct, src []float32) {
	for b := range dst {
		x, a := src[b*qkK:(b+1)*qkK], &dst[b]
		var max, amax float32
		for _, v := range x {
			if av := float32(math.Abs(float64(v))); av > amax {
				amax, max = av, v
			}
		}
		if amax == 0 {
			*a = q8KAct{}
			continue
		}
		iscale := -127 / max
		for j, v := range x { // float32(): no fused iscale*v+1.5*2^23 on arm64
			a.q[j] = int8(min(127, nearestInt(float32(iscale*v))))
		}
		for j := 0; j < 16; j++ {
			s := 0
			for _, q := range a.q[16*j : 16*j+16] {
				s += int(q)
			}
			a.bsums[j] = int16(s)
		}
		a.d = 1 / iscale
	}
}

// quantizeQ8_1 is ggml-cpu's x86 quantize_row_q8_1 for one vector: the
// Q8_0 quants and scale of the x86 path, and s = d*sum(q) rounded to F16
// (d before its rounding), the sum the Q4_1 and Q5_1 products take the
// minimums with.
func quantizeQ8_1(dst []q8Act, s []float32, src []float32) {
	for b := range dst {
		x := src[b*q8Block : (b+1)*q8Block]
		quantizeActQ8_0(&dst[b], x, q8FlavorX86)
		var amax float32
		for _, v := range x {
			if av := float32(math.Abs(float64(v))); !(amax > av) {
				amax = av
			}
		}
		sum := int32(0)
		for _, q := range dst[b].q {
			sum += int32(q)
		}
		s[b] = f16Table[F32ToF16(amax/127*float32(sum))]
	}
}

// laneAcc holds the eight F32 lanes of an AVX2 accumulator.
type laneAcc [8]float32

// step is acc[l] = fma(d, float32(s[l]), acc[l]) for every lane.
func (a *laneAcc) step(d float32, s *[8]int32) {
	for l := range a {
		x := float32(s[l])
		if r := float64(d)*float64(x) + float64(a[l]); fmaOK(r) {
			a[l] = float32(r)
		} else {
			a[l] = fma32(d, x, a[l])
		}
	}
}

func (a *laneAcc) sum() float32 { return hsum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]) }

// lanes32 adds the products of 32 weight values w and 32 activation quants
// x into the eight 32-bit lanes of an AVX2 register, four values each.
func lanes32(s *[8]int32, w *[32]int8, x []int8) {
	x = x[:32]
	for l := 0; l < 8; l++ {
		s[l] = int32(w[4*l])*int32(x[4*l]) + int32(w[4*l+1])*int32(x[4*l+1]) +
			int32(w[4*l+2])*int32(x[4*l+2]) + int32(w[4*l+3])*int32(x[4*l+3])
	}
}

// unpackLegacy writes block b's 32 integer values (before scale and min)
// of a legacy row into w.
func unpackLegacy(t DType, w *[32]int8, blk []byte) {
	switch t {
	case Q4_0:
		for j := 0; j < 16; j++ {
			q := blk[2+j]
			w[j], w[j+16] = int8(q&0xF)-8, int8(q>>4)-8
		}
	case Q4_1:
		for j := 0; j < 16; j++ {
			q := blk[4+j]
			w[j], w[j+16] = int8(q&0xF), int8(q>>4)
		}
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		qh := binary.LittleEndian.Uint32(blk[off:])
		for j := 0; j < 16; j++ {
			q := blk[off+4+j]
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			w[j], w[j+16] = int8(q&0xF|h0), int8(q>>4|h1)
			if t == Q5_0 {
				w[j] -= 16
				w[j+16] -= 16
			}
		}
	case IQ4_NL:
		for j := 0; j < 16; j++ {
			q := blk[2+j]
			w[j], w[j+16] = kvaluesIQ4NL[q&0xF], kvaluesIQ4NL[q>>4]
		}
	}
}

// dotLegacyQ8 is ggml_vec_dot_q4_0_q8_0 / q5_0_q8_0 (AVX2): one fused
// multiply-add per lane and block with d = d_w*d_x.
func dotLegacyQ8(t DType, row []byte, act []q8Act) float32 {
	bb := t.BlockBytes()
	var acc laneAcc
	var w [32]int8
	var s [8]int32
	for b := range act[:len(row)/bb] {
		blk := row[b*bb : (b+1)*bb]
		unpackLegacy(t, &w, blk)
		lanes32(&s, &w, act[b].q[:])
		acc.step(f16At(blk)*act[b].d, &s)
	}
	return acc.sum()
}

// dotIQ4NL is ggml_vec_dot_iq4_nl_q8_0 (AVX2): even blocks in one
// accumulator, odd in another, added lane by lane before the horizontal
// sum; an odd last block is added after it in scalar code. llama.cpp runs
// it for one vector; for two or more (on matrices it does not repack)
// its tinyBLAS (tinyBLAS_Q0_AVX: one accumulator), other bits. MatMul
// keeps vec_dot's arithmetic for any number of vectors
// (docs/performance/kquants.md, "Exactness").
func dotIQ4NL(row []byte, act []q8Act) float32 {
	nb := len(row) / iq4NLBytes
	var acc [2]laneAcc
	var w [32]int8
	var s [8]int32
	step := func(b int) {
		blk := row[b*iq4NLBytes : (b+1)*iq4NLBytes]
		unpackLegacy(IQ4_NL, &w, blk)
		lanes32(&s, &w, act[b].q[:])
		acc[b&1].step(act[b].d*f16At(blk), &s)
	}
	b := 0
	for ; b+1 < nb; b += 2 {
		step(b)
		step(b + 1)
	}
	var sum laneAcc
	for l := range sum {
		sum[l] = acc[0][l] + acc[1][l]
	}
	sumf := sum.sum()
	if b < nb { // the scalar tail
		blk := row[b*iq4NLBytes : (b+1)*iq4NLBytes]
		unpackLegacy(IQ4_NL, &w, blk)
		var si int32
		for j := range w {
			si += int32(w[j]) * int32(act[b].q[j])
		}
		sumf = fmaF(act[b].d*f16At(blk), float32(si), sumf)
	}
	return sumf
}

// dotLegacyQ8_1 is ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1 (AVX2): the lanes
// as Q4_0's, plus the minimums m_w*s_x summed in a scalar, added last.
func dotLegacyQ8_1(t DType, row []byte, act []q8Act, s []float32) float32 {
	bb := t.BlockBytes()
	var acc laneAcc
	var w [32]int8
	var ls [8]int32
	var summs float32
	for b := range act[:len(row)/bb] {
		blk := row[b*bb : (b+1)*bb]
		summs = fmaF(f16At(blk[2:]), s[b], summs)
		unpackLegacy(t, &w, blk)
		lanes32(&ls, &w, act[b].q[:])
		acc.step(f16At(blk)*act[b].d, &ls)
	}
	return acc.sum() + summs
}

// blockAct is how MatMul quantizes activations for a weight type of this
// file (ggml's vec_dot_type for it).
type blockAct int

const (
	actNone blockAct = iota // not one of these types
	actQ8_0                 // Q4_0, Q5_0, IQ4_NL
	actQ8_1                 // Q4_1, Q5_1
	actQ8K                  // Q2_K .. Q6_K, IQ4_XS
)

func actKind(t DType) blockAct {
	switch t {
	case Q4_0, Q5_0, IQ4_NL:
		return actQ8_0
	case Q4_1, Q5_1:
		return actQ8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return actQ8K
	}
	return actNone
}

// dotK is the dot product of one row of a Q8_K-activation type.
func dotK(t DType, row []byte, act []q8KAct) float32 {
	switch t {
	case Q2_K:
		return dotQ2KRow(row, act)
	case Q3_K:
		return dotQ3KRow(row, act)
	case Q4_K:
		return dotQ4K(row, act)
	case Q5_K:
		return dotQ5KRow(row, act)
	case Q6_K:
		return dotQ6K(row, act)
	default: // IQ4_XS
		return dotIQ4XSRow(row, act)
	}
}

func growK(s []q8KAct, n int) []q8KAct {
	if cap(s) < n {
		return make([]q8KAct, n)
	}
	return s[:n]
}

// fmaF is fma32 through fmaOK's fast case.
func fmaF(a, b, c float32) float32 {
	if s := float64(a)*float64(b) + float64(c); fmaOK(s) {
		return float32(s)
	}
	return fma32(a, b, c)
}

// fmaOK says whether s, a float32 product plus a float32 (exact product,
// one rounding in float64), rounds to float32 as the fused multiply-add
// would: unless its dropped bits are exactly half an ulp, or it lies below
// float32's normal range, where fma32 resolves the double rounding. Small
// enough to inline in the hot loops.
func fmaOK(s float64) bool {
	b := math.Float64bits(s)
	return b&(1<<29-1) != 1<<28 && b>>52&0x7ff >= 1023-126
}
