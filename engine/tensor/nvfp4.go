package tensor

import (
	"fmt"
	"math"
)

// NVFP4 (ggml's block_nvfp4, GGML_TYPE_NVFP4 = 40; ggml-common.h): blocks of
// 64 values in 36 bytes: four UE4M3 scale bytes d[0..3], one per sub-block of
// 16 values, then 32 bytes qs of E2M1 codes. Sub-block s owns qs[8s..8s+7]:
// byte 8s+j holds value 16s+j in its low nibble and value 16s+j+8 in its high
// nibble. Value = E2M1(code) * UE4M3(d[s]). A file's per-tensor scale (the
// `<name>.scale` tensor, ModelOpt's weight_scale_2) multiplies the output of
// the matrix product and is not part of the blocks.
const (
	nvBlock      = 64
	nvSub        = 16
	nvBlockBytes = 36
)

// nvScale is what ggml reads from a scale byte (ggml_ue4m3_to_fp32 without
// its factor 1/2, which ggml folds into its doubled E2M1 table): the UE4M3
// value of the low 7 bits; the NaN code 0x7F reads as 0. (ggml itself also
// reads 0xFF as 480; files never hold bytes with the top bit set.)
var nvScale = func() (t [256]float32) {
	for c := range t {
		if v := uint8(c) & 0x7F; v != e4m3NaN {
			t[c] = ue4m3Value(v)
		}
	}
	return t
}()

// nvPair[b] is the two E2M1 values of byte b: low nibble, high nibble.
var nvPair = func() (t [256][2]float32) {
	for b := range t {
		t[b] = [2]float32{E2M1ToF32(uint8(b) & 15), E2M1ToF32(uint8(b) >> 4)}
	}
	return t
}()

// nvI8 is ggml's kvalues_fp4: twice the E2M1 value of each code, an integer.
var nvI8 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// QuantizeNVFP4Row encodes src as one NVFP4 row into dst (exactly
// NVFP4.RowBytes(len(src)) bytes) the way ModelOpt quantizes weights
// (NVFP4QTensor): with the per-tensor scale s2 (weight_scale_2; pass 1 for
// none), each sub-block of 16 values gets the scale
// UE4M3(clamp(amax/(6*s2), 2^-9, 448)) (1 where amax is 0), and each value
// the E2M1 code of x/(scale*s2), rounded to nearest even. The stored values
// then approximate src/s2, and the file's `.scale` tensor holds s2.
func QuantizeNVFP4Row(dst []byte, src []float32, s2 float32) error {
	if err := checkRow(NVFP4, len(dst), len(src)); err != nil {
		return fmt.Errorf("quantize row: %w", err)
	}
	if !(s2 > 0) || math.IsInf(float64(s2), 0) {
		return fmt.Errorf("quantize row: NVFP4 per-tensor scale %g is not a positive finite number", s2)
	}
	for b := 0; b < len(src)/nvBlock; b++ {
		quantizeBlockNVFP4(dst[b*nvBlockBytes:(b+1)*nvBlockBytes], src[b*nvBlock:(b+1)*nvBlock], s2)
	}
	return nil
}

