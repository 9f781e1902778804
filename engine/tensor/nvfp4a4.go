package tensor

import "math"

// W4A4: NVFP4 weights times activations quantized to NVFP4 at run time.
//
// Activations (vLLM ref_nvfp4_quant, ModelOpt NVFP4QTensor, the CUDA
// cvt_warp_fp16_to_fp4 with IEEE division): a vector gets the global scale
// G = 1/input_scale, where input_scale is the weight's `<name>.input_scale`
// (calibrated amax/(6*448)) when the file has one, else amax(|x|)/(6*448)
// of the vector itself (dynamic). Each block of 16 values then gets the
// UE4M3 scale SF = UE4M3(min(G*(vmax*(1/6)), 448)) (vmax the block's amax;
// ties to even, 0 for an all-zero block), and each value the E2M1 code of
// x*o, o = 1/(SF*(1/G)) (0 when SF is 0), clamped to ±6 and rounded to
// nearest even. The value the code stands for is E2M1*SF/G.
//
// The dot product of a weight sub-block (UE4M3 scale w, codes a_i) with an
// activation sub-block (SF, codes b_i): with ggml's doubled E2M1 integers
// (0,1,2,3,4,6,8,12: exact), Σ E2M1(a_i)*E2M1(b_i) = Σ 2a_i*2b_i / 4, an
// integer sum of at most 16*144 over 4. The kernel sums four products at a
// time (isum, |isum| <= 576, 10 bits) and adds d*isum, d = w*SF/4, to one
// of sixteen F32 lanes. w and SF have 4 significant bits each, so d has at
// most 8 and d*isum at most 18: every term is exact in F32 (no underflow:
// |d| >= 2^-9*2^-9/4), and the only roundings are the lane additions and
// the final sums, whatever the hardware (a fused multiply-add gives the
// same bits as a multiply then an add). The result is multiplied by 1/G,
// then by the weight's per-tensor scale (the model's `.scale`).
//
// Lane layout: a weight block's 32 code bytes are read whole, their low
// nibbles then their high nibbles: "nibble order" positions 0..31 are the
// low nibbles of bytes 0..31, positions 32..63 their high nibbles (byte
// 8s+j of sub-block s holds values 16s+j, low, and 16s+j+8, high). Lane k
// (0..15) takes positions 4k..4k+3, four values of one sub-block:
// (k%8)/2. The activation codes are stored in nibble order when they are
// quantized, so the SIMD kernel reads both sides with plain loads and
// needs no shuffle across 128-bit halves. Each lane gets one term per
// block; at the end lane k and lane k+8 are added, then the eight sums by
// hsum8.

// fp4Act is one 64-value block of a W4A4 activation vector: doubled E2M1
// integers in nibble order, and per lane k of the kernel (0..7, the same
// for k+8) the activation side of d: SF/4 of sub-block k/2.
type fp4Act struct {
	q [64]int8
	d [8]float32
}

// nibbleOrder[p] is the value (0..63 within a block) at nibble-order
// position p.
var nibbleOrder = func() (t [64]int) {
	for p := range t {
		high, j := p/32, p%32 // byte j of the 32, low or high nibble
		t[p] = 16*(j/8) + j%8 + 8*high
	}
	return t
}()

// e2m1Inv6 is the references' reciprocal of the largest E2M1 value, rounded.
const e2m1Inv6 = float32(1.0 / 6)

// fp4GlobalScale returns G and 1/G for an activation vector: from the
// weight's input scale when it has one (> 0), else from the vector's amax.
// ok is false when the vector is all zeros (and has no input scale): every
// code and scale is then 0.
func fp4GlobalScale(x []float32, inputScale float32) (g, invG float32, ok bool) {
	is := inputScale
	if !(is > 0) {
		var amax float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		is = amax / (6 * 448)
	}
	if !(is > 0) || math.IsInf(float64(is), 0) {
		return 0, 0, false
	}
	g = 1 / is
	if math.IsInf(float64(g), 0) { // an input scale below 2^-128
		return 0, 0, false
	}
	return g, 1 / g, true
}

// quantizeActFP4 quantizes one vector (a whole number of 64-value blocks)
// into act and returns 1/G, the factor of every dot product with it.
func quantizeActFP4(act []fp4Act, x []float32, inputScale float32) float32 {
	act = act[:len(x)/nvBlock]
	g, invG, ok := fp4GlobalScale(x, inputScale)
	if !ok {
		clear(act)
		return 0
	}
	var codes [nvBlock]int8 // doubled values, natural order
	for b := range act {
		xb := x[b*nvBlock : (b+1)*nvBlock]
		a := &act[b]
		for s := 0; s < 4; s++ {
			xs := xb[s*nvSub : (s+1)*nvSub]
			var vmax float32
			for _, v := range xs {
				if av := float32(math.Abs(float64(v))); av > vmax {
					vmax = av
				}
			}
			sf := nvScale[F32ToUE4M3(min(g*(vmax*e2m1Inv6), e4m3Max))]
			var o float32
			if sf != 0 {
				o = 1 / (sf * invG)
			}
			a.d[2*s], a.d[2*s+1] = sf/4, sf/4
			for i, v := range xs {
				codes[s*nvSub+i] = nvI8[F32ToE2M1(min(max(v*o, -6), 6))]
			}
		}
		for p, v := range nibbleOrder {
			a.q[p] = codes[v]
		}
	}
	return invG
}

// widenNVFP4Nibbles writes the doubled E2M1 values of a weight block's 32
// code bytes in nibble order: the low nibbles, then the high nibbles.
func widenNVFP4Nibbles(w *[nvBlock]int8, qs *[32]byte) {
	for k, c := range qs {
		w[k] = nvI8[c&15]
		w[32+k] = nvI8[c>>4]
	}
}

// dotNVFP4FP4 is the W4A4 dot product of one NVFP4 row with an activation
// vector quantized by quantizeActFP4, without the factor 1/G.
func dotNVFP4FP4(row []byte, act []fp4Act) float32 {
	nb := len(row) / nvBlockBytes
	act = act[:nb]
	var l [16]float32
	var w [nvBlock]int8
	for b := range act {
		blk := (*[nvBlockBytes]byte)(row[b*nvBlockBytes : (b+1)*nvBlockBytes])
		a := &act[b]
		widenNVFP4Nibbles(&w, (*[32]byte)(blk[4:]))
		for k := 0; k < 16; k++ {
			wq := (*[4]int8)(w[4*k : 4*k+4])
			xq := (*[4]int8)(a.q[4*k : 4*k+4])
			s := int32(wq[0])*int32(xq[0]) + int32(wq[1])*int32(xq[1]) +
				int32(wq[2])*int32(xq[2]) + int32(wq[3])*int32(xq[3])
			d := nvScale[blk[(k%8)/2]] * a.d[k%8]
			l[k] += d * float32(s) // exact product, see above
		}
	}
	return hsum8(l[0]+l[8], l[1]+l[9], l[2]+l[10], l[3]+l[11], l[4]+l[12], l[5]+l[13], l[6]+l[14], l[7]+l[15])
}
