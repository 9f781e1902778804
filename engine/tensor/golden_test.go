package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Goldens made by llama.cpp's own CPU library (testdata/ggml/README.md).

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ggml", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenF32(t *testing.T, name string) []float32 {
	b := readGolden(t, name)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

const goldenRows, goldenCols, goldenN = 16, 512, 8

// The weights as ggml_quantize_chunk wrote them equal QuantizeRow's.
func TestGoldenQuantizeRow(t *testing.T) {
	w := goldenF32(t, "w_f32.bin")
	for _, c := range []struct {
		typ  DType
		file string
	}{{F16, "w_f16.bin"}, {BF16, "w_bf16.bin"}, {Q8_0, "w_q8_0.bin"}} {
		m := quantizeMatrix(t, c.typ, goldenRows, goldenCols, w)
		if !bytes.Equal(m.Data, readGolden(t, c.file)) {
			t.Errorf("%s: QuantizeRow differs from ggml_quantize_chunk", c.typ)
		}
	}
	in := goldenF32(t, "q8_in.bin")
	got := make([]byte, len(in)/32*34)
	if err := QuantizeRow(Q8_0, got, in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, readGolden(t, "q8_ref.bin")) {
		t.Error("QuantizeRow(Q8_0) differs from quantize_row_q8_0_ref")
	}
}

// The x86 flavour of the activation quantizer equals ggml-cpu's AVX2
// quantize_row_q8_0, planted halves included.
func TestGoldenActivationQuantizer(t *testing.T) {
	in := goldenF32(t, "q8_in.bin")
	want := readGolden(t, "q8_act.bin")
	for b := 0; b < len(in)/32; b++ {
		var a q8Act
		quantizeActQ8_0(&a, in[b*32:b*32+32], q8FlavorX86)
		wb := want[b*34 : b*34+34]
		if a.d != F16ToF32(binary.LittleEndian.Uint16(wb)) {
			t.Fatalf("block %d: d = %g, want %g", b, a.d, F16ToF32(binary.LittleEndian.Uint16(wb)))
		}
		for j, q := range a.q {
			if byte(q) != wb[2+j] {
				t.Fatalf("block %d: q[%d] = %d, want %d", b, j, q, int8(wb[2+j]))
			}
		}
	}
}

