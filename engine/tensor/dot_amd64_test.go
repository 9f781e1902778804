package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Each AVX2 kernel of dot_amd64.s against its plain-Go twin in kernels.go,
// on the same inputs: the bits must be equal.

func requireSIMD(t *testing.T) {
	t.Helper()
	if !useSIMD {
		t.Skip("CPU lacks AVX2, FMA or F16C: the SIMD kernels are off")
	}
}

// simdLengths covers empty rows, every tail length and a long row.
var simdLengths = []int{0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 4096, 4103}

func sameBitsOrFail(t *testing.T, what string, got, want float32) {
	t.Helper()
	if math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("%s: SIMD %g (%#08x), Go %g (%#08x)", what, got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// f32Inputs makes weight and activation rows of F32 values of several kinds.
func f32Inputs(r *rand.Rand, kind string, n int) (w, x []float32) {
	w, x = make([]float32, n), make([]float32, n)
	for i := range w {
		switch kind {
		case "normal":
			w[i], x[i] = float32(r.NormFloat64()*0.02), float32(r.NormFloat64())
		case "wide": // magnitudes from 1e-17 to 1e15: products stay normal and sums finite
			w[i] = float32(math.Copysign(math.Pow(10, r.Float64()*32-17), r.NormFloat64()))
			x[i] = float32(math.Copysign(math.Pow(10, r.Float64()*32-17), r.NormFloat64()))
		case "grid": // integers and halves: sums land on F32 midpoints often
			w[i] = float32(r.IntN(8193) - 4096)
			x[i] = float32(r.IntN(8193)-4096) / 2
		case "cancel": // pairs that cancel exactly, and ±0
			w[i] = float32(r.NormFloat64())
			x[i] = float32(r.NormFloat64())
			if i%16 >= 8 {
				w[i], x[i] = w[i-8], -x[i-8]
			}
			if r.IntN(10) == 0 {
				w[i] = float32(math.Copysign(0, r.NormFloat64()))
			}
		}
	}
	if kind == "grid" && n >= 16 {
		// acc = 2^24 in lane 0, then +1: a tie, which double rounding gets wrong.
		w[0], x[0], w[8], x[8] = 4096, 4096, 1, 1
	}
	return w, x
}

// TestDotF32SIMD: ggml_vec_dot_f32's blocks in AVX2 against the twin.
func TestDotF32SIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, kind := range []string{"normal", "wide", "grid", "cancel"} {
		for _, n := range simdLengths {
			for rep := 0; rep < 20; rep++ {
				w, x := f32Inputs(r, kind, n)
				if kind == "grid" && n >= 64 {
					w[32], x[32] = 1, 1 // the tie again, in lane 0 of 32
				}
				want := ggmlDotF32On(w, x, false)
				sameBitsOrFail(t, fmt.Sprintf("%s n=%d rep %d", kind, n, rep), ggmlDotF32On(w, x, true), want)
				// two vectors at once (dotF32Rows2), x as either of them
				_, x2 := f32Inputs(r, kind, n)
				want2 := ggmlDotF32On(w, x2, false)
				var d0, d1 [1]float32
				dotF32Rows2(d0[:], d1[:], w, n, x, x2)
				sameBitsOrFail(t, fmt.Sprintf("%s n=%d rep %d, two vectors, first", kind, n, rep), d0[0], want)
				sameBitsOrFail(t, fmt.Sprintf("%s n=%d rep %d, two vectors, second", kind, n, rep), d1[0], want2)
				dotF32Rows2(d0[:], d1[:], w, n, x2, x)
				sameBitsOrFail(t, fmt.Sprintf("%s n=%d rep %d, two vectors swapped", kind, n, rep), d1[0], want)
			}
		}
	}
}

// finiteHalf returns a random F16 (bf false) or BF16 code whose value is
// finite and whose products with other such values cannot overflow a sum of
// a few thousand terms; subnormals and ±0 included.
func finiteHalf(r *rand.Rand, bf bool) uint16 {
	if !bf {
		for {
			h := uint16(r.Uint32())
			if h&0x7c00 != 0x7c00 {
				return h
			}
		}
	}
	sign := uint16(r.IntN(2)) << 15
	exp := uint16(r.IntN(186)) // 0 (zero, subnormal) .. 2^58
	return sign | exp<<7 | uint16(r.IntN(128))
}

func halfInputs(r *rand.Rand, bf bool, rows, cols int) (w []uint16, x []float32) {
	w = make([]uint16, rows*cols)
	for i := range w {
		w[i] = finiteHalf(r, bf)
	}
	x = make([]float32, cols)
	for i := range x {
		if bf {
			x[i] = BF16ToF32(finiteHalf(r, bf))
		} else {
			x[i] = F16ToF32(finiteHalf(r, bf))
		}
	}
	if bf && r.IntN(3) == 0 {
		// Tiny values whose products fall below 2^-126, where F32 rounds
		// them (ties among them) and a fused multiply-add would not: the
		// kernels must round the product first, as the twins do.
		tiny := func() uint16 { return uint16(r.IntN(2))<<15 | uint16(127-72+r.IntN(5))<<7 | uint16(r.IntN(128)) }
		for i := range w {
			w[i] = tiny()
		}
		for i := range x {
			x[i] = BF16ToF32(tiny())
		}
		return w, x
	}
	if r.IntN(2) == 0 { // realistic magnitudes too
		for i := range w {
			f := float32(r.NormFloat64() * 0.02)
			if bf {
				w[i] = F32ToBF16(f)
			} else {
				w[i] = F32ToF16(f)
			}
		}
	}
	return w, x
}

func TestDotHalfSIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(8, 8))
	for _, bf := range []bool{false, true} {
		name, twin := "F16", dotF16
		if bf {
			name, twin = "BF16", dotBF16
		}
		for _, cols := range simdLengths {
			for _, rows := range []int{1, 3, 4, 5, 8, 11, 13, 18} {
				w, x := halfInputs(r, bf, rows, cols)
				got := make([]float32, rows)
				dotHalfRowsSIMD(got, w, cols, x, bf)
				for i := range got {
					want := twin(w[i*cols:(i+1)*cols], x)
					sameBitsOrFail(t, fmt.Sprintf("%s %dx%d row %d", name, rows, cols, i), got[i], want)
					one := dotF16SIMD
					if bf {
						one = dotBF16SIMD
					}
					sameBitsOrFail(t, fmt.Sprintf("%s one row %d of %dx%d", name, i, rows, cols), one(w[i*cols:(i+1)*cols], x), want)
				}
			}
		}
	}
}

