package tensor

// CPUKernels names the kernels this CPU runs, and whether they are the
// SIMD ones: without AVX2, FMA and F16C every product runs its plain-Go
// twin, exact and several times slower.
func CPUKernels() (name string, simd bool) {
	switch {
	case !useSIMD:
		return "plain Go (this CPU lacks AVX2, FMA or F16C)", false
	case hasAVX512VNNI:
		return "AVX-512 VNNI", true
	case useVNNI:
		return "AVX2 with AVX-VNNI", true
	}
	return "AVX2", true
}
