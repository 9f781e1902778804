package model

import (
	"math"
	"unsafe"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Scalar twins of the ggml-cpu vector routines that decide tokens inside
// attention and the Gated DeltaNet recurrence. They reproduce the summation
// order and rounding of llama.cpp's x86 AVX2+FMA build (the "haswell" CPU
// variant node-llama-cpp 3.22.1 loads on this machine; vec.cpp compiled with
// GCC, whose -ffp-contract=fast turns a*b+c into an FMA): 4 accumulators of
// 8 lanes over blocks of 32, a fixed tree reduction, then the leftovers.
// Other builds (AVX-512, NEON) sum in another order and differ in the last
// bits. The fast paths (useAttnKernels) run engine/tensor's attn_* kernels,
// which reproduce these loops bit for bit; these stay the reference loops
// (and the F32 cache's tinyBLAS case).

// reduce32 is GGML_F32x8_REDUCE over 4 vectors of 8 lanes (acc[j*8+l]).
func reduce32(acc *[32]float32) float32 {
	var x0, x1 [8]float32
	for l := 0; l < 8; l++ {
		x0[l] = acc[l] + acc[16+l] // x[0] += x[2]
		x1[l] = acc[8+l] + acc[24+l]
	}
	for l := 0; l < 8; l++ {
		x0[l] += x1[l] // x[0] += x[1]
	}
	var t0 [4]float32
	for l := 0; l < 4; l++ {
		t0[l] = x0[l] + x0[4+l] // low half + high half
	}
	return (t0[0] + t0[1]) + (t0[2] + t0[3]) // two hadds
}

// hsum8 is tinyBLAS's hsum of one __m256 (and the block sum of
// ggml_vec_soft_max_f32): the high half added to the low, then the two
// horizontal adds.
func hsum8(l *[8]float32) float32 {
	a0, a1, a2, a3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
	return (a0 + a2) + (a1 + a3)
}

// sgemmF32 sets dst[v*rows+r] to tinyDot(row r of m, vector v of x): the
// F32 product of n rows under Options.SgemmF32 (the caller checks the shape
// tinyBLAS takes).
func sgemmF32(dst []float32, m tensor.Matrix, x []float32, n int) {
	rows, cols := m.Rows, m.Cols
	w := unsafe.Slice((*float32)(unsafe.Pointer(&m.Data[0])), rows*cols)
	for v := 0; v < n; v++ {
		xv := x[v*cols : (v+1)*cols]
		for r := 0; r < rows; r++ {
			dst[v*rows+r] = tinyDot(w[r*cols:(r+1)*cols], xv)
		}
	}
}

// tinyDot is one output of llamafile's tinyBLAS F32 sgemm (AVX2): one
// 8-lane FMA accumulator over the row, then hsum8. len(x) is a multiple of 8.
func tinyDot(x, y []float32) float32 {
	var acc [8]float32
	for i := 0; i < len(x); i += 8 {
		for l := 0; l < 8; l++ {
			acc[l] = fma32(x[i+l], y[i+l], acc[l])
		}
	}
	return hsum8(&acc)
}

// dotF16 is ggml_vec_dot_f16 over an F16 vector x and a vector y of F16
// values held widened in float32: products of two halves are exact in
// float32, the SIMD blocks accumulate in float32 lanes, the leftovers in
// float64 (ggml_float), and the result is rounded to float32.
func dotF16(x []uint16, y []float32) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 31
	var sum float64
	if np > 0 {
		var acc [32]float32
		for i := 0; i < np; i += 32 {
			xx := (*[32]uint16)(x[i : i+32])
			yy := (*[32]float32)(y[i : i+32])
			for j := range acc {
				acc[j] += tensor.F16ToF32(xx[j]) * yy[j]
			}
		}
		sum = float64(reduce32(&acc))
	}
	for i := np; i < n; i++ {
		sum += float64(tensor.F16ToF32(x[i]) * y[i])
	}
	return float32(sum)
}

// madF32 is ggml_vec_mad_f32: y += x*v, fused.
func madF32(y, x []float32, v float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] = fma32(x[i], v, y[i])
	}
}

// madF16 is ggml_vec_mad_f16 on an F16 accumulator: y = f16(x*v + y),
// fused. The accumulator y holds F16 values widened to float32 (every
// store rounds through F16), which saves converting it back and forth.
func madF16(y []float32, x []uint16, v float32) {
	x = x[:len(y)]
	for i := range y {
		r := fma32(tensor.F16ToF32(x[i]), v, y[i])
		if f, ok := tensor.RoundF16Normal(r); ok {
			y[i] = f
		} else {
			y[i] = tensor.RoundF16(r)
		}
	}
}

// scaleF16 is ggml_vec_scale_f16 on an accumulator of widened F16
// values: y = f16(y*v).
func scaleF16(y []float32, v float32) {
	for i := range y {
		r := y[i] * v
		if f, ok := tensor.RoundF16Normal(r); ok {
			y[i] = f
		} else {
			y[i] = tensor.RoundF16(r)
		}
	}
}

// vExpf is one lane of ggml's AVX2 ggml_v_expf (vec.h), the polynomial
// exponential that ggml_vec_soft_max_f32 and the SIMD SiLU use: maximum
// error about 1.5 ulp, flushing below -103.97 to zero. It is
// engine/tensor's expf32 (tensor.VExpf) with this package's inlined fma32,
// which rounds twice where the exact one rounds once only in halfway cases:
// about 4x faster (19.4 against 84.4 ns a value: go test ./engine/model
// -run '^$' -bench BenchmarkVExpf, "AMD EPYC" with 2 shared cores at load
// 7), and the same bits (TestVExpfIsTensors).
func vExpf(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, float32(0x1.ffffecp-1*b))
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma32(s2, j, s2) * s1
}
