package tensor

// arm64 has these NEON kernels so far: the F32 dot product in
// ggml_vec_dot_f32's order (dot_arm64.s, ASIMD being part of every arm64
// CPU), W4A4 (nvfp4_arm64.s, with SDOT;
// useNEONDot), Q8_0 and NVFP4 W4A8 (q8neon_arm64.s, with SDOT, through
// dotQ8RowsSIMD and dotNVFP4Q8RowsSIMD below), and F16 and BF16 for one
// vector (half_arm64.s, dotHalfRowsSIMD below); the other products run
// their plain-Go twins (useSIMD is false).
const useSIMD = false

const useNEON = true

// ggmlDotF32Blocks: nblk blocks of 32 columns into ggml_vec_dot_f32's 32
// lane accumulators, lane = fma(w, x, lane), the exact fused step
// ggmlDotF32's twin emulates.
//
//go:noescape
func ggmlDotF32Blocks(w, x *float32, nblk int, acc *[32]float32)

// dotHalfRowsSIMD sets dst[r] to the dotF16 (bf false) or dotBF16 (bf
// true) product of row r of w (cols values each) with x, in the NEON
// kernels of half_arm64.s. dot.go reaches it only where its dispatch asks
// for useNEON too (useSIMD is false here).
func dotHalfRowsSIMD(dst []float32, w []uint16, cols int, x []float32, bf bool) {
	x = x[:cols]
	for r := range dst {
		if bf {
			dst[r] = dotBF16NEON(w[r*cols:(r+1)*cols], x)
		} else {
			dst[r] = dotF16NEON(w[r*cols:(r+1)*cols], x)
		}
	}
}

func dotHalfMatSIMD(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no SIMD kernels")
}

// dotQ8RowsSIMD sets dst[r] = dotQ8(row r of data, act) with the NEON
// kernel of q8neon_arm64.s where the CPU has SDOT (useNEONDot), else with
// the twin. dot.go reaches it only where its dispatch asks for useNEONDot
// too (useSIMD is false here).
func dotQ8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	for r := range dst {
		row := data[r*rowBytes : (r+1)*rowBytes]
		if useNEONDot {
			dst[r] = dotQ8NEON(row, act)
		} else {
			dst[r] = dotQ8(row, act)
		}
	}
}

// dotNVFP4Q8SIMD is dotNVFP4Q8, in NEON where the CPU has SDOT.
func dotNVFP4Q8SIMD(row []byte, act []q8Act) float32 {
	if useNEONDot {
		return dotNVFP4Q8NEON(row, act)
	}
	return dotNVFP4Q8(row, act)
}

func dotNVFP4FP4SIMD(row []byte, act []fp4Act) float32 { panic("tensor: no SIMD kernels") }

// dotNVFP4Q8RowsSIMD sets dst[r] = dotNVFP4Q8(row r of data, act) (W4A8).
func dotNVFP4Q8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	for r := range dst {
		dst[r] = dotNVFP4Q8SIMD(data[r*rowBytes:(r+1)*rowBytes], act)
	}
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
