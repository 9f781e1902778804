package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRoundF16 checks RoundF16 (and its inline fast path) against the full
// trip F16ToF32(F32ToF16(f)) on every F16 value, the neighbours of every
// midpoint between F16 values, the range boundaries and random floats.
func TestRoundF16(t *testing.T) {
	check := func(f float32) {
		want := math.Float32bits(F16ToF32(F32ToF16(f)))
		if got := math.Float32bits(RoundF16(f)); got != want {
			t.Fatalf("RoundF16(%#08x) = %#08x, want %#08x", math.Float32bits(f), got, want)
		}
		if r, ok := RoundF16Normal(f); ok && math.Float32bits(r) != want {
			t.Fatalf("RoundF16Normal(%#08x) = %#08x, want %#08x", math.Float32bits(f), math.Float32bits(r), want)
		}
	}
	for h := 0; h < 1<<16; h++ {
		b := math.Float32bits(F16ToF32(uint16(h)))
		for d := uint32(0); d < 3; d++ {
			check(math.Float32frombits(b + d))
			check(math.Float32frombits(b - d))
			// midpoint towards the next F16 value, and its neighbours
			check(math.Float32frombits(b + 0x1000 + d))
			check(math.Float32frombits(b + 0x1000 - d))
		}
	}
	for _, b := range []uint32{0x38800000, 0x387fffff, 0x477ff000, 0x477fefff, 0x477ff001, 0x33000000, 0x7f800000, 0x7fc00001} {
		check(math.Float32frombits(b))
		check(math.Float32frombits(b | 0x80000000))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1 << 22 {
		check(math.Float32frombits(r.Uint32()))
	}
}
