package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

type kqCase struct {
	t                DType
	cols, rows, nvec int
	w                []byte
	x, deq, dots     []float32
}

func readKQGolden(t *testing.T) []kqCase {
	t.Helper()
	data, err := os.ReadFile("testdata/kquant/ggml-avx2.bin")
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:4]) != "KQG1" {
		t.Fatalf("bad magic %q", data[:4])
	}
	n := int(binary.LittleEndian.Uint32(data[4:]))
	p := 8
	u32 := func() int { v := binary.LittleEndian.Uint32(data[p:]); p += 4; return int(v) }
	f32s := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[p+4*i:]))
		}
		p += 4 * k
		return out
	}
	var cs []kqCase
	for range n {
		c := kqCase{t: DType(u32()), cols: u32(), rows: u32(), nvec: u32()}
		rb, err := c.t.RowBytes(int64(c.cols))
		if err != nil {
			t.Fatal(err)
		}
		c.w = data[p : p+int(rb)*c.rows]
		p += int(rb) * c.rows
		c.x, c.deq, c.dots = f32s(c.nvec*c.cols), f32s(c.rows*c.cols), f32s(c.rows*c.nvec)
		cs = append(cs, c)
	}
	if p != len(data) {
		t.Fatalf("%d bytes left over", len(data)-p)
	}
	return cs
}

// TestKQuantGolden: rows dequantized and dot products with quantized
// activations, bit for bit against llama.cpp's own library (its AVX2
// build; testdata/kquant/README.md), for every legacy and K-quant type,
// with ordinary and extreme scales.
func TestKQuantGolden(t *testing.T) {
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		defer p.Close()
		for i, c := range readKQGolden(t) {
			m, err := NewMatrix(c.t, c.rows, c.cols, c.w)
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, c.cols)
			bad := 0
			for r := 0; r < c.rows; r++ {
				m.RowTo(row, r)
				for k, v := range row {
					if want := c.deq[r*c.cols+k]; !sameFloat(v, want) && bad < 3 {
						t.Errorf("case %d %s: row %d value %d = %g, ggml %g", i, c.t, r, k, v, want)
						bad++
					}
				}
			}
			if actKind(c.t) == actQ8_0 && actQ8Flavor != q8FlavorX86 {
				// These products take Q8_0 activations, which ggml-cpu
				// quantizes differently on each architecture (q8flavor_*.go):
				// the goldens are the x86 quantizer's, this CPU uses its own.
				continue
			}
			dst := make([]float32, c.rows*c.nvec)
			p.MatMul(dst, m, c.x, c.nvec)
			for k, v := range dst {
				if want := c.dots[k]; !sameFloat(v, want) {
					t.Errorf("case %d %s cols %d: dot (vector %d, row %d) = %g (%#x), ggml %g (%#x)", i, c.t, c.cols, k/c.rows, k%c.rows, v, math.Float32bits(v), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestKQuantRepackedGolden: MatMul of the matrices llama.cpp repacks on an
// AVX2 CPU (Q4_0, IQ4_NL and Q4_K with a multiple of 8 rows) bit for bit
// against llama.cpp's own repacked products (ggml_mul_mat on its repack
// buffer, testdata/kquant/gen_repack.c): its gemv for one to three
// vectors, and for Q4_0 and IQ4_NL its gemm for four and five (the
// activations quantized four at a time, the fifth through gemv). Q4_K's
// gemm sums otherwise than its gemv and MatMul keeps the gemv's arithmetic
// at every batch size, so its cases stop at three vectors
// (docs/performance/kquants.md, "Exactness").
func TestKQuantRepackedGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/kquant/ggml-repack-avx2.bin")
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:4]) != "KQR1" {
		t.Fatalf("bad magic %q", data[:4])
	}
	p := 8
	u32 := func() int { v := binary.LittleEndian.Uint32(data[p:]); p += 4; return int(v) }
	f32s := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[p+4*i:]))
		}
		p += 4 * k
		return out
	}
	pools := []*Pool{NewPool(1), NewPool(2)}
	defer pools[0].Close()
	defer pools[1].Close()
	for n, i := int(binary.LittleEndian.Uint32(data[4:])), 0; i < n; i++ {
		typ, cols, rows, nvec := DType(u32()), u32(), u32(), u32()
		rb, err := typ.RowBytes(int64(cols))
		if err != nil {
			t.Fatal(err)
		}
		w := data[p : p+int(rb)*rows]
		p += int(rb) * rows
		x, want := f32s(nvec*cols), f32s(nvec*rows)
		if !repackedAVX2(typ, rows) {
			t.Fatalf("case %d: %s with %d rows is not a repacked matrix", i, typ, rows)
		}
		if actKind(typ) == actQ8_0 && actQ8Flavor != q8FlavorX86 {
			continue // the goldens' Q8_0 activations are the x86 quantizer's (TestKQuantGolden)
		}
		m, err := NewMatrix(typ, rows, cols, w)
		if err != nil {
			t.Fatal(err)
		}
		for _, pool := range pools {
			got := make([]float32, nvec*rows)
			pool.MatMul(got, m, x, nvec)
			for k, v := range got {
				if !sameFloat(v, want[k]) {
					t.Errorf("case %d %s %dx%d, %d vectors, %d threads: (vector %d, row %d) = %g (%#x), ggml %g (%#x)",
						i, typ, rows, cols, nvec, pool.threads, k/rows, k%rows, v, math.Float32bits(v), want[k], math.Float32bits(want[k]))
				}
			}
		}
	}
	if p != len(data) {
		t.Fatalf("%d bytes left over", len(data)-p)
	}
}

