package tensor

import (
	"math"
	"math/bits"
)

// IEEE 754 binary16 (F16) and bfloat16 (BF16) codecs, bit-exact with ggml
// (ggml/src/ggml-impl.h: ggml_compute_fp16_to_fp32, ggml_compute_fp32_to_fp16,
// ggml_compute_bf16_to_fp32, ggml_compute_fp32_to_bf16). They are written with
// integer operations so that the result does not depend on how the compiler
// schedules or fuses floating-point operations on a given architecture.

// F16ToF32 widens an IEEE binary16 value. Every F16 value is exactly
// representable in F32. A NaN keeps its sign and payload and comes back quiet
// (bit 22 set), as ggml's conversion and the F16C/NEON instructions do.
// It reads a table of all 65536 codes, built once from f16ToF32Bits.
func F16ToF32(h uint16) float32 { return f16Table[h] }

func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return sign // ±0
		}
		// Subnormal: mant * 2^-24. With its top set bit at position p
		// (0..9) the value is 1.f * 2^(p-24), a normal F32.
		p := uint32(31 - bits.LeadingZeros32(mant))
		return sign | (p+103)<<23 | (mant<<(23-p))&0x7fffff
	case 0x1f:
		if mant == 0 {
			return sign | 0x7f800000 // ±Inf
		}
		return sign | 0x7fc00000 | mant<<13 // NaN, quieted
	}
	return sign | (exp+112)<<23 | mant<<13
}

// F32ToF16 narrows f to IEEE binary16, rounding to nearest with ties to even.
// Values of magnitude 65520 and above become ±Inf, values of magnitude 2^-25
// and below become ±0. Every NaN becomes 0x7E00 with f's sign bit, as
// ggml_compute_fp32_to_fp16 does (hardware conversions keep the payload; no
// activation of a sound model is NaN, so the difference never shows).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // >= 65520 = 65504 + half an ulp: rounds to Inf
		return sign | 0x7c00
	case abs >= 0x38800000: // >= 2^-14: a normal F16
		// Rebias the exponent (127 -> 15) and drop 13 mantissa bits. A carry
		// out of the mantissa moves correctly into the exponent.
		h := (abs - 0x38000000) >> 13
		rem := abs & 0x1fff
		if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	case abs >= 0x33000000: // >= 2^-25: a subnormal F16 (or the smallest normal after rounding)
		e := abs >> 23               // 102..112
		m := abs&0x7fffff | 0x800000 // 24-bit significand
		s := 126 - e                 // value = m * 2^(e-150) = (m >> s) * 2^-24
		h := m >> s
		rem := m & (1<<s - 1)
		half := uint32(1) << (s - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	return sign // rounds to ±0
}

// BF16ToF32 widens a bfloat16 value (the upper half of an F32).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows f to bfloat16 with round to nearest even; a NaN stays NaN
// with its top payload bits and the quiet bit forced, exactly like
// ggml_compute_fp32_to_bf16. Subnormals are rounded, not flushed.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

// f16Table maps every F16 code to its F32 value. The kernels use it instead
// of the branchy conversion; it is computed once and never written again.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = math.Float32frombits(f16ToF32Bits(uint16(i)))
	}
	return &t
}()

// RoundF16 returns f after a trip through F16, F16ToF32(F32ToF16(f)), bit
// for bit: the value an F16 store and load leaves (ggml's F16 activations,
// KV cache and flash-attention accumulator). In F16's normal range it
// rounds the F32 bits directly, to nearest with ties to even at the 13th
// bit; elsewhere (subnormals, overflow, Inf, NaN) it takes the full trip.
// RoundF16 itself is too large to inline; see RoundF16Normal.
func RoundF16(f float32) float32 {
	if r, ok := RoundF16Normal(f); ok {
		return r
	}
	return f16Table[F32ToF16(f)]
}

// RoundF16Normal is RoundF16's fast path, small enough to inline in a
// caller's loop: it returns RoundF16(f) and true when f is in F16's normal
// range, else false (call RoundF16 then).
func RoundF16Normal(f float32) (float32, bool) {
	b := math.Float32bits(f)
	if b&0x7fffffff-0x38800000 >= 0x477ff000-0x38800000 {
		return 0, false
	}
	// The exponent bias difference (0x38000000) has no bits below 13, so
	// the parity of the F16 mantissa is bit 13 of b. A carry out of the
	// mantissa moves into the exponent, as in F32ToF16, and stays below
	// 65520, so it never reaches Inf.
	return math.Float32frombits((b + 0xfff + (b>>13)&1) &^ 0x1fff), true
}

// roundF16 and roundBF16 return f after a trip through the narrow format: the
// value ggml's F16/BF16 dot products see for an activation.
func roundF16(f float32) float32 {
	if r, ok := RoundF16Normal(f); ok {
		return r
	}
	return RoundF16(f)
}
func roundBF16(f float32) float32 { return BF16ToF32(F32ToBF16(f)) }
