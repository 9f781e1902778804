package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNVFP4Layout builds blocks byte by byte as ggml-common.h's block_nvfp4
// and dequantize_row_nvfp4 define them (scales first; in sub-block s, byte
// 8s+j holds value 16s+j low and 16s+j+8 high) and checks DequantizeRow.
func TestNVFP4Layout(t *testing.T) {
	if NVFP4.BlockElems() != 64 || NVFP4.BlockBytes() != 36 || uint32(NVFP4) != 40 {
		t.Fatalf("NVFP4 = type %d, %d values in %d bytes; ggml: 40, 64, 36", uint32(NVFP4), NVFP4.BlockElems(), NVFP4.BlockBytes())
	}
	rng := rand.New(rand.NewPCG(5, 6))
	blk := make([]byte, 2*36)
	for i := range blk {
		blk[i] = byte(rng.IntN(256))
	}
	for b := 0; b < 2; b++ {
		for s := 0; s < 4; s++ {
			blk[b*36+s] &= 0x7F
		}
	}
	blk[1] = 0x7F // NaN scale: ggml reads 0
	want := make([]float64, 128)
	for b := 0; b < 2; b++ {
		for s := 0; s < 4; s++ {
			d := refE4M3(blk[b*36+s])
			if blk[b*36+s] == 0x7F {
				d = 0
			}
			for j := 0; j < 8; j++ {
				q := blk[b*36+4+8*s+j]
				want[b*64+16*s+j] = refE2M1(q&15) * d
				want[b*64+16*s+j+8] = refE2M1(q>>4) * d
			}
		}
	}
	got := make([]float32, 128)
	if err := DequantizeRow(NVFP4, got, blk); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if float64(got[i]) != want[i] {
			t.Fatalf("value %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestNVFP4Quantize checks ModelOpt's recipe: values on the grid of a block
// scale come back exactly, every value comes back within half a step of its
// sub-block's grid, and the per-tensor scale divides out.
func TestNVFP4Quantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Exact: each sub-block a UE4M3 scale times E2M1 values with a 6 in it.
	src := make([]float32, 128)
	for s := 0; s < 8; s++ {
		d := float32(math.Ldexp(1+float64(rng.IntN(8))/8, rng.IntN(12)-6))
		for j := 0; j < 16; j++ {
			src[16*s+j] = E2M1ToF32(uint8(rng.IntN(16))) * d
		}
		src[16*s+rng.IntN(16)] = 6 * d
	}
	for _, s2 := range []float32{1, 0.25, 1.0 / 3} {
		in := make([]float32, len(src))
		for i := range in {
			in[i] = src[i] * s2
		}
		q := make([]byte, 72)
		if err := QuantizeNVFP4Row(q, in, s2); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, 128)
		if err := DequantizeRow(NVFP4, out, q); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			if s2 == 1 || s2 == 0.25 { // exact scalings
				if out[i] != src[i] {
					t.Fatalf("s2=%v value %d: %v, want %v", s2, i, out[i], src[i])
				}
			} else if d := math.Abs(float64(out[i]) - float64(src[i])); d > 1e-6*math.Abs(float64(src[i]))+1e-30 {
				t.Fatalf("s2=%v value %d: %v, want %v", s2, i, out[i], src[i])
			}
		}
	}
	// Random rows: error bounded by half the largest step (2 in E2M1 units).
	for trial := 0; trial < 50; trial++ {
		x := make([]float32, 256)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(10)-5))
		}
		q := make([]byte, 4*36)
		if err := QuantizeRow(NVFP4, q, x); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, 256)
		if err := DequantizeRow(NVFP4, y, q); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 16; s++ {
			d := float64(UE4M3ToF32(q[(s/4)*36+s%4]))
			var amax float64
			for j := 0; j < 16; j++ {
				amax = math.Max(amax, math.Abs(float64(x[16*s+j])))
			}
			if d < amax/6*0.93 || d > amax/6*1.07 {
				t.Fatalf("sub-block %d: scale %v for amax %v", s, d, amax)
			}
			for j := 0; j < 16; j++ {
				i := 16*s + j
				if e := math.Abs(float64(y[i]) - float64(x[i])); e > d*1.0000001 {
					t.Fatalf("value %d: %v -> %v (scale %v)", i, x[i], y[i], d)
				}
			}
		}
	}
	// Zero block: scale 1.0 (ModelOpt), values 0.
	q := make([]byte, 36)
	if err := QuantizeRow(NVFP4, q, make([]float32, 64)); err != nil {
		t.Fatal(err)
	}
	for i, b := range q {
		if (i < 4 && b != 0x38) || (i >= 4 && b != 0) {
			t.Fatalf("zero block byte %d = %#02x", i, b)
		}
	}
	if err := QuantizeNVFP4Row(q, make([]float32, 64), 0); err == nil {
		t.Fatal("scale 0 accepted")
	}
	if err := QuantizeRow(NVFP4, make([]byte, 36), make([]float32, 32)); err == nil {
		t.Fatal("32 values accepted for NVFP4")
	}
}

