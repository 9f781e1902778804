package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

var weightTypes = []DType{F32, F16, BF16, Q8_0}

// seenActivations returns the activations as the kernel for weight type typ
// sees them, computed with the test's own references: rounded through F16 or
// BF16, or quantized to Q8_0 and dequantized.
func seenActivations(typ DType, x []float32) []float64 {
	out := make([]float64, len(x))
	switch typ {
	case F32:
		for i, v := range x {
			out[i] = float64(v)
		}
	case F16:
		for i, v := range x {
			out[i] = f16Value(F32ToF16(v))
		}
	case BF16:
		for i, v := range x {
			out[i] = float64(BF16ToF32(F32ToBF16(v)))
		}
	case Q8_0:
		q := refQuantizeQ8_0(x, actQ8Flavor != q8FlavorRef, actQ8Flavor == q8FlavorX86)
		for b := 0; b < len(x)/32; b++ {
			d := f16Value(binary.LittleEndian.Uint16(q[b*34:]))
			for j := 0; j < 32; j++ {
				out[b*32+j] = float64(int8(q[b*34+2+j])) * d
			}
		}
	}
	return out
}

// checkProduct compares y = m*x with a float64 reference on the dequantized
// weights and the activations the kernel sees. The bound is the classic one
// for recursive summation, |error| <= depth * 2^-24 * sum|w*x|, with depth the
// length of the longest chain of roundings:
//   - float types: ceil(cols/8) fused steps in each of the eight lanes (one
//     rounding each) and three adds to combine the lanes;
//   - Q8_0: block lane sums are exact integers; d_w*d_x rounds once, then one
//     fused step per block in each lane, and the three adds of the lanes.
func checkProduct(t *testing.T, m Matrix, x []float32, y []float32) {
	t.Helper()
	w := make([]float32, m.Cols)
	xs := seenActivations(m.Type, x)
	depth := float64((m.Cols+7)/8 + 3)
	if m.Type == Q8_0 {
		depth = float64(m.Cols/32 + 4)
	}
	for r := 0; r < m.Rows; r++ {
		m.RowTo(w, r)
		var sum, abs float64
		for c := range w {
			p := float64(w[c]) * xs[c]
			sum += p
			abs += math.Abs(p)
		}
		bound := depth*0x1p-24*abs*(1+1e-6) + 1e-38
		if err := math.Abs(float64(y[r]) - sum); !(err <= bound) {
			t.Fatalf("%s %dx%d row %d: got %g, want %g (error %g > bound %g)", m.Type, m.Rows, m.Cols, r, y[r], sum, err, bound)
		}
	}
}

func TestMatVecAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range weightTypes {
		for _, shape := range [][2]int{{1, 32}, {3, 64}, {37, 96}, {64, 256}, {129, 4096}} {
			rows, cols := shape[0], shape[1]
			m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.05))
			x := randomRow(r, cols, 3)
			for _, threads := range []int{1, 2, 3} {
				p := NewPool(threads)
				y := make([]float32, rows)
				p.MatVec(y, m, x)
				p.Close()
				checkProduct(t, m, x, y)
			}
		}
	}
}

// Float rows need not be a multiple of anything: exercise every tail length.
func TestMatVecOddColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range []DType{F32, F16, BF16} {
		for cols := 1; cols <= 19; cols++ {
			m := quantizeMatrix(t, typ, 5, cols, randomRow(r, 5*cols, 1))
			x := randomRow(r, cols, 1)
			y := make([]float32, 5)
			p.MatVec(y, m, x)
			checkProduct(t, m, x, y)
			for n := 1; n <= 3; n++ {
				checkMatMulEqualsMatVec(t, p, m, randomRow(r, n*cols, 1), n)
			}
		}
	}
}