// MatMul equals ggml's mul_mat bit for bit: Q8_0 always; F32 for one
// vector (ggml_vec_dot_f32, which MatMul runs for every F32 row), while over
// several vectors ggml takes tinyBLAS's sgemm, which differs in the last
// bits only; F16 and BF16 over several vectors, while for one they differ
// from ggml's 32-lane single-vector kernels in the last bits only.
func TestGoldenMatMul(t *testing.T) {
	w := goldenF32(t, "w_f32.bin")
	x := goldenF32(t, "x_f32.bin")
	p := NewPool(2)
	defer p.Close()
	for _, c := range []struct {
		typ  DType
		name string
	}{{F32, "f32"}, {F16, "f16"}, {BF16, "bf16"}, {Q8_0, "q8_0"}} {
		m := quantizeMatrix(t, c.typ, goldenRows, goldenCols, w)
		for _, n := range []int{1, goldenN} {
			want := goldenF32(t, fmt.Sprintf("y_%s_n%d.bin", c.name, n))
			var got []float32
			if c.typ == Q8_0 {
				// Run the kernels on activations quantized the x86 way, so
				// that the check holds on every architecture.
				got = q8ProductX86(m, x[:n*goldenCols], n)
				if actQ8Flavor == q8FlavorX86 {
					viaPool := make([]float32, n*goldenRows)
					p.MatMul(viaPool, m, x[:n*goldenCols], n)
					for i := range got {
						if !sameBits(viaPool[i], got[i]) {
							t.Fatalf("Q8_0 n=%d: MatMul[%d] = %g, kernels give %g", n, i, viaPool[i], got[i])
						}
					}
				}
			} else {
				got = make([]float32, n*goldenRows)
				p.MatMul(got, m, x[:n*goldenCols], n)
			}
			for i := range got {
				if sameBits(got[i], want[i]) {
					continue
				}
				if approx := c.typ != Q8_0 && (n == 1) != (c.typ == F32); approx {
					// the outputs are of order one: a bound relative to
					// max(|y|, 1) does not trip on sums that cancel
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Max(math.Abs(float64(want[i])), 1) {
						t.Errorf("%s n=%d: y[%d] = %g, ggml %g (difference %g)", c.typ, n, i, got[i], want[i], d)
					}
					continue
				}
				t.Errorf("%s n=%d: y[%d] = %g (%#08x), ggml %g (%#08x)", c.typ, n, i,
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}

// MatMul of an F16 matrix whose rows are not a multiple of 8 values (the
// F16 fallback llama-quantize writes for stories260K's 172-wide ffn_down)
// equals ggml's mul_mat bit for bit for one vector and for several: ggml
// sums it with ggml_vec_dot_f16 at every batch size (tinyBLAS refuses
// such rows), and so does MatMul (f16VecDotOnly).
func TestGoldenMatMulF16Odd(t *testing.T) {
	const rows, cols = 24, 172
	w := goldenF32(t, "w_f32_172.bin")
	x := goldenF32(t, "x_f32_172.bin")
	m := quantizeMatrix(t, F16, rows, cols, w)
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, n := range []int{1, 3} {
			want := goldenF32(t, fmt.Sprintf("y_f16_172_n%d.bin", n))
			got := make([]float32, n*rows)
			p.MatMul(got, m, x[:n*cols], n)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Errorf("threads %d, n=%d: y[%d] = %g (%#08x), ggml %g (%#08x)", threads, n, i,
						got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
		p.Close()
	}
}

// q8ProductX86 is MatMul for a Q8_0 matrix with x86-quantized activations,
// through dotQ8 (odd vector) and dot2Q8 (pairs), the kernels MatMul uses.
func q8ProductX86(m Matrix, x []float32, n int) []float32 {
	nb := m.Cols / 32
	act := make([]q8Act, nb*n)
	for v := 0; v < n; v++ {
		for b := 0; b < nb; b++ {
			quantizeActQ8_0(&act[v*nb+b], x[v*m.Cols+b*32:v*m.Cols+b*32+32], q8FlavorX86)
		}
	}
	np := n / 2
	pairs := make([]q8Pair, nb*np)
	for i := 0; i < np; i++ {
		for b := 0; b < nb; b++ {
			packQ8Pair(&pairs[i*nb+b], &act[2*i*nb+b], &act[(2*i+1)*nb+b])
		}
	}
	out := make([]float32, n*m.Rows)
	rb := m.rowBytes()
	for r := 0; r < m.Rows; r++ {
		row := m.Data[r*rb : (r+1)*rb]
		for i := 0; i < np; i++ {
			out[2*i*m.Rows+r], out[(2*i+1)*m.Rows+r] = dot2Q8(row, pairs[i*nb:(i+1)*nb])
		}
		if n%2 == 1 {
			out[(n-1)*m.Rows+r] = dotQ8(row, act[(n-1)*nb:])
		}
	}
	return out
}

// expf32 and SiLU equal ggml's vectorised expf and SiLU bit for bit,
// special values included.
func TestGoldenExpAndSiLU(t *testing.T) {
	in, want := goldenF32(t, "expf_in.bin"), goldenF32(t, "expf_out.bin")
	for i, x := range in {
		if got := expf32(x); !sameBits(got, want[i]) {
			t.Errorf("expf32(%g) = %g (%#08x), ggml %g (%#08x)", x, got, math.Float32bits(got), want[i], math.Float32bits(want[i]))
		}
	}
	in, want = goldenF32(t, "silu_in.bin"), goldenF32(t, "silu_out.bin")
	got := append([]float32(nil), in...)
	SiLU(got)
	for i, x := range in {
		if !sameBits(got[i], want[i]) {
			t.Errorf("SiLU(%g) = %g (%#08x), ggml %g (%#08x)", x, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// Softmax and RMSNorm (times a weight) equal ggml's soft_max and
// mul(rms_norm) operators bit for bit.
func TestGoldenSoftmaxAndRMSNorm(t *testing.T) {
	got := goldenF32(t, "softmax_in.bin")
	want := goldenF32(t, "softmax_out.bin")
	Softmax(got)
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Errorf("softmax[%d] = %g, ggml %g", i, got[i], want[i])
		}
	}
	x, w := goldenF32(t, "rmsnorm_in.bin"), goldenF32(t, "rmsnorm_w.bin")
	want = goldenF32(t, "rmsnorm_out.bin")
	got = make([]float32, len(x))
	RMSNorm(got, x, w, 1e-6)
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Errorf("rmsnorm[%d] = %g, ggml %g", i, got[i], want[i])
		}
	}
}
