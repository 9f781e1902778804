//go:build !amd64

package tensor

// No SIMD kernels on this architecture yet (arm64 NEON is still to come):
// the plain-Go twins in kernels.go run.
const useSIMD = false

func dotF32SIMD(w, x []float32) float32 { panic("tensor: no SIMD kernels") }

func dotHalfRowsSIMD(dst []float32, w []uint16, cols int, x []float32, bf bool) {
	panic("tensor: no SIMD kernels")
}

func dotHalfMatSIMD(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no SIMD kernels")
}

func dotQ8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	panic("tensor: no SIMD kernels")
}