// checkMatMulEqualsMatVec checks that MatMul over n vectors gives exactly
// the n MatVec results.
func checkMatMulEqualsMatVec(t *testing.T, p *Pool, m Matrix, x []float32, n int) {
	t.Helper()
	got := make([]float32, n*m.Rows)
	p.MatMul(got, m, x, n)
	want := make([]float32, m.Rows)
	for v := 0; v < n; v++ {
		p.MatVec(want, m, x[v*m.Cols:(v+1)*m.Cols])
		for r, w := range want {
			if g := got[v*m.Rows+r]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("%s %dx%d, %d vectors, %d threads: MatMul[%d][%d] = %g, MatVec gives %g",
					m.Type, m.Rows, m.Cols, n, p.Threads(), v, r, g, w)
			}
		}
	}
}

func TestMatMulEqualsMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range weightTypes {
		for _, shape := range [][2]int{{1, 32}, {7, 64}, {37, 160}, {300, 512}} {
			rows, cols := shape[0], shape[1]
			m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.1))
			for _, threads := range []int{1, 2, 3} {
				p := NewPool(threads)
				for _, n := range []int{1, 2, 3, 4, 5, 8, 9} {
					x := randomRow(r, n*cols, 2)
					checkMatMulEqualsMatVec(t, p, m, x, n)
				}
				p.Close()
			}
		}
	}
}

// The thread count and the chunking never change a result.
func TestMatMulSameForAllThreadCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range weightTypes {
		const rows, cols, n = 1000, 128, 6
		m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.1))
		x := randomRow(r, n*cols, 1)
		var first []float32
		for _, threads := range []int{1, 2, 3, 5} {
			p := NewPool(threads)
			y := make([]float32, n*rows)
			p.MatMul(y, m, x, n)
			p.Close()
			if first == nil {
				first = y
				checkProduct(t, m, x[:cols], y[:rows])
				continue
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(first[i]) {
					t.Fatalf("%s: %d threads give y[%d] = %g, 1 thread %g", typ, threads, i, y[i], first[i])
				}
			}
		}
	}
}

// The lane sums of dotQ8, and those of dot2Q8 with its two-vectors-per-
// multiply packing, equal plain integer sums over the whole int8 range.
func TestQ8Lanes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var qw [32]byte
		var x0, x1 [32]int8
		extreme := rapid.IntRange(0, 3).Draw(t, "extreme")
		for i := range qw {
			w := rapid.Int8().Draw(t, "w")
			a, b := rapid.Int8().Draw(t, "x0"), rapid.Int8().Draw(t, "x1")
			switch extreme {
			case 1:
				w, a, b = 127, 127, -128
			case 2:
				w, a, b = -128, -128, -128
			case 3:
				w, a, b = -128, 127, 127
			}
			qw[i], x0[i], x1[i] = byte(w), a, b
		}
		var want0, want1 [8]int32
		for i := range qw {
			want0[i/4] += int32(int8(qw[i])) * int32(x0[i])
			want1[i/4] += int32(int8(qw[i])) * int32(x1[i])
		}
		// A one-block row with d_w = 1 and activation scales 1: each lane of
		// dot2Q8 holds exactly the lane sum, and the result is their hsum.
		row := append([]byte{0x00, 0x3c}, qw[:]...)
		var p q8Pair
		packQ8Pair(&p, &q8Act{q: x0, d: 1}, &q8Act{q: x1, d: 1})
		g0, g1 := dot2Q8(row, []q8Pair{p})
		h := func(s [8]int32) float32 {
			var f [8]float64
			for i := range s {
				f[i] = float64(s[i])
			}
			return q8Hsum(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7])
		}
		if g0 != h(want0) || g1 != h(want1) {
			t.Fatalf("dot2Q8 = %g, %g, want %g, %g", g0, g1, h(want0), h(want1))
		}
		if d0, d1 := dotQ8(row, []q8Act{{q: x0, d: 1}}), dotQ8(row, []q8Act{{q: x1, d: 1}}); d0 != h(want0) || d1 != h(want1) {
			t.Fatalf("dotQ8 = %g, %g, want %g, %g", d0, d1, h(want0), h(want1))
		}
	})
}

