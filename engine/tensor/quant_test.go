package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// refQuantizeQ8_0 is a plain reading of ggml's quantize_row_q8_0_ref:
// d = max|x|/127, q = round(x/d) with halves away from zero, d kept as F16.
// roundEven selects the CPU backends' round-half-to-even instead, and x86
// their 127/amax inverse scale.
func refQuantizeQ8_0(src []float32, roundEven, x86 bool) []byte {
	out := make([]byte, 0, len(src)/32*34)
	for b := 0; b < len(src)/32; b++ {
		blk := src[b*32 : b*32+32]
		amax := float32(0)
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		if x86 && amax != 0 {
			id = 127 / amax
		}
		out = binary.LittleEndian.AppendUint16(out, F32ToF16(d))
		for _, v := range blk {
			y := float64(v * id)
			q := math.Round(y) // C's roundf: halves away from zero
			if roundEven {
				q = math.RoundToEven(y)
			}
			out = append(out, byte(int8(q)))
		}
	}
	return out
}

func randomRow(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

func TestQ8_0HandBlock(t *testing.T) {
	src := make([]float32, 32)
	copy(src, []float32{127, 2.5, -0.5, 1.5, -126.4, 0.49, -2.5})
	// d = 127/127 = 1 (F16 0x3c00), id = 1. Reference rounding takes halves
	// away from zero: 2.5 -> 3, -0.5 -> -1, 1.5 -> 2, -2.5 -> -3.
	want := []byte{0x00, 0x3c, 127, 3, 0xff, 2, 0x82, 0, 0xfd}
	want = append(want, make([]byte, 34-len(want))...)
	got := make([]byte, 34)
	if err := QuantizeRow(Q8_0, got, src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("QuantizeRow(Q8_0) = % x\nwant              % x", got, want)
	}
	// The CPU backends' activation quantizers round halves to even:
	// 2.5 -> 2, -0.5 -> 0, 1.5 -> 2, -2.5 -> -2.
	wantEven := []int8{127, 2, 0, 2, -126, 0, -2}
	for _, fl := range []q8Flavor{q8FlavorX86, q8FlavorNEON} {
		var a q8Act
		quantizeActQ8_0(&a, src, fl)
		q := a.q
		for i, w := range wantEven {
			if q[i] != w {
				t.Errorf("flavor %d: q[%d] = %d, want %d", fl, i, q[i], w)
			}
		}
		if a.d != 1 {
			t.Errorf("flavor %d: d = %g, want 1", fl, a.d)
		}
	}

	// Dequantize a hand-made block: d = 0.5 (F16 0x3800).
	blk := append([]byte{0x00, 0x38, 1, 0xfe, 127, 0x80}, make([]byte, 28)...)
	out := make([]float32, 32)
	if err := DequantizeRow(Q8_0, out, blk); err != nil {
		t.Fatal(err)
	}
	for i, w := range []float32{0.5, -1, 63.5, -64, 0} {
		if out[i] != w {
			t.Errorf("dequantized[%d] = %g, want %g", i, out[i], w)
		}
	}
}

func TestQ8_0QuantizeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []float64{1e-6, 0.01, 1, 300, 7e4} {
		src := randomRow(r, 32*64, scale)
		// Exact halves after scaling are where the rounding rules differ:
		// plant some values at amax*(k+0.5)/127.
		for b := 0; b < 64; b += 2 {
			src[b*32] = 127
			src[b*32+1] = 2.5
			src[b*32+2] = -44.5
		}
		got := make([]byte, 34*64)
		if err := QuantizeRow(Q8_0, got, src); err != nil {
			t.Fatal(err)
		}
		if want := refQuantizeQ8_0(src, false, false); !bytes.Equal(got, want) {
			t.Fatalf("scale %g: QuantizeRow(Q8_0) differs from the reference", scale)
		}
		for _, c := range []struct {
			fl        q8Flavor
			even, x86 bool
		}{{q8FlavorRef, false, false}, {q8FlavorX86, true, true}, {q8FlavorNEON, true, false}} {
			want := refQuantizeQ8_0(src, c.even, c.x86)
			for b := 0; b < 64; b++ {
				var a q8Act
				quantizeActQ8_0(&a, src[b*32:b*32+32], c.fl)
				wb := want[b*34 : b*34+34]
				if a.d != F16ToF32(binary.LittleEndian.Uint16(wb)) {
					t.Fatalf("flavor %d block %d: d = %g, want %g", c.fl, b, a.d, F16ToF32(binary.LittleEndian.Uint16(wb)))
				}
				for j, v := range a.q {
					if byte(v) != wb[2+j] {
						t.Fatalf("flavor %d block %d: q[%d] = %d, want %d", c.fl, b, j, v, int8(wb[2+j]))
					}
				}
			}
		}
	}
}

