package tensor

import (
	"strings"
	"testing"
)

// CPUKernels says plain Go exactly when the SIMD kernels are off, so the
// engine's start warns on such CPUs.
func TestCPUKernels(t *testing.T) {
	name, simd := CPUKernels()
	if simd != useSIMD || name == "" {
		t.Fatalf("CPUKernels() = %q, %v with useSIMD %v", name, simd, useSIMD)
	}
	defer func(v bool) { useSIMD = v }(useSIMD)
	useSIMD = false
	if name, simd := CPUKernels(); simd || !strings.Contains(name, "plain Go") {
		t.Fatalf("without AVX2: CPUKernels() = %q, %v", name, simd)
	}
}
