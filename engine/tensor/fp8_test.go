package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The expected values are computed here from the format definitions
// (OCP FP8 E4M3 "e4m3fn", OCP MX E2M1), not by the code under test.

func refE4M3(c uint8) float64 {
	s := 1.0
	if c&0x80 != 0 {
		s = -1
	}
	e, m := int(c>>3)&15, float64(c&7)
	switch {
	case e == 15 && m == 7:
		return math.NaN()
	case e == 0:
		return s * m / 8 * math.Ldexp(1, -6)
	}
	return s * (1 + m/8) * math.Ldexp(1, e-7)
}

func refE2M1(c uint8) float64 {
	mag := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}[c&7]
	if c&8 != 0 {
		return -mag
	}
	return mag
}

// nearest is the brute-force reference encoder: the code whose value is
// nearest to x, ties to the code with an even last bit; codes lists the
// finite codes, max is the saturation value.
func nearest(x float64, codes []uint8, val func(uint8) float64) uint8 {
	best, bestErr := codes[0], math.Inf(1)
	for _, c := range codes {
		err := math.Abs(val(c) - x)
		if err < bestErr || (err == bestErr && c&1 == 0 && best&1 == 1) {
			best, bestErr = c, err
		}
	}
	return best
}

func TestE4M3AllCodes(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := uint8(i)
		got, want := float64(E4M3ToF32(c)), refE4M3(c)
		if math.IsInf(got, 0) {
			t.Fatalf("code %#02x decodes to %v: E4M3 has no infinity", c, got)
		}
		if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && got != want) {
			t.Fatalf("E4M3ToF32(%#02x) = %v, want %v", c, got, want)
		}
		if math.IsNaN(got) {
			if c != 0x7F && c != 0xFF {
				t.Fatalf("code %#02x is NaN; only 0x7F and 0xFF are", c)
			}
			if e := F32ToE4M3(float32(got)); e&0x7F != 0x7F {
				t.Fatalf("F32ToE4M3(NaN) = %#02x, want a NaN code", e)
			}
			continue
		}
		if e := F32ToE4M3(float32(got)); e != c {
			t.Fatalf("F32ToE4M3(%v) = %#02x, want %#02x (round trip)", got, e, c)
		}
	}
	if E4M3ToF32(0x7E) != 448 || E4M3ToF32(0x01) != 1.0/512 || E4M3ToF32(0x08) != 1.0/64 {
		t.Fatal("E4M3 anchors (448, 2^-9, 2^-6) wrong")
	}
}

// finiteCodes are the non-negative finite codes of a format, in value order.
func finiteCodes(n int, nan func(uint8) bool) []uint8 {
	var cs []uint8
	for c := 0; c < n; c++ {
		if !nan(uint8(c)) {
			cs = append(cs, uint8(c))
		}
	}
	return cs
}

// checkBoundaries checks every midpoint between neighbouring values (ties to
// even) and the values just beside it, for both signs.
func checkBoundaries(t *testing.T, name string, codes []uint8, signBit uint8, val func(uint8) float64, enc func(float32) uint8) {
	t.Helper()
	for i := 0; i+1 < len(codes); i++ {
		lo, hi := codes[i], codes[i+1]
		mid := float32((val(lo) + val(hi)) / 2) // exact: a few significant bits
		if float64(mid) != (val(lo)+val(hi))/2 {
			t.Fatalf("%s: midpoint of %#x and %#x not exact", name, lo, hi)
		}
		even := lo
		if lo&1 == 1 {
			even = hi
		}
		for _, sg := range []float32{1, -1} {
			sb := uint8(0)
			if sg < 0 {
				sb = signBit
			}
			if sg < 0 && signBit == 0 {
				continue
			}
			cases := []struct {
				x    float32
				want uint8
			}{
				{sg * mid, even | sb},
				{sg * math.Nextafter32(mid, 0), lo | sb},
				{sg * math.Nextafter32(mid, float32(math.Inf(1))), hi | sb},
			}
			for _, tc := range cases {
				if got := enc(tc.x); got != tc.want {
					t.Errorf("%s(%v) = %#02x, want %#02x (between %v and %v)", name, tc.x, got, tc.want, val(lo), val(hi))
				}
			}
		}
	}
}