func TestQuantizeRowErrors(t *testing.T) {
	for _, c := range []struct {
		t      DType
		nbytes int
		n      int
	}{{Q8_0, 34, 31}, {Q8_0, 33, 32}, {F16, 3, 2}, {F32, 8, 3}, {Q8_1, 36, 32}, {DType(99), 4, 1}} {
		if err := QuantizeRow(c.t, make([]byte, c.nbytes), make([]float32, c.n)); err == nil {
			t.Errorf("QuantizeRow(%s, %d bytes, %d values) succeeded", c.t, c.nbytes, c.n)
		}
		if err := DequantizeRow(c.t, make([]float32, c.n), make([]byte, c.nbytes)); err == nil {
			t.Errorf("DequantizeRow(%s, %d values, %d bytes) succeeded", c.t, c.n, c.nbytes)
		}
	}
	// The block types the engine reads but does not write.
	if err := QuantizeRow(Q4_K, make([]byte, 144), make([]float32, 256)); err == nil {
		t.Error("QuantizeRow(Q4_K) succeeded")
	}
}

// Quantize then dequantize stays within each format's error bound.
func TestQuantizeRoundTripBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		blocks := rapid.IntRange(1, 8).Draw(t, "blocks")
		scale := rapid.Float64Range(1e-3, 1e4).Draw(t, "scale")
		src := make([]float32, 32*blocks)
		for i := range src {
			src[i] = float32(rapid.Float64Range(-1, 1).Draw(t, "x") * scale)
		}
		for _, typ := range []DType{F32, F16, BF16, Q8_0} {
			rb, _ := typ.RowBytes(int64(len(src)))
			buf := make([]byte, rb)
			if err := QuantizeRow(typ, buf, src); err != nil {
				t.Fatal(err)
			}
			back := make([]float32, len(src))
			if err := DequantizeRow(typ, back, buf); err != nil {
				t.Fatal(err)
			}
			for b := 0; b < blocks; b++ {
				amax := 0.0
				for _, v := range src[b*32 : b*32+32] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				for i := b * 32; i < b*32+32; i++ {
					x, y := float64(src[i]), float64(back[i])
					var bound float64
					switch typ {
					case F32:
						bound = 0
					case F16:
						bound = math.Max(math.Abs(x)*0x1p-11, 0x1p-25) // half an ulp, or half the subnormal step
					case BF16:
						bound = math.Max(math.Abs(x)*0x1p-8, 0x1p-134) // half an ulp, or half the subnormal step
					case Q8_0:
						// half a quantum of the exact scale, plus the F16
						// rounding of d (half an ulp) over up to 127 quanta
						d := amax / 127
						bound = d/2 + 127*math.Max(d*0x1p-11, 0x1p-25)
					}
					if math.Abs(x-y) > bound*(1+1e-6) {
						t.Fatalf("%s: %g came back as %g (error %g > bound %g)", typ, x, y, math.Abs(x-y), bound)
					}
				}
			}
		}
	})
}

func TestRowTo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 5, 64
	src := randomRow(r, rows*cols, 1)
	for _, typ := range []DType{F32, F16, BF16, Q8_0} {
		m := quantizeMatrix(t, typ, rows, cols, src)
		for row := 0; row < rows; row++ {
			got := make([]float32, cols)
			m.RowTo(got, row)
			want := make([]float32, cols)
			rb := int(m.rowBytes())
			if err := DequantizeRow(typ, want, m.Data[row*rb:(row+1)*rb]); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s row %d col %d: %g, want %g", typ, row, i, got[i], want[i])
				}
			}
		}
	}
}

func TestNewMatrix(t *testing.T) {
	if _, err := NewMatrix(Q8_0, 2, 64, make([]byte, 2*68)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t          DType
		rows, cols int
		n          int
	}{{Q8_0, 2, 64, 135}, {Q8_0, 2, 48, 2 * 51}, {F32, 3, 3, 35}, {F16, -1, 2, 0}, {DType(77), 1, 1, 4}} {
		if _, err := NewMatrix(c.t, c.rows, c.cols, make([]byte, c.n)); err == nil {
			t.Errorf("NewMatrix(%s, %d, %d, %d bytes) succeeded", c.t, c.rows, c.cols, c.n)
		}
	}
}

// quantizeMatrix builds a rows x cols matrix of type typ from src.
func quantizeMatrix(t testing.TB, typ DType, rows, cols int, src []float32) Matrix {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int64(rows)*rb)
	for r := 0; r < rows; r++ {
		if err := QuantizeRow(typ, data[int64(r)*rb:int64(r+1)*rb], src[r*cols:(r+1)*cols]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
