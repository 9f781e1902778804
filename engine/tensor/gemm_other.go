//go:build !amd64 && !arm64

package tensor

// No tile kernels on this architecture (useSIMD is false).

func gemmQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, real int) {
	panic("tensor: no tile kernels")
}

func gemmHalfRows(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no tile kernels")
}

func gemmNVQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, real int) {
	panic("tensor: no tile kernels")
}

func gemmNVFP4Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []fp4Act, invG []float32, n int) {
	panic("tensor: no tile kernels")
}

// quantizeQ8Vector quantizes the len(dst) blocks of src for the Q8_0 and
// W4A8 products with quantizeActQ8_0.
func quantizeQ8Vector(dst []q8Act, src []float32) {
	src = src[:len(dst)*q8Block]
	for b := range dst {
		quantizeActQ8_0(&dst[b], src[b*q8Block:(b+1)*q8Block], actQ8Flavor)
	}
}
