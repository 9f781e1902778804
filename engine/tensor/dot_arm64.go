package tensor

// arm64 has two NEON kernels so far: the F32 dot product (dot_arm64.s,
// ASIMD being part of every arm64 CPU) and W4A4 (nvfp4_arm64.s, with
// SDOT; useNEONDot); the other products run their plain-Go twins (useSIMD
// is false).
const useSIMD = false

const useNEON = true

// dotF32Lanes: nblk blocks of eight columns into eight lane accumulators,
// lane = fma(w, x, lane), the exact fused step dotF32 emulates.
//
//go:noescape
func dotF32Lanes(w, x *float32, nblk int, lanes *[8]float32)

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