func quantizeBlockNVFP4(dst []byte, src []float32, s2 float32) {
	dst = dst[:nvBlockBytes]
	src = src[:nvBlock]
	for s := 0; s < nvBlock/nvSub; s++ {
		xs := src[s*nvSub : (s+1)*nvSub]
		var amax float32
		for _, v := range xs {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		sb := amax / (6 * s2)
		if sb == 0 {
			sb = 1
		}
		sb = min(max(sb, 1.0/512), e4m3Max)
		code := F32ToUE4M3(sb)
		dst[s] = code
		d := nvScale[code] * s2
		q := dst[4+s*8 : 4+(s+1)*8]
		for j := range q {
			q[j] = F32ToE2M1(xs[j]/d) | F32ToE2M1(xs[j+8]/d)<<4
		}
	}
}

// dequantizeNVFP4 decodes whole blocks of src into dst.
func dequantizeNVFP4(dst []float32, src []byte) {
	for b := 0; b < len(dst)/nvBlock; b++ {
		blk := src[b*nvBlockBytes : (b+1)*nvBlockBytes]
		out := dst[b*nvBlock : (b+1)*nvBlock]
		for s := 0; s < 4; s++ {
			d := nvScale[blk[s]]
			o := out[s*nvSub : (s+1)*nvSub]
			for j, q := range blk[4+s*8 : 4+(s+1)*8] {
				p := &nvPair[q]
				o[j] = p[0] * d
				o[j+8] = p[1] * d
			}
		}
	}
}

// dotNVFP4F32 is the W4A16 dot product of one NVFP4 row with F32
// activations: per sub-block, the products E2M1*x summed in F32 in value
// order, times the scale, added to one F32 accumulator. Not ggml's arithmetic
// (ggml quantizes the activations, see dotNVFP4Q8).
func dotNVFP4F32(row []byte, x []float32) float32 {
	nb := len(row) / nvBlockBytes
	x = x[:nb*nvBlock]
	var acc float32
	for b := 0; b < nb; b++ {
		blk := (*[nvBlockBytes]byte)(row[b*nvBlockBytes : (b+1)*nvBlockBytes])
		xb := (*[nvBlock]float32)(x[b*nvBlock : (b+1)*nvBlock])
		for s := 0; s < 4; s++ {
			var lo, hi float32
			for j := 0; j < 8; j++ {
				p := &nvPair[blk[4+s*8+j]]
				lo += p[0] * xb[s*nvSub+j]
				hi += p[1] * xb[s*nvSub+j+8]
			}
			acc += nvScale[blk[s]] * (lo + hi)
		}
	}
	return acc
}

// dotNVFP4Q8 is the W4A8 dot product of one NVFP4 row with activations
// quantized to Q8_0 (two Q8_0 blocks per NVFP4 block), in the order of
// ggml's AVX2 ggml_vec_dot_nvfp4_q8_0: eight lanes, lane l of Q8_0 block b
// accumulating fma(s, isum_l, acc_l), where isum_l is the exact sum of the
// four products of ggml's doubled E2M1 values with quants 4l..4l+3 and s
// the sub-block's scale (halved) times the activation block's d, rounded
// to F32; lanes 0-3 and 4-7 of a Q8_0 block belong to its two sub-blocks.
func dotNVFP4Q8(row []byte, act []q8Act) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float64
	nb := len(row) / nvBlockBytes
	act = act[:2*nb]
	var w [nvBlock]int8
	for b := 0; b < nb; b++ {
		blk := (*[nvBlockBytes]byte)(row[b*nvBlockBytes : (b+1)*nvBlockBytes])
		widenNVFP4(&w, blk)
		x0, x1 := &act[2*b], &act[2*b+1]
		d0, d1 := float64(nvScale[blk[0]]*0.5*x0.d), float64(nvScale[blk[1]]*0.5*x0.d)
		d2, d3 := float64(nvScale[blk[2]]*0.5*x1.d), float64(nvScale[blk[3]]*0.5*x1.d)
		a0, a1, a2, a3 = q8HalfI8(a0, a1, a2, a3, d0, (*[16]int8)(w[0:16]), (*[16]int8)(x0.q[0:16]))
		a4, a5, a6, a7 = q8HalfI8(a4, a5, a6, a7, d1, (*[16]int8)(w[16:32]), (*[16]int8)(x0.q[16:32]))
		a0, a1, a2, a3 = q8HalfI8(a0, a1, a2, a3, d2, (*[16]int8)(w[32:48]), (*[16]int8)(x1.q[0:16]))
		a4, a5, a6, a7 = q8HalfI8(a4, a5, a6, a7, d3, (*[16]int8)(w[48:64]), (*[16]int8)(x1.q[16:32]))
	}
	return q8Hsum(a0, a1, a2, a3, a4, a5, a6, a7)
}

// widenNVFP4 writes the 64 values of a block as ggml's doubled E2M1
// integers, in value order.
func widenNVFP4(w *[nvBlock]int8, blk *[nvBlockBytes]byte) {
	for s := 0; s < 4; s++ {
		q := (*[8]byte)(blk[4+8*s : 12+8*s])
		o := (*[16]int8)(w[16*s : 16*s+16])
		for j := 0; j < 8; j++ {
			o[j] = nvI8[q[j]&15]
			o[j+8] = nvI8[q[j]>>4]
		}
	}
}

// q8HalfI8 is q8Half for weights already widened to int8.
func q8HalfI8(a0, a1, a2, a3, d float64, q *[16]int8, x *[16]int8) (float64, float64, float64, float64) {
	s0 := int32(q[0])*int32(x[0]) + int32(q[1])*int32(x[1]) + int32(q[2])*int32(x[2]) + int32(q[3])*int32(x[3])
	s1 := int32(q[4])*int32(x[4]) + int32(q[5])*int32(x[5]) + int32(q[6])*int32(x[6]) + int32(q[7])*int32(x[7])
	s2 := int32(q[8])*int32(x[8]) + int32(q[9])*int32(x[9]) + int32(q[10])*int32(x[10]) + int32(q[11])*int32(x[11])
	s3 := int32(q[12])*int32(x[12]) + int32(q[13])*int32(x[13]) + int32(q[14])*int32(x[14]) + int32(q[15])*int32(x[15])
	r0 := a0 + d*float64(s0)
	r1 := a1 + d*float64(s1)
	r2 := a2 + d*float64(s2)
	r3 := a3 + d*float64(s3)
	if midpoint(r0) || midpoint(r1) || midpoint(r2) || midpoint(r3) {
		return nvStep(a0, d, s0), nvStep(a1, d, s1), nvStep(a2, d, s2), nvStep(a3, d, s3)
	}
	return float64(float32(r0)), float64(float32(r1)), float64(float32(r2)), float64(float32(r3))
}

// nvStep is the exact lane step where the float64 sum looked like an F32
// midpoint. NVFP4 scales have few significant bits, so that happens often,
// but then the float64 sum is usually exact (its two-sum error is 0) and
// rounding it once to F32 is already the fused result; only otherwise is the
// slow exact fma needed.
func nvStep(acc, d float64, s int32) float64 {
	p := d * float64(s) // exact
	r := acc + p
	bp := r - acc
	if (acc-(r-bp))+(p-bp) == 0 {
		return float64(float32(r))
	}
	return q8Fma(acc, d, s)
}
