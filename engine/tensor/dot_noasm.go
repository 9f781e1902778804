//go:build !amd64 && !arm64

package tensor

// No SIMD kernels on this architecture:
// the plain-Go twins in kernels.go run.
const useSIMD = false

// useNEON: no arm64 kernels either.
const useNEON = false

func ggmlDotF32Blocks(w, x *float32, nblk int, acc *[32]float32) { panic("tensor: no SIMD kernels") }

func dotHalfRowsSIMD(dst []float32, w []uint16, cols int, x []float32, bf bool) {
	panic("tensor: no SIMD kernels")
}

func dotHalfMatSIMD(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no SIMD kernels")
}

func dotQ8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	panic("tensor: no SIMD kernels")
}

func dotNVFP4Q8SIMD(row []byte, act []q8Act) float32 { panic("tensor: no SIMD kernels") }

func dotNVFP4FP4SIMD(row []byte, act []fp4Act) float32 { panic("tensor: no SIMD kernels") }

func dotNVFP4Q8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	panic("tensor: no SIMD kernels")
}

func dotNVFP4FP4RowsSIMD(dst []float32, data []byte, rowBytes int, act []fp4Act, invG float32) {
	panic("tensor: no SIMD kernels")
}

func dotE4M3SIMD(k []byte, x []float32) float32 { panic("tensor: no SIMD kernels") }

func axpyE4M3SIMD(y []float32, v []byte, a float32) { panic("tensor: no SIMD kernels") }

// f32Sum is ggmlReduce32 of ggmlDotF32Blocks's lanes (nblk > 0).
func f32Sum(w, x *float32, nblk int) float32 {
	var acc [32]float32
	ggmlDotF32Blocks(w, x, nblk, &acc)
	return ggmlReduce32(&acc)
}

// f32Sum2 is f32Sum of the row w against x0 and x1.
func f32Sum2(w, x0, x1 *float32, nblk int, sums *[2]float32) {
	sums[0], sums[1] = f32Sum(w, x0, nblk), f32Sum(w, x1, nblk)
}
