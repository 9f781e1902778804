package tensor

import (
	"flag"
	"math"
	"runtime"
	"sort"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

var exhaustive = flag.Bool("exhaustive", false, "compare F32ToF16 with ggml's algorithm over all 2^32 inputs (about a minute)")

// f16Value decodes an F16 code straight from the IEEE 754 definition, in
// float64: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
func f16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(m/1024, -14)
	case 31:
		if m == 0 {
			return s * math.Inf(1)
		}
		return math.NaN()
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

// ggmlF16ToF32 and ggmlF32ToF16 transcribe ggml_compute_fp16_to_fp32 and
// ggml_compute_fp32_to_fp16 (ggml/src/ggml-impl.h), float tricks included, as
// a second reference for the integer versions.
func ggmlF16ToF32(h uint16) float32 {
	w := uint32(h) << 16
	sign := w & 0x80000000
	twoW := w + w
	const expOffset = uint32(0xE0) << 23
	normalized := float32(math.Float32frombits((twoW>>4)+expOffset) * 0x1.0p-112)
	const magicMask = uint32(126) << 23
	denormalized := float32(math.Float32frombits((twoW>>17)|magicMask) - 0.5)
	var bits uint32
	if twoW < 1<<27 {
		bits = math.Float32bits(denormalized)
	} else {
		bits = math.Float32bits(normalized)
	}
	return math.Float32frombits(sign | bits)
}

func ggmlF32ToF16(f float32) uint16 {
	base := float32(float32(float32(math.Abs(float64(f)))*0x1.0p+112) * 0x1.0p-110)
	w := math.Float32bits(f)
	shl1W := w + w
	sign := w & 0x80000000
	bias := shl1W & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits((bias>>1)+0x07800000) + base)
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007C00
	mantissaBits := bits & 0x00000FFF
	nonsign := expBits + mantissaBits
	if shl1W > 0xFF000000 {
		return uint16(sign>>16) | 0x7E00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func TestF16ToF32AllCodes(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := F16ToF32(h)
		want := f16Value(h)
		if math.IsNaN(want) {
			// NaN keeps sign and payload, quieted.
			wantBits := uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(h&0x3ff)<<13
			if b := math.Float32bits(got); b != wantBits {
				t.Fatalf("F16ToF32(%#04x) = %#08x, want NaN %#08x", h, b, wantBits)
			}
		} else if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, got, want)
		}
		if g := ggmlF16ToF32(h); math.Float32bits(g) != math.Float32bits(got) {
			t.Fatalf("F16ToF32(%#04x) = %#08x, ggml's algorithm gives %#08x", h, math.Float32bits(got), math.Float32bits(g))
		}
		if f16Table[h] != got && !math.IsNaN(float64(got)) {
			t.Fatalf("f16Table[%#04x] = %g, want %g", h, f16Table[h], got)
		}
	}
}

func TestF16RoundTrip(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		back := F32ToF16(F16ToF32(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 { // NaN stays NaN, canonical payload
			if back != h&0x8000|0x7e00 {
				t.Fatalf("F16 NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != h {
			t.Fatalf("F16 %#04x -> %g -> %#04x", h, F16ToF32(h), back)
		}
	}
}

// f16Positive lists the values of the non-negative finite F16 codes in order,
// followed by 65536, where Inf would be if the format had one more binade: a
// value rounds to Inf when it is nearer to 65536 than to 65504, or tied.
var f16Positive = func() []float64 {
	v := make([]float64, 0x7c01)
	for h := 0; h < 0x7c00; h++ {
		v[h] = f16Value(uint16(h))
	}
	v[0x7c00] = 65536
	return v
}()

// refF32ToF16 rounds f to F16 by searching the table of F16 values: nearest,
// ties to the even code.
func refF32ToF16(f float32) uint16 {
	if math.IsNaN(float64(f)) {
		return uint16(math.Float32bits(f)>>16)&0x8000 | 0x7e00
	}
	var sign uint16
	a := float64(f)
	if math.Signbit(a) {
		sign, a = 0x8000, -a
	}
	if a >= 65536 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(f16Positive, a) // first value >= a
	if f16Positive[i] == a {
		return sign | uint16(i)
	}
	lo, hi := f16Positive[i-1], f16Positive[i]
	switch {
	case a-lo < hi-a:
		return sign | uint16(i-1)
	case a-lo > hi-a:
		return sign | uint16(i)
	case (i-1)%2 == 0:
		return sign | uint16(i-1)
	}
	return sign | uint16(i)
}

func TestF32ToF16Boundaries(t *testing.T) {
	// Every F16 value, every midpoint between neighbours and the floats just
	// around them, both signs: all the places where rounding decides.
	var cases []float32
	for h := 0; h < 0x7c00; h++ {
		v := float32(f16Positive[h])
		mid := float32((f16Positive[h] + f16Positive[h+1]) / 2) // exact in F32
		for _, f := range []float32{v, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9),
			math.Nextafter32(v, 0), math.Nextafter32(v, 1e9)} {
			cases = append(cases, f, -f)
		}
	}
	cases = append(cases, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, 1e-45, 1e-40,
		math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000), math.Float32frombits(0x7fbfffff))
	for _, f := range cases {
		got, want := F32ToF16(f), refF32ToF16(f)
		if got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
		if g := ggmlF32ToF16(f); g != got {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, ggml's algorithm gives %#04x", f, math.Float32bits(f), got, g)
		}
	}
}

func TestF32ToF16Random(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := math.Float32frombits(rapid.Uint32().Draw(t, "bits"))
		got, want := F32ToF16(f), refF32ToF16(f)
		if got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
		if g := ggmlF32ToF16(f); g != got {
			t.Fatalf("F32ToF16(%#08x) = %#04x, ggml's algorithm gives %#04x", math.Float32bits(f), got, g)
		}
	})
}

