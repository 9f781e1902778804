package tensor

import (
	"fmt"
	"math"
)

// Rows of E4M3 (FP8) values, the element of the FP8 KV cache. A row stores
// src/scale, one E4M3 code a value; the scale (a layer's k_scale or v_scale,
// vLLM's convention HP = FP8 * scale) stays outside the row, so the loops
// below work on the codes and the caller applies the scale once per dot
// product or per output.

// e4m3Table decodes a code; 0x7F and 0xFF are NaN, which EncodeE4M3Row never
// writes for finite input.
var e4m3Table = func() (t [256]float32) {
	for c := range t {
		t[c] = E4M3ToF32(uint8(c))
	}
	return t
}()

// EncodeE4M3Row sets dst[i] to the E4M3 code of src[i]/scale, rounded to
// nearest even and saturated at ±448 (the clamp before the cast that FP8
// caches do; no infinity, no NaN from finite input). scale must be
// positive; len(dst) must be at least len(src).
func EncodeE4M3Row(dst []byte, src []float32, scale float32) {
	dst = dst[:len(src)]
	if scale == 1 {
		for i, v := range src {
			dst[i] = F32ToE4M3(v)
		}
		return
	}
	for i, v := range src {
		// A division, not a multiply by the inverse (which would round
		// twice), as vLLM's reference quantizer computes x / scale.
		dst[i] = F32ToE4M3(v / scale)
	}
}

// DecodeE4M3Row sets dst[i] = E4M3(src[i]) * scale (exact when the product
// is: a 4-bit significand times scale).
func DecodeE4M3Row(dst []float32, src []byte, scale float32) {
	dst = dst[:len(src)]
	for i, c := range src {
		dst[i] = e4m3Table[c] * scale
	}
}

// DotE4M3 is the dot product of the E4M3 codes k with x[:len(k)], without
// any scale: eight lanes, lane j%8 adding float32(E4M3(k[j])*x[j]) (a
// rounded product, then a rounded add) in increasing j, added by hsum8 at
// the end; the order of the other float dot products of this package.
// It runs in AVX2 where the CPU has it (e4m3_amd64.s), with the same bits.
func DotE4M3(k []byte, x []float32) float32 {
	if useSIMD {
		return dotE4M3SIMD(k, x)
	}
	return dotE4M3(k, x)
}

// dotE4M3 is DotE4M3's plain-Go twin.
func dotE4M3(k []byte, x []float32) float32 {
	x = x[:len(k)]
	tab := &e4m3Table
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(k); i += 8 {
		kk := (*[8]byte)(k[i : i+8])
		xx := (*[8]float32)(x[i : i+8])
		a0 += float32(tab[kk[0]] * xx[0])
		a1 += float32(tab[kk[1]] * xx[1])
		a2 += float32(tab[kk[2]] * xx[2])
		a3 += float32(tab[kk[3]] * xx[3])
		a4 += float32(tab[kk[4]] * xx[4])
		a5 += float32(tab[kk[5]] * xx[5])
		a6 += float32(tab[kk[6]] * xx[6])
		a7 += float32(tab[kk[7]] * xx[7])
	}
	var t [8]float32
	for j := 0; i < len(k); i, j = i+1, j+1 {
		t[j] = float32(tab[k[i]] * x[i])
	}
	return hsum8(a0+t[0], a1+t[1], a2+t[2], a3+t[3], a4+t[4], a5+t[5], a6+t[6], a7+t[7])
}

// AxpyE4M3 adds a*E4M3(v[i]) to y[i] (a rounded product, then a rounded
// add) for every i < len(v), in AVX2 where the CPU has it.
func AxpyE4M3(y []float32, v []byte, a float32) {
	if useSIMD {
		axpyE4M3SIMD(y, v, a)
		return
	}
	axpyE4M3(y, v, a)
}

// axpyE4M3 is AxpyE4M3's plain-Go twin.
func axpyE4M3(y []float32, v []byte, a float32) {
	y = y[:len(v)]
	tab := &e4m3Table
	for i, c := range v {
		y[i] += float32(a * tab[c])
	}
}

// CheckKVScale reports whether s can scale an FP8 cache: a positive,
// finite number.
func CheckKVScale(s float32) error {
	if !(s > 0) || math.IsInf(float64(s), 0) {
		return fmt.Errorf("FP8 KV scale %g is not a positive finite number", s)
	}
	return nil
}
