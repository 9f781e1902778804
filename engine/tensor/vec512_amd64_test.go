package tensor

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// The AVX-512 form of SiLU's blocks gives the bits of the AVX2 kernel and
// the twin (the SiLU tests, run with each) on a CPU that has AVX-512; the
// AVX2 kernel is checked here too, since SiLU picks the AVX-512 one where
// it can.
func TestVec512MatchesAVX2(t *testing.T) {
	requireSIMD(t)
	if !cpu.X86.HasAVX512F {
		t.Skip("CPU lacks AVX-512 F: siluBlocks16 was NOT run")
	}
	defer func() { useVec512 = true }()
	for _, on := range []bool{true, false} {
		useVec512 = on
		name := "avx2"
		if on {
			name = "avx512"
		}
		t.Run(name, func(t *testing.T) {
			TestSiLU(t)
			TestSiLUBlocksMatchScalar(t)
		})
	}
}

// BenchmarkVec512: SiLU over an FFN row of the bench model (3584 values),
// AVX2 against AVX-512.
func BenchmarkVec512(b *testing.B) {
	if !useSIMD || !cpu.X86.HasAVX512F {
		b.Skip("CPU lacks AVX-512 F")
	}
	defer func() { useVec512 = true }()
	x := make([]float32, 3584)
	for i := range x {
		x[i] = float32(i%97)/10 - 4.8
	}
	for _, on := range []bool{false, true} {
		name := "avx2"
		if on {
			name = "avx512"
		}
		b.Run("silu/"+name, func(b *testing.B) {
			useVec512 = on
			y := make([]float32, len(x))
			for b.Loop() {
				copy(y, x)
				SiLU(y)
			}
		})
	}
}
