package tensor

import (
	"fmt"
	"testing"

	"golang.org/x/sys/cpu"
)

// The AVX-512 forms of SiLU's blocks and of the delta-rule step give the
// bits of the AVX2 kernels and the twins (the SiLU and DeltaStep tests,
// run with each) on a CPU that has AVX-512; the AVX2 kernels are checked
// here too, since SiLU and DeltaStep pick the AVX-512 ones where they can.
func TestVec512MatchesAVX2(t *testing.T) {
	requireSIMD(t)
	if !cpu.X86.HasAVX512F {
		t.Skip("CPU lacks AVX-512 F: siluBlocks16 and deltaStepRows2 were NOT run")
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
			TestDeltaStepSIMDMatchesGo(t)
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

// BenchmarkDeltaStep512: one DeltaStep per head of a 128-wide state over 1
// head (in L1/L2), 16 (a layer of the bench model, in L2) and 576 (four
// sequences of the bench model's 9 DeltaNet layers: 36 MiB, from L3 or
// memory), AVX2 (deltaStepRows) against AVX-512 (deltaStepRows2).
func BenchmarkDeltaStep512(b *testing.B) {
	if !useSIMD || !cpu.X86.HasAVX512F {
		b.Skip("CPU lacks AVX-512 F")
	}
	defer func() { useVec512 = true }()
	const dk = 128
	for _, heads := range []int{1, 16, 576} {
		S := make([]float32, heads*dk*dk)
		for i := range S {
			S[i] = float32(i%13) / 13
		}
		q, k, v, o := make([]float32, dk), make([]float32, dk), make([]float32, dk), make([]float32, dk)
		for i := range k {
			q[i], k[i], v[i] = 0.01*float32(i%7), 0.02*float32(i%5), 0.1
		}
		for _, on := range []bool{false, true} {
			name := "avx2"
			if on {
				name = "avx512"
			}
			b.Run(fmt.Sprintf("heads=%d/%s", heads, name), func(b *testing.B) {
				useVec512 = on
				for b.Loop() {
					for h := range heads { // eg = 1: the state keeps its scale
						DeltaStep(S[h*dk*dk:(h+1)*dk*dk], q, k, v, 1, 0.5, 0.088, o)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*heads), "ns/head")
			})
		}
	}
}
