package tensor

import "math"

// Small floating-point codes of NVFP4 and the FP8 KV cache.
//
// E2M1 (FP4): 4 bits, bit 3 the sign, bits 0-2 an index into
// 0, 0.5, 1, 1.5, 2, 3, 4, 6. No infinity, no NaN; 0x8 is -0.
//
// E4M3 (FP8, OCP "e4m3fn"): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa
// bits. Normal (e = 1..15): 2^(e-7) * (1 + m/8); subnormal (e = 0):
// 2^-6 * m/8. Largest finite value 448 (0x7E); no infinity; NaN only
// 0x7F and 0xFF.
//
// Unsigned E4M3 (UE4M3, NVFP4's block scales): E4M3 with the sign bit always
// clear: codes 0x00..0x7E are 0..448, 0x7F is NaN.
//
// Encoders round to nearest, ties to even, and saturate: anything beyond the
// largest finite value, infinities included, becomes that value (±448, ±6),
// never an infinity or a NaN. A NaN input gives the format's NaN where it
// has one (E4M3, UE4M3) and +0 for E2M1.

// e2m1Mag is the magnitude of E2M1 code c&7.
var e2m1Mag = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1ToF32 decodes the E2M1 code in the low 4 bits of c.
func E2M1ToF32(c uint8) float32 {
	v := e2m1Mag[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// F32ToE2M1 encodes x as an E2M1 code (round to nearest even, saturating at
// ±6). The sign of x is kept, so small negative values give -0 (0x8).
func F32ToE2M1(x float32) uint8 {
	if x != x {
		return 0
	}
	var s uint8
	if math.Signbit(float64(x)) {
		s, x = 8, -x
	}
	// Ties go to the even code: 0, 1.0, 2.0 and 4.0 are codes 0, 2, 4, 6.
	var c uint8
	switch {
	case x <= 0.25:
		c = 0
	case x < 0.75:
		c = 1
	case x <= 1.25:
		c = 2
	case x < 1.75:
		c = 3
	case x <= 2.5:
		c = 4
	case x < 3.5:
		c = 5
	case x <= 5:
		c = 6
	default:
		c = 7
	}
	return s | c
}

// E4M3 limits.
const (
	e4m3Max    = 448
	e4m3MaxBit = 0x7E // 448
	e4m3NaN    = 0x7F
)

// E4M3ToF32 decodes an E4M3 (e4m3fn) code.
func E4M3ToF32(c uint8) float32 {
	v := ue4m3Value(c & 0x7F)
	if c&0x80 != 0 {
		return -v
	}
	return v
}

// ue4m3Value decodes a code of 0..0x7F (0x7F is NaN).
func ue4m3Value(c uint8) float32 {
	e, m := int(c>>3), float32(c&7)
	switch {
	case c == e4m3NaN:
		return float32(math.NaN())
	case e == 0:
		return m * (1.0 / 512)
	default:
		return float32(math.Ldexp(float64(1+m/8), e-7))
	}
}

// F32ToE4M3 encodes x as E4M3 (round to nearest even, saturating at ±448;
// NaN gives 0x7F or 0xFF, keeping the sign bit).
func F32ToE4M3(x float32) uint8 {
	b := math.Float32bits(x)
	s := uint8(b>>24) & 0x80
	return s | encodeE4M3Mag(math.Float32frombits(b&^(1<<31)))
}

// encodeE4M3Mag encodes a non-negative magnitude (or NaN) into 7 bits.
func encodeE4M3Mag(a float32) uint8 {
	switch {
	case a != a:
		return e4m3NaN
	case a >= e4m3Max:
		return e4m3MaxBit
	case a < 1.0/64: // subnormal range: multiples of 2^-9, scaling is exact
		return uint8(math.RoundToEven(float64(a) * 512)) // 8 is 2^-6, the first normal code
	}
	bits := math.Float32bits(a)
	e := int(bits>>23) - 127 // -6..8
	m := bits & (1<<23 - 1)
	r, rest := m>>20, m&(1<<20-1)
	if rest > 1<<19 || (rest == 1<<19 && r&1 == 1) {
		r++
	}
	c := uint32(e+7)<<3 + r // a carry out of the mantissa bumps the exponent
	if c > e4m3MaxBit {
		c = e4m3MaxBit
	}
	return uint8(c)
}

// UE4M3ToF32 decodes an unsigned E4M3 code; the top bit, outside the
// format, is ignored. 0x7F is NaN.
func UE4M3ToF32(c uint8) float32 { return ue4m3Value(c & 0x7F) }

// F32ToUE4M3 encodes x as unsigned E4M3 (round to nearest even, saturating
// at 448); zero and negative values give 0, NaN gives 0x7F.
func F32ToUE4M3(x float32) uint8 {
	if x != x {
		return e4m3NaN
	}
	if !(x > 0) {
		return 0
	}
	return encodeE4M3Mag(x)
}
