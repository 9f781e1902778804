//go:build !amd64 && !arm64

package tensor

// CPUKernels names the kernels this CPU runs: on this architecture every
// product is its plain-Go twin, exact and slow.
func CPUKernels() (name string, simd bool) {
	return "plain Go (no SIMD kernels for this architecture)", false
}
