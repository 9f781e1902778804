//go:build !amd64

package tensor

// No AVX-512 kernels on this architecture.
const useVNNI = false

const vnniActBytes = 96

func vnniSlots(n int) int { return n }

func packVNNI(dst []byte, act []q8Act, v, n int, nibble bool) {
	panic("tensor: no VNNI kernels")
}

func gemmQ8VnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	panic("tensor: no VNNI kernels")
}

func gemmNVVnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	panic("tensor: no VNNI kernels")
}

const useHalf512 = false

func gemmHalfRowsZ(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no AVX-512 kernels")
}
