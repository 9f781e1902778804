package tensor

// CPUKernels names the kernels this CPU runs, and whether they are the
// SIMD ones: the K-quant, legacy and NVFP4 products need the dot-product
// extension (SDOT: Cortex-A55/A75 and later, every Jetson since Xavier);
// without it they run their plain-Go twins, exact and several times
// slower (Raspberry Pi 3 and 4, the first Jetson Nano).
func CPUKernels() (name string, simd bool) {
	if !useNEONDot {
		return "NEON without the dot-product extension (block-type products in plain Go)", false
	}
	return "NEON with dot product", true
}