// q8Inputs makes rows Q8_0 weight rows of nb blocks and nb activation
// blocks; rep picks the flavour: any finite F16 scale, extreme quants
// (every product 128*128), realistic values.
func q8Inputs(r *rand.Rand, rows, nb, rep int) ([]byte, []q8Act) {
	data := make([]byte, rows*nb*q8BlockBytes)
	for b := 0; b < rows*nb; b++ {
		blk := data[b*q8BlockBytes:]
		d := F32ToF16(float32(r.NormFloat64() * 0.01))
		if rep%3 == 0 {
			d = finiteHalf(r, false)
		}
		blk[0], blk[1] = byte(d), byte(d>>8)
		for k := 0; k < 32; k++ {
			blk[2+k] = byte(r.IntN(256)) // -128 included
			if rep%5 == 0 {
				blk[2+k] = 0x80
			}
		}
	}
	act := make([]q8Act, nb)
	for b := range act {
		for k := range act[b].q {
			act[b].q[k] = int8(r.IntN(256) - 128)
			if rep%5 == 0 {
				act[b].q[k] = -128
			}
		}
		act[b].d = float32(r.NormFloat64())
		if rep%3 == 0 {
			act[b].d = float32(math.Copysign(math.Pow(2, r.Float64()*40-30), r.NormFloat64()))
		}
	}
	return data, act
}

func TestDotQ8SIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(9, 9))
	for _, nb := range []int{0, 1, 2, 3, 7, 8, 128, 131} {
		for _, rows := range []int{1, 3, 4, 5, 8, 11, 13, 18} {
			for rep := 0; rep < 15; rep++ {
				data, act := q8Inputs(r, rows, nb, rep)
				rb := nb * q8BlockBytes
				got := make([]float32, rows)
				dotQ8RowsSIMD(got, data, rb, act)
				for i := range got {
					row := data[i*rb : (i+1)*rb]
					want := dotQ8(row, act)
					what := fmt.Sprintf("Q8_0 %d blocks, row %d of %d, rep %d", nb, i, rows, rep)
					sameBitsOrFail(t, what, got[i], want)
					sameBitsOrFail(t, what+" (one row)", dotQ8SIMD(row, act), want)
				}
			}
		}
	}
}