// Property: for random shapes and contents, MatMul equals MatVec and both
// stay within the reference bound.
func TestMatMulProperty(t *testing.T) {
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2), 3: NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		typ := rapid.SampledFrom(weightTypes).Draw(rt, "type")
		rows := rapid.IntRange(1, 70).Draw(rt, "rows")
		cols := 32 * rapid.IntRange(1, 6).Draw(rt, "blocks")
		if typ != Q8_0 {
			cols += rapid.IntRange(-31, 0).Draw(rt, "trim")
		}
		n := rapid.IntRange(1, 9).Draw(rt, "n")
		seed := rapid.Uint64().Draw(rt, "seed")
		p := pools[rapid.IntRange(1, 3).Draw(rt, "threads")]
		r := rand.New(rand.NewPCG(seed, 1))
		m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 1))
		x := randomRow(r, n*cols, 1)
		checkMatMulEqualsMatVec(t, p, m, x, n)
		y := make([]float32, rows)
		p.MatVec(y, m, x[:cols])
		checkProduct(t, m, x[:cols], y)
	})
}

func TestMatMulPanicsOnBadShapes(t *testing.T) {
	p := NewPool(1)
	defer p.Close()
	m := quantizeMatrix(t, F32, 2, 3, make([]float32, 6))
	for _, c := range []struct {
		name string
		call func()
	}{
		{"short x", func() { p.MatVec(make([]float32, 2), m, make([]float32, 2)) }},
		{"long dst", func() { p.MatVec(make([]float32, 3), m, make([]float32, 3)) }},
		{"matmul n", func() { p.MatMul(make([]float32, 4), m, make([]float32, 3), 2) }},
		{"type", func() {
			p.MatVec(make([]float32, 1), Matrix{Type: Q8_1, Rows: 1, Cols: 32, Data: make([]byte, 36)}, make([]float32, 32))
		}},
		{"cols", func() {
			p.MatVec(make([]float32, 1), Matrix{Type: Q8_0, Rows: 1, Cols: 48, Data: make([]byte, 34)}, make([]float32, 48))
		}},
		{"data", func() {
			p.MatVec(make([]float32, 2), Matrix{Type: F32, Rows: 2, Cols: 3, Data: make([]byte, 20)}, make([]float32, 3))
		}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.call()
		}()
	}
}

// Steady-state products allocate nothing: the scratch belongs to the pool.
func TestMatMulDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range weightTypes {
		const rows, cols, n = 256, 512, 5
		m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.1))
		x := randomRow(r, n*cols, 1)
		y := make([]float32, n*rows)
		for _, threads := range []int{1, 2, 3} {
			p := NewPool(threads)
			p.MatMul(y, m, x, n) // grow the scratch
			if a := testing.AllocsPerRun(20, func() { p.MatVec(y[:rows], m, x[:cols]) }); a != 0 {
				t.Errorf("%s, %d threads: MatVec allocates %g times per call", typ, threads, a)
			}
			if a := testing.AllocsPerRun(20, func() { p.MatMul(y, m, x, n) }); a != 0 {
				t.Errorf("%s, %d threads: MatMul allocates %g times per call", typ, threads, a)
			}
			p.Close()
		}
	}
}

func ExamplePool_MatVec() {
	p := NewPool(2)
	defer p.Close()
	// A 2x32 F16 matrix: row 0 all ones, row 1 counting 0..31.
	src := make([]float32, 64)
	for c := 0; c < 32; c++ {
		src[c], src[32+c] = 1, float32(c)
	}
	data := make([]byte, 2*32*2)
	_ = QuantizeRow(F16, data, src)
	m, _ := NewMatrix(F16, 2, 32, data)
	x := make([]float32, 32)
	for c := range x {
		x[c] = 1
	}
	y := make([]float32, 2)
	p.MatVec(y, m, x)
	fmt.Printf("%.2f %.2f\n", y[0], y[1])
	// Output: 32.00 496.00
}