// sameFloat: the same bits, or both NaN. A NaN's sign and payload are the
// CPU's choice, not the arithmetic's: x86 makes 0xffc00000 where arm64
// makes 0x7fc00000 for the same invalid operation (the goldens are x86's).
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestQ4KRepackedRows: the repacked Q4_K rows of MatMul (a block decoded
// once for every vector) give dotQ4KRepacked's bits for each (row, vector).
func TestQ4KRepackedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, rows := range []int{16, 136} {
		checkQ8KRows(t, rng, Q4_K, rows, []int{1, 3}, dotQ4KRepacked, "dotQ4KRepacked")
	}
}

// checkQ8KRows fills a rows x 512 matrix of typ with random blocks (the
// high bytes of the F16 scales at hi in each block kept ordinary),
// multiplies 1 to 5 vectors by it with MatMul at 1 and 2 threads, and holds
// each (row, vector) to dot's bits, dot named name in the message.
func checkQ8KRows(t *testing.T, rng *rand.Rand, typ DType, rows int, hi []int, dot func([]byte, []q8KAct) float32, name string) {
	t.Helper()
	const cols = 512
	bb := typ.BlockBytes()
	data := make([]byte, rows*cols/qkK*bb)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(data)/bb; b++ {
		for _, o := range hi {
			data[b*bb+o] = 0x20 | byte(rng.Uint32()&0xF)
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for n := 1; n <= 5; n++ {
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, n*rows)
			p.MatMul(dst, m, x, n)
			act := make([]q8KAct, cols/qkK)
			for v := 0; v < n; v++ {
				quantizeQ8K(act, x[v*cols:(v+1)*cols])
				for r := 0; r < rows; r++ {
					want := dot(data[r*cols/qkK*bb:(r+1)*cols/qkK*bb], act)
					if got := dst[v*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s, %d rows, threads %d, %d vectors: (row %d, vector %d) = %g, %s %g", typ, rows, threads, n, r, v, got, name, want)
					}
				}
			}
		}
		p.Close()
	}
}

// TestLegacyRepackedRows: repacked Q4_0 and IQ4_NL rows of MatMul with
// several vectors (each block unpacked once for all) give
// dotLegacyRepacked's bits for each (row, vector).
func TestLegacyRepackedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const cols = 160
	for _, tc := range []struct {
		typ  DType
		rows int
	}{{Q4_0, 16}, {IQ4_NL, 16}, {Q4_0, 136}, {IQ4_NL, 200}} { // 136, 200: tiles of rows far apart
		typ, rows := tc.typ, tc.rows
		data := make([]byte, rows*cols/32*q4_0Bytes)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for b := 0; b < len(data)/q4_0Bytes; b++ {
			data[b*q4_0Bytes+1] = 0x20 | byte(rng.Uint32()&0xF)
		}
		m, err := NewMatrix(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPool(2)
		for n := 1; n <= 5; n++ {
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, n*rows)
			p.MatMul(dst, m, x, n)
			act := make([]q8Act, cols/32)
			for v := 0; v < n; v++ {
				quantizeQ8Vector(act, x[v*cols:(v+1)*cols])
				for r := 0; r < rows; r++ {
					want := dotLegacyRepacked(typ, data[r*cols/32*q4_0Bytes:(r+1)*cols/32*q4_0Bytes], act)
					if got := dst[v*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s %dx%d, %d vectors: (row %d, vector %d) = %g, dotLegacyRepacked %g", typ, rows, cols, n, r, v, got, want)
					}
				}
			}
		}
		p.Close()
	}
}

// TestQ6KRows: the Q6_K, Q5_K and Q2_K rows of MatMul (one vector a row
// per call, several the two-row tiles or a block for all vectors) give
// dotQ6K's, dotQ5K's and dotQ2K's bits for each (row, vector), an odd row
// count included.
func TestQ6KRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		typ  DType
		rows int
	}{{Q6_K, 16}, {Q6_K, 37}, {Q5_K, 16}, {Q5_K, 37}, {Q2_K, 16}, {Q2_K, 37}} {
		switch tc.typ {
		case Q6_K:
			checkQ8KRows(t, rng, Q6_K, tc.rows, []int{209}, dotQ6K, "dotQ6K")
		case Q5_K:
			checkQ8KRows(t, rng, Q5_K, tc.rows, []int{1, 3}, dotQ5K, "dotQ5K")
		case Q2_K:
			checkQ8KRows(t, rng, Q2_K, tc.rows, []int{81, 83}, dotQ2K, "dotQ2K")
		}
	}
}
