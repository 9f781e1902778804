package tensor

// Row-range dot products with one vector, the entry points of MatVec and
// of MatMul's F32, Q8_0 and NVFP4 (W4A8, W4A4) products (MatMul calls
// dotHalfMatSIMD for several vectors of F16 and BF16 itself). Each but F32
// (ggmlDotF32, plain Go for now) runs the SIMD kernel of this architecture
// where the CPU has one (useSIMD: AVX2 on amd64, see dot_amd64.s and
// nvfp4_amd64.s; useNEON on arm64) and its plain-Go twin in kernels.go,
// nvfp4.go or nvfp4a4.go otherwise; the two give the same bits, which
// dot_amd64_test.go, nvfp4_amd64_test.go and dot_arm64_test.go check.

// dotF32Rows sets dst[r] = ggmlDotF32(row r of w, x); rows have cols
// values. F32 weights take ggml_vec_dot_f32's order (four 8-lane
// accumulators over blocks of 32, then the leftovers one by one), the
// product llama.cpp runs for them whenever its tinyBLAS sgemm does not take
// the shape (always for one token, and for any batch when the columns are not
// a multiple of 8, like stories260K's 172-column ffn_down, which NVFP4 files
// keep in F32). With an eight-lane order instead, those rows differed from
// llama.cpp's in the last bit, and W4A8's activation quantizer turned that
// into different tokens on a few prompts in ten (testdata/nvfp4/README.md).
// The same order serves every batch size, so a row's bits stay independent of
// the other rows of a pass.
func dotF32Rows(dst, w []float32, cols int, x []float32) {
	for r := range dst {
		dst[r] = ggmlDotF32(w[r*cols:(r+1)*cols], x)
	}
}

// dotF32Rows2 is dotF32Rows for two vectors x0 and x1 (dst0 and dst1 their
// outputs), each weight block read once for both: the same sums.
func dotF32Rows2(dst0, dst1, w []float32, cols int, x0, x1 []float32) {
	np := cols &^ 31
	if np == 0 || !(useSIMD || useNEON) {
		dotF32Rows(dst0, w, cols, x0)
		dotF32Rows(dst1, w, cols, x1)
		return
	}
	x0, x1 = x0[:cols], x1[:cols]
	dst1 = dst1[:len(dst0)]
	var s [2]float32
	for r := range dst0 {
		wr := w[r*cols : (r+1)*cols]
		f32Sum2(&wr[0], &x0[0], &x1[0], np/32, &s)
		dst0[r] = ggmlDotF32Tail(wr, x0, np, s[0])
		dst1[r] = ggmlDotF32Tail(wr, x1, np, s[1])
	}
}

// dotF16Rows sets dst[r] = dotF16(row r of w, x).
func dotF16Rows(dst []float32, w []uint16, cols int, x []float32) {
	if useSIMD || useNEON {
		dotHalfRowsSIMD(dst, w, cols, x, false)
		return
	}
	for r := range dst {
		dst[r] = dotF16(w[r*cols:(r+1)*cols], x)
	}
}

// dotBF16Rows sets dst[r] = dotBF16(row r of w, x).
func dotBF16Rows(dst []float32, w []uint16, cols int, x []float32) {
	if useSIMD || useNEON {
		dotHalfRowsSIMD(dst, w, cols, x, true)
		return
	}
	for r := range dst {
		dst[r] = dotBF16(w[r*cols:(r+1)*cols], x)
	}
}

// dotQ8Rows sets dst[r] = dotQ8(row r of data, act); rows have rowBytes bytes.
func dotQ8Rows(dst []float32, data []byte, rowBytes int, act []q8Act) {
	if useSIMD || useNEONDot {
		dotQ8RowsSIMD(dst, data, rowBytes, act)
		return
	}
	for r := range dst {
		dst[r] = dotQ8(data[r*rowBytes:(r+1)*rowBytes], act)
	}
}

// dotNVFP4Q8Rows sets dst[r] = dotNVFP4Q8(row r of data, act) (W4A8).
func dotNVFP4Q8Rows(dst []float32, data []byte, rowBytes int, act []q8Act) {
	if useSIMD || useNEONDot {
		dotNVFP4Q8RowsSIMD(dst, data, rowBytes, act)
		return
	}
	for r := range dst {
		dst[r] = dotNVFP4Q8(data[r*rowBytes:(r+1)*rowBytes], act)
	}
}

// dotNVFP4FP4Rows sets dst[r] = dotNVFP4FP4(row r of data, act) * invG
// (W4A4).
func dotNVFP4FP4Rows(dst []float32, data []byte, rowBytes int, act []fp4Act, invG float32) {
	if useSIMD {
		dotNVFP4FP4RowsSIMD(dst, data, rowBytes, act, invG)
		return
	}
	for r := range dst {
		row := data[r*rowBytes : (r+1)*rowBytes]
		if useNEONDot {
			dst[r] = dotNVFP4FP4NEON(row, act) * invG
		} else {
			dst[r] = dotNVFP4FP4(row, act) * invG
		}
	}
}