// randNVFP4 is a random NVFP4 matrix with realistic scales.
func randNVFP4(rng *rand.Rand, rows, cols int) Matrix {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.1)
	}
	data := make([]byte, rows*cols/64*36)
	rb := cols / 64 * 36
	for r := 0; r < rows; r++ {
		if err := QuantizeRow(NVFP4, data[r*rb:(r+1)*rb], w[r*cols:(r+1)*cols]); err != nil {
			panic(err)
		}
	}
	m, err := NewMatrix(NVFP4, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return m
}

// TestNVFP4MatMul checks both activation modes against references computed
// in float64 from the definitions: W4A16 against the dequantized weights
// times x; W4A8 against ggml_vec_dot_nvfp4_q8_0's integer sums per
// sub-block, with the activations quantized to Q8_0 as ggml does. MatMul
// must equal MatVec bit for bit.
func TestNVFP4MatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols, n = 37, 256, 5
	m := randNVFP4(rng, rows, cols)
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	w := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		m.RowTo(w[r*cols:(r+1)*cols], r)
	}
	p := NewPool(2)
	defer p.Close()
	for _, mode := range []NVFP4Activations{NVFP4ActF32, NVFP4ActQ8} {
		p.SetNVFP4Activations(mode)
		all := make([]float32, n*rows)
		p.MatMul(all, m, x, n)
		for v := 0; v < n; v++ {
			xv := x[v*cols : (v+1)*cols]
			one := make([]float32, rows)
			p.MatVec(one, m, xv)
			var act []q8Act
			if mode == NVFP4ActQ8 {
				act = make([]q8Act, cols/32)
				for b := range act {
					quantizeActQ8_0(&act[b], xv[32*b:32*b+32], actQ8Flavor)
				}
			}
			for r := 0; r < rows; r++ {
				if math.Float32bits(one[r]) != math.Float32bits(all[v*rows+r]) {
					t.Fatalf("mode %d: MatMul[%d,%d] = %v, MatVec %v", mode, v, r, all[v*rows+r], one[r])
				}
				var want, mag float64
				for c := 0; c < cols; c++ {
					xc := float64(xv[c])
					if mode == NVFP4ActQ8 {
						xc = float64(act[c/32].q[c%32]) * float64(act[c/32].d)
					}
					want += float64(w[r*cols+c]) * xc
					mag += math.Abs(float64(w[r*cols+c]) * xc)
				}
				if d := math.Abs(float64(one[r]) - want); d > 1e-5*mag+1e-7 {
					t.Fatalf("mode %d row %d: %v, want %v (|w||x| %v)", mode, r, one[r], want, mag)
				}
			}
		}
	}
}

// BenchmarkNVFP4MatVec: one 4096x4096 NVFP4 matrix times one vector, in
// each activation mode, one thread ("MB/s" counts weight bytes; with
// -tags or GODEBUG nothing changes: the SIMD kernels run where the CPU has
// them, see dot_amd64.go).
func BenchmarkNVFP4MatVec(b *testing.B) {
	m := randNVFP4(rand.New(rand.NewPCG(42, 42)), 4096, 4096)
	x := randomRow(rand.New(rand.NewPCG(1, 1)), m.Cols, 1)
	y := make([]float32, m.Rows)
	for _, mode := range []struct {
		name string
		act  NVFP4Activations
	}{{"W4A8", NVFP4ActQ8}, {"W4A16", NVFP4ActF32}, {"W4A4", NVFP4ActFP4}} {
		b.Run(mode.name, func(b *testing.B) {
			p := NewPool(1)
			defer p.Close()
			p.SetNVFP4Activations(mode.act)
			p.MatVec(y, m, x)
			b.SetBytes(int64(len(m.Data)))
			b.ReportAllocs()
			for b.Loop() {
				p.MatVec(y, m, x)
			}
		})
	}
}
