package tensor

import (
	"fmt"
	"math"
)

// Small vector operations used by the model layers. Where ggml's CPU backend
// has a specific arithmetic (RMSNorm's float64 sum, the vectorised expf of
// SiLU and softmax) it is reproduced; see each function. All of them panic
// when the lengths of their arguments differ.

func sameLen(op string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("tensor: %s: lengths differ (%d and %d)", op, a, b))
	}
}

// Dot returns the F32 dot product of a and b in ggml_vec_dot_f32's order
// (ggmlDotF32, the order of the F32 matrix products): Dot(w, x) equals
// MatVec's result for a one-row F32 matrix w.
func Dot(a, b []float32) float32 {
	sameLen("Dot", len(a), len(b))
	return ggmlDotF32(a, b)
}

// Axpy adds a*x to dst. The product is rounded before the add (ggml's SIMD
// ggml_vec_mad_f32 fuses them; its scalar tail does not).
func Axpy(dst []float32, a float32, x []float32) {
	sameLen("Axpy", len(dst), len(x))
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += float32(a * x[i])
	}
}

// Scale multiplies x by a in place.
func Scale(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// Add adds x to dst elementwise.
func Add(dst, x []float32) {
	sameLen("Add", len(dst), len(x))
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += x[i]
	}
}

// Mul multiplies dst by x elementwise.
func Mul(dst, x []float32) {
	sameLen("Mul", len(dst), len(x))
	x = x[:len(dst)]
	for i := range dst {
		dst[i] *= x[i]
	}
}

// RMSNorm sets dst = x / sqrt(mean(x^2) + eps) * w, or without the weight
// when w is nil, as ggml_compute_forward_rms_norm_f32 does: the squares are
// summed in float64, scale = 1/sqrtf(float32(mean) + eps) and each value is
// (x*scale)*w. dst may be x.
func RMSNorm(dst, x, w []float32, eps float32) {
	sameLen("RMSNorm", len(dst), len(x))
	if len(x) == 0 {
		return
	}
	var sum float64
	for _, v := range x {
		sum += float64(float32(v * v))
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	x = x[:len(dst)]
	if w == nil {
		for i := range dst {
			dst[i] = x[i] * scale
		}
		return
	}
	sameLen("RMSNorm weight", len(dst), len(w))
	w = w[:len(dst)]
	for i := range dst {
		dst[i] = float32(x[i]*scale) * w[i]
	}
}

// Softmax replaces x by exp(x - max(x)) / sum, as ggml_soft_max does on
// x86: the exponentials come from ggml's vectorised expf (expf32), each group
// of eight is added as hsum8 and the group sums are accumulated in float64,
// then every value is multiplied by float32(1/sum). (ggml adds the last
// len(x)%8 values one by one, as here, but with the C library's expf.) -Inf
// entries (masked positions) become 0.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	maxv := float32(math.Inf(-1))
	for _, v := range x {
		if v > maxv {
			maxv = v
		}
	}
	var sum float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		g := (*[8]float32)(x[i : i+8])
		for k, v := range g {
			g[k] = expf32(v - maxv)
		}
		sum += float64(hsum8(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]))
	}
	for ; i < len(x); i++ {
		x[i] = expf32(x[i] - maxv)
		sum += float64(x[i])
	}
	Scale(x, float32(1/sum))
}

// SiLU replaces each x by x / (1 + exp(-x)) as ggml_vec_silu_f32 and
// ggml_vec_swiglu_f32 do: whole blocks of eight with ggml's vectorised expf
// (ggml_v_silu), the len(x)%8 values left over with glibc's expf
// (ggml_silu_f32).
func SiLU(x []float32) {
	nb := len(x) / 8
	if n16 := len(x) / 16; useVec512 && n16 > 0 {
		siluBlocks16(&x[0], n16) // blocks of sixteen in AVX-512, the same bits
		if nb%2 == 1 {
			siluBlocks(&x[16*n16], 1)
		}
	} else if useSIMD && nb > 0 {
		siluBlocks(&x[0], nb) // whole blocks of eight in AVX2, the same bits
	} else {
		siluScalar(x[:8*nb])
	}
	for i := 8 * nb; i < len(x); i++ {
		v := x[i]
		x[i] = v / (1 + Expf(-v))
	}
}

// siluScalar is ggml_v_silu one value at a time: the plain-Go twin of
// siluBlocks.
func siluScalar(x []float32) {
	for i, v := range x {
		x[i] = v / (1 + expf32(-v))
	}
}

// expf32 is ggml's vectorised single-precision exp (ggml_v_expf in
// ggml-cpu/vec.h, the AVX2 and NEON form, adapted from ARM's optimized
// routines; max error 1.45 + 0.5 ulp), evaluated one lane at a time with
// exactly rounded fused multiply-adds, so it gives the same bits.
func expf32(x float32) float32 {
	const (
		shift = 0x1.8p23
		log2e = 0x1.715476p+0
		ln2hi = 0x1.62e4p-1
		ln2lo = 0x1.7f7d1cp-20
		c0    = 0x1.ffffecp-1
		c1    = 0x1.fffdb6p-2
		c2    = 0x1.555e66p-3
		c3    = 0x1.573e2ep-5
		c4    = 0x1.0e4020p-7
	)
	z := fma32(x, log2e, shift)
	n := z - shift
	b := fma32(-n, ln2lo, fma32(-n, ln2hi, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma32(fma32(fma32(c4, b, c3), u, fma32(c2, b, c1)), u, float32(c0*b))
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fma32(k, j, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma32(s2, j, s2) * s1
}

// fma32 returns a*b+c rounded once to float32, like a hardware fused
// multiply-add. a*b is exact in float64; the float64 sum is then rounded a
// second time to float32, which is only wrong when it lands exactly halfway
// between two float32 values: that case is detected and resolved with the
// exact error of the addition.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	r := float32(s)
	if !f32Midpoint(s) {
		return r
	}
	bb := s - p
	err := (p - (s - bb)) + (float64(c) - bb)
	switch {
	case err > 0:
		return float32(math.Nextafter(s, math.Inf(1)))
	case err < 0:
		return float32(math.Nextafter(s, math.Inf(-1)))
	}
	return r
}

// f32Midpoint reports whether s lies exactly halfway between two adjacent
// float32 values.
func f32Midpoint(s float64) bool {
	bits := math.Float64bits(s)
	exp := int(bits>>52) & 0x7ff
	switch {
	case exp >= 1023-126: // float32 normal range: 29 dropped bits = 100...0
		return bits&(1<<29-1) == 1<<28
	case exp == 0:
		return false // far below float32's smallest subnormal
	}
	// Float32 subnormal range: spacing 2^-149.
	_, f := math.Modf(math.Ldexp(s, 149))
	return f == 0.5 || f == -0.5
}