// TestF32ToF16Exhaustive compares with ggml's algorithm on every F32 input;
// run it with -exhaustive.
func TestF32ToF16Exhaustive(t *testing.T) {
	if !*exhaustive {
		t.Skip("run with -exhaustive")
	}
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	bad := make(chan uint32, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w uint64) {
			defer wg.Done()
			for u := w; u < 1<<32; u += uint64(workers) {
				f := math.Float32frombits(uint32(u))
				if F32ToF16(f) != ggmlF32ToF16(f) {
					bad <- uint32(u)
					return
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	close(bad)
	for u := range bad {
		t.Errorf("F32ToF16(%#08x) = %#04x, ggml's algorithm gives %#04x", u, F32ToF16(math.Float32frombits(u)), ggmlF32ToF16(math.Float32frombits(u)))
	}
}

// Known bit patterns from the IEEE formats.
func TestHalfKnownPatterns(t *testing.T) {
	f16 := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125}, {0x7bff, 65504},
		{0x0400, 0x1p-14}, {0x03ff, 0x1.ff8p-15}, {0x0001, 0x1p-24}, {0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))}, {0x3800, 0.5}, {0x4900, 10},
	}
	for _, c := range f16 {
		if got := F16ToF32(c.h); got != c.f {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.h, got, c.f)
		}
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if got := F32ToF16(float32(math.Copysign(0, -1))); got != 0x8000 {
		t.Errorf("F32ToF16(-0) = %#04x, want 0x8000", got)
	}
	// Ties: 1 + 2^-11 is halfway between 1 and 1+2^-10 -> even (1);
	// 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9 -> even (1+2^-9).
	ties := []struct {
		f float32
		h uint16
	}{{1 + 0x1p-11, 0x3c00}, {1 + 3*0x1p-11, 0x3c02}, {65519, 0x7bff}, {65520, 0x7c00}, {0x1p-25, 0}, {0x1.000002p-25, 1}, {3 * 0x1p-25, 2}}
	for _, c := range ties {
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}

	bf16 := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {3.140625, 0x4049}, {float32(math.Inf(1)), 0x7f80},
		{1 + 0x1p-8, 0x3f80},   // tie -> even
		{1 + 3*0x1p-8, 0x3f82}, // tie -> even (up)
		{1 + 0x1.02p-8, 0x3f81},
		{math.MaxFloat32, 0x7f80}, // rounds up to Inf
		{math.Float32frombits(0x00000001), 0x0000},
		{math.Float32frombits(0x00008000), 0x0000}, // tie, even
		{math.Float32frombits(0x00018000), 0x0002}, // tie, odd -> up
	}
	for _, c := range bf16 {
		if got := F32ToBF16(c.f); got != c.h {
			t.Errorf("F32ToBF16(%g = %#08x) = %#04x, want %#04x", c.f, math.Float32bits(c.f), got, c.h)
		}
	}
	// NaN: quiet bit forced, sign and top payload kept.
	for _, c := range []struct{ in, want uint32 }{{0x7f800001, 0x7fc0}, {0xff800001, 0xffc0}, {0x7fc00000, 0x7fc0}, {0x7fa10000, 0x7fe1}} {
		if got := F32ToBF16(math.Float32frombits(c.in)); uint32(got) != c.want {
			t.Errorf("F32ToBF16(NaN %#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestBF16AllCodes(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		back := F32ToBF16(f)
		if math.IsNaN(float64(f)) {
			if back != h|64 {
				t.Fatalf("BF16 NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != h {
			t.Fatalf("BF16 %#04x -> %g -> %#04x", h, f, back)
		}
	}
}

// refF32ToBF16 rounds through float64 arithmetic: nearest of the two
// neighbouring BF16 values, ties to the even code.
func refF32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if math.IsNaN(float64(f)) {
		return uint16(u>>16) | 64
	}
	lo := uint16(u >> 16) // truncation: toward zero
	if u&0xffff == 0 {
		return lo
	}
	a := math.Abs(float64(f))
	la := math.Abs(float64(BF16ToF32(lo)))
	var ha float64
	if lo&0x7fff == 0x7f7f { // next magnitude is Inf: compare with 2^128
		ha = math.Ldexp(1, 128)
	} else {
		ha = math.Abs(float64(BF16ToF32(lo + 1)))
	}
	switch {
	case a-la < ha-a:
		return lo
	case a-la > ha-a:
		return lo + 1
	case lo&1 == 0:
		return lo
	}
	return lo + 1
}

func TestF32ToBF16Random(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := math.Float32frombits(rapid.Uint32().Draw(t, "bits"))
		if got, want := F32ToBF16(f), refF32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, want)
		}
	})
}