// MatMul through the SIMD kernels equals MatMul through the Go twins.
func TestMatMulSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(10, 10))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range weightTypes {
		for _, shape := range [][2]int{{1, 32}, {7, 64}, {33, 96}, {64, 4096}, {9, 8*32 + 32}} {
			rows, cols := shape[0], shape[1]
			if typ != Q8_0 && cols%8 == 0 {
				cols += 3 // a tail for the float kernels
			}
			m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.02))
			for _, n := range []int{1, 2, 3, 5} {
				x := randomRow(r, n*cols, 1)
				want, got := make([]float32, n*rows), make([]float32, n*rows)
				useSIMD = false
				p.MatMul(want, m, x, n)
				useSIMD = true
				p.MatMul(got, m, x, n)
				for i := range got {
					sameBitsOrFail(t, fmt.Sprintf("%s %dx%d n=%d out %d", typ, rows, cols, n, i), got[i], want[i])
				}
			}
		}
	}
}

// The four-rows-by-two-vectors kernels, odd vector counts and row ranges
// included, against dotF16 and dotBF16 one product at a time.
func TestDotHalfMatSIMD(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(11, 11))
	for _, bf := range []bool{false, true} {
		twin := dotF16
		if bf {
			twin = dotBF16
		}
		for _, cols := range simdLengths {
			for _, shape := range [][3]int{{0, 4, 1}, {0, 4, 2}, {1, 10, 3}, {2, 7, 5}, {0, 9, 4}, {3, 3, 2}} {
				lo, hi, n := shape[0], shape[1], shape[2]
				rows := hi + 1
				w, _ := halfInputs(r, bf, rows, cols)
				x := make([]float32, n*cols)
				for v := 0; v < n; v++ {
					_, xv := halfInputs(r, bf, 0, cols)
					copy(x[v*cols:], xv)
				}
				got := make([]float32, n*rows)
				dotHalfMatSIMD(got, w[lo*cols:hi*cols], x, lo, hi, cols, rows, n, bf)
				for v := 0; v < n; v++ {
					for row := lo; row < hi; row++ {
						want := twin(w[row*cols:(row+1)*cols], x[v*cols:(v+1)*cols])
						sameBitsOrFail(t, fmt.Sprintf("bf=%v cols=%d rows [%d,%d) n=%d: row %d vector %d", bf, cols, lo, hi, n, row, v), got[v*rows+row], want)
					}
				}
			}
		}
	}
}

// BenchmarkMatVecSIMD runs MatVec (and MatMul with 16 vectors) on one
// thread through the SIMD kernels and through the Go twins, and reports
// weight GB/s and products per second.
func BenchmarkMatVecSIMD(b *testing.B) {
	if !useSIMD {
		b.Skip("no SIMD kernels on this CPU")
	}
	defer func() { useSIMD = true }()
	for _, typ := range weightTypes {
		for _, n := range []int{1, 16} {
			for _, simd := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/n=%d/simd=%v", typ, n, simd), func(b *testing.B) {
					useSIMD = simd
					m := benchMatrices()[typ]
					p := NewPool(1)
					defer p.Close()
					x := randomRow(rand.New(rand.NewPCG(1, 1)), n*m.Cols, 1)
					y := make([]float32, n*m.Rows)
					p.MatMul(y, m, x, n)
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N)*float64(len(m.Data))/sec/1e9, "GB/s")
					b.ReportMetric(float64(b.N)*float64(n)/sec, "tok/s")
				})
			}
		}
	}
}

// BenchmarkKernelsSIMD measures the SIMD kernels on rows held in cache
// (compare BenchmarkKernels, the Go twins).
func BenchmarkKernelsSIMD(b *testing.B) {
	if !useSIMD {
		b.Skip("no SIMD kernels on this CPU")
	}
	const n = 4096
	r := rand.New(rand.NewPCG(1, 1))
	w, x := randomRow(r, 4*n, 0.02), randomRow(r, 2*n, 1)
	h := make([]uint16, 4*n)
	for i := range h {
		h[i] = F32ToF16(w[i])
	}
	row := make([]byte, n/32*34)
	if err := QuantizeRow(Q8_0, row, w[:n]); err != nil {
		b.Fatal(err)
	}
	act := make([]q8Act, n/32)
	for i := range act {
		quantizeActQ8_0(&act[i], x[32*i:], actQ8Flavor)
	}
	dst := make([]float32, 8)
	var sink float32
	for _, c := range []struct {
		name string
		macs int
		f    func()
	}{
		{"F32", n, func() { sink += ggmlDotF32(w[:n], x) }},
		{"F16-4rows", 4 * n, func() { dotHalfRowsSIMD(dst[:4], h, n, x, false) }},
		{"BF16-4rows", 4 * n, func() { dotHalfRowsSIMD(dst[:4], h, n, x, true) }},
		{"F16-4rows-2vec", 8 * n, func() { dotHalfMatSIMD(dst, h, x, 0, 4, n, 4, 2, false) }},
		{"Q8_0", n, func() { sink += dotQ8SIMD(row, act) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.macs), "ns/MAC")
		})
	}
	_ = sink
}