func TestE4M3Rounding(t *testing.T) {
	isNaN := func(c uint8) bool { return c == 0x7F }
	codes := finiteCodes(128, isNaN) // 0x00..0x7E, increasing values
	checkBoundaries(t, "F32ToE4M3", codes, 0x80, refE4M3, F32ToE4M3)

	// Saturation: no infinity, no NaN from a number.
	for _, x := range []float32{448, 449, 463.99, 464, 465, 480, 500, 1e6, math.MaxFloat32, float32(math.Inf(1))} {
		if got := F32ToE4M3(x); got != 0x7E {
			t.Errorf("F32ToE4M3(%v) = %#02x, want 0x7e (448)", x, got)
		}
		if got := F32ToE4M3(-x); got != 0xFE {
			t.Errorf("F32ToE4M3(%v) = %#02x, want 0xfe (-448)", -x, got)
		}
	}
	// Below the smallest subnormal: ties to even at 2^-10 go to zero.
	for _, tc := range []struct {
		x    float32
		want uint8
	}{{1.0 / 1024, 0}, {math.Nextafter32(1.0/1024, 1), 1}, {1e-30, 0}, {-1e-30, 0x80}, {float32(math.Copysign(0, -1)), 0x80}} {
		if got := F32ToE4M3(tc.x); got != tc.want {
			t.Errorf("F32ToE4M3(%v) = %#02x, want %#02x", tc.x, got, tc.want)
		}
	}

	// Random values against the brute-force nearest code.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		x := float32(math.Ldexp(rng.Float64(), rng.IntN(20)-12)) // 2^-12 .. 2^8
		want := nearest(float64(x), codes, refE4M3)
		if got := F32ToE4M3(x); got != want {
			t.Fatalf("F32ToE4M3(%v) = %#02x, want %#02x", x, got, want)
		}
		if got := F32ToE4M3(-x); got != want|0x80 {
			t.Fatalf("F32ToE4M3(%v) = %#02x, want %#02x", -x, got, want|0x80)
		}
	}
}

func TestUE4M3AllCodes(t *testing.T) {
	for i := 0; i < 128; i++ {
		c := uint8(i)
		got, want := float64(UE4M3ToF32(c)), refE4M3(c)
		if math.IsInf(got, 0) || got < 0 {
			t.Fatalf("UE4M3ToF32(%#02x) = %v", c, got)
		}
		if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && got != want) {
			t.Fatalf("UE4M3ToF32(%#02x) = %v, want %v", c, got, want)
		}
		if c == 0x7F {
			if F32ToUE4M3(float32(math.NaN())) != 0x7F {
				t.Fatal("F32ToUE4M3(NaN) is not 0x7f")
			}
			continue
		}
		if e := F32ToUE4M3(float32(got)); e != c {
			t.Fatalf("F32ToUE4M3(%v) = %#02x, want %#02x", got, e, c)
		}
		if UE4M3ToF32(c|0x80) != UE4M3ToF32(c) {
			t.Fatalf("UE4M3ToF32(%#02x): the top bit is not ignored", c|0x80)
		}
	}
	codes := finiteCodes(128, func(c uint8) bool { return c == 0x7F })
	checkBoundaries(t, "F32ToUE4M3", codes, 0, refE4M3, F32ToUE4M3)
	for _, tc := range []struct {
		x    float32
		want uint8
	}{{-1, 0}, {-448, 0}, {float32(math.Inf(-1)), 0}, {1000, 0x7E}, {float32(math.Inf(1)), 0x7E}, {0, 0}} {
		if got := F32ToUE4M3(tc.x); got != tc.want {
			t.Errorf("F32ToUE4M3(%v) = %#02x, want %#02x", tc.x, got, tc.want)
		}
	}
}

func TestE2M1AllCodes(t *testing.T) {
	for i := 0; i < 16; i++ {
		c := uint8(i)
		got, want := float64(E2M1ToF32(c)), refE2M1(c)
		if got != want || math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("E2M1ToF32(%#x) = %v, want %v", c, got, want)
		}
		if c == 8 {
			if !math.Signbit(got) {
				t.Fatal("E2M1 code 0x8 is not -0")
			}
		}
		if e := F32ToE2M1(float32(got)); e != c {
			t.Fatalf("F32ToE2M1(%v) = %#x, want %#x", got, e, c)
		}
	}
	codes := finiteCodes(8, func(uint8) bool { return false })
	checkBoundaries(t, "F32ToE2M1", codes, 8, refE2M1, F32ToE2M1)
	for _, x := range []float32{6, 6.5, 7, 100, float32(math.Inf(1))} {
		if F32ToE2M1(x) != 7 || F32ToE2M1(-x) != 15 {
			t.Errorf("F32ToE2M1(±%v) does not saturate at ±6", x)
		}
	}
	if F32ToE2M1(float32(math.NaN())) != 0 {
		t.Error("F32ToE2M1(NaN) is not 0")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		x := float32(rng.Float64() * 7)
		want := nearest(float64(x), codes, refE2M1)
		if got := F32ToE2M1(x); got != want {
			t.Fatalf("F32ToE2M1(%v) = %#x, want %#x", x, got, want)
		}
	}
}
