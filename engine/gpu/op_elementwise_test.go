package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Helpers of the op tests (op_*_test.go): data goes to the device at an
// offset into its buffer (so that every op's offsets are exercised), and
// comes back whole.

// ewU is float32's unit roundoff, 2^-24: half an ulp of 1.
const ewU = 0x1p-24

// ewPad is the words in front of every test range.
const ewPad = 3

// ewUpload copies bytes b to a new device buffer after ewPad words and
// returns their range; the buffer is freed when the test ends.
func ewUpload(t testing.TB, d *Device, b []byte) Range {
	t.Helper()
	buf, err := d.NewBuffer(int64(4*ewPad + len(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	rg := buf.Slice(4*ewPad, int64(len(b)))
	if err := d.Upload(rg, b); err != nil {
		t.Fatal(err)
	}
	return rg
}

func ewUploadF32(t testing.TB, d *Device, v []float32) Range { return ewUpload(t, d, f32Bytes(v)) }

// ewDownload reads a range back.
func ewDownload(t testing.TB, d *Device, rg Range) []byte {
	t.Helper()
	out := make([]byte, rg.Size)
	if err := d.Download(rg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func ewDownloadF32(t testing.TB, d *Device, rg Range) []float32 {
	return append([]float32(nil), bytesF32(ewDownload(t, d, rg))...)
}

// ewRun records what f records and runs it.
func ewRun(t testing.TB, d *Device, f func(r *Recorder)) {
	t.Helper()
	r := d.Begin()
	f(r)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
}

// ewRand is n values uniform in [-scale, scale).
func ewRand(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (2*rng.Float32() - 1) * scale
	}
	return v
}

// ewWide is n values of random sign and magnitudes spread over 2^-20..2^20,
// far from the denormals a GPU may flush.
func ewWide(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Ldexp(1+rng.Float64(), rng.IntN(41)-20))
		if rng.IntN(2) == 0 {
			v[i] = -v[i]
		}
	}
	return v
}

// ewSameBits fails unless got and want are the same bits.
func ewSameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g (%#08x), want %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

// ewWithin fails unless |got-want| <= rel*|want| + abs for every value,
// and logs how many are the same bits and the largest error in units of
// the tolerance.
func ewWithin(t *testing.T, what string, got, want []float32, rel, abs float64) {
	t.Helper()
	bad, same, worst := 0, 0, 0.0
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		tol := rel*math.Abs(w) + abs
		e := math.Abs(g - w)
		if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
			same++
		}
		worst = max(worst, e/tol)
		if !(e <= tol) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (|Δ| %.3g > tolerance %.3g)", what, i, g, w, e, tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values out of tolerance", what, bad, len(want))
	}
	t.Logf("%s: %d of %d values the CPU's bits; largest |Δ| %.2f of the tolerance", what, same, len(want), worst)
}

// ewSizes are the vector lengths the element-wise tests take: one value,
// a partial workgroup, and more than one workgroup with a tail.
var ewSizes = []int{1, 200, 256, 1000, 5000}

func TestEwAdd(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range ewSizes {
		dst, x := ewWide(rng, n), ewWide(rng, n)
		gd, gx := ewUploadF32(t, d, dst), ewUploadF32(t, d, x)
		ewRun(t, d, func(r *Recorder) { r.Add(gd, gx, n) })
		tensor.Add(dst, x)
		// one correctly rounded add on both sides: the same bits
		ewSameBits(t, "Add", ewDownloadF32(t, d, gd), dst)
	}
}

func TestEwSwiGLU(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range ewSizes {
		gate, up := ewRand(rng, n, 30), ewRand(rng, n, 4)
		gg, gu := ewUploadF32(t, d, gate), ewUploadF32(t, d, up)
		out := ewUploadF32(t, d, make([]float32, n))
		ewRun(t, d, func(r *Recorder) {
			r.SwiGLU(out, gg, gu, n)
			r.Barrier()
			r.SwiGLU(gg, gg, gu, n) // in place, as the forward pass calls it
		})
		want := append([]float32(nil), gate...)
		tensor.SiLU(want)
		tensor.Mul(want, up)
		// The shader evaluates ggml's exp polynomial of tensor.SiLU
		// with the device's fma (at most ~2 ulp off should a device not
		// fuse it), then 1+e, the division (Vulkan allows 2.5 ulp) and
		// the product: at most 8 ulp (16 u) of the result in all;
		// 2^-126 absolute for results a device flushes to 0.
		ewWithin(t, "SwiGLU", ewDownloadF32(t, d, out), want, 16*ewU, 0x1p-126)
		ewSameBits(t, "SwiGLU in place", ewDownloadF32(t, d, gg), ewDownloadF32(t, d, out))
	}
}

// ewSigmoid transliterates engine/model's sigmoid, 1/(1+expf(-x)), with
// float64's exp rounded to float32 for glibc's expf (correctly rounded
// but in rare cases, 0.502 ulp).
func ewSigmoid(x float32) float32 {
	e := float32(math.Exp(float64(-x)))
	return 1 / (1 + e)
}

func TestEwSigmoidMul(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range ewSizes {
		x, gate := ewRand(rng, n, 3), ewRand(rng, n, 25)
		gx, gg := ewUploadF32(t, d, x), ewUploadF32(t, d, gate)
		ewRun(t, d, func(r *Recorder) { r.SigmoidMul(gx, gg, n) })
		want := make([]float32, n)
		for i := range want {
			want[i] = x[i] * ewSigmoid(gate[i])
		}
		// The GPU's exp (ggml's polynomial, 1.5 ulp) against expf
		// (0.5 ulp): 2 ulp of e, at most 2 ulp of 1+e; the division 2.5
		// ulp (Vulkan), the products 0.5 each: 8 ulp (16 u) of the result
		// bounds it; 2^-126 absolute for flushed results.
		ewWithin(t, "SigmoidMul", ewDownloadF32(t, d, gx), want, 16*ewU, 0x1p-126)
	}
}

func TestEwScaleBias(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		rows, cols int
		scale      float32
		bias       bool
	}{{1, 7, 0.37, true}, {3, 300, 0, true}, {5, 64, -1.9, false}, {17, 100, 0.125, true}} {
		n := c.rows * c.cols
		x, b := ewWide(rng, n), ewWide(rng, c.cols)
		gx := ewUploadF32(t, d, x)
		var gb Range
		if c.bias {
			gb = ewUploadF32(t, d, b)
		}
		ewRun(t, d, func(r *Recorder) { r.ScaleBias(gx, c.rows, c.cols, c.scale, gb) })
		// what engine/model's mm does after the product
		if c.scale != 0 {
			tensor.Scale(x, c.scale)
		}
		if c.bias {
			for r := 0; r < c.rows; r++ {
				tensor.Add(x[r*c.cols:(r+1)*c.cols], b)
			}
		}
		// a product and an add, each correctly rounded and never fused
		ewSameBits(t, "ScaleBias", ewDownloadF32(t, d, gx), x)
	}
}

func TestEwSplitGated(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ tokens, heads, hd int }{{1, 2, 64}, {3, 4, 32}, {9, 3, 256}} {
		n := c.tokens * c.heads * c.hd
		qf := ewWide(rng, 2*n)
		gq, gg := ewUploadF32(t, d, make([]float32, n)), ewUploadF32(t, d, make([]float32, n))
		gf := ewUploadF32(t, d, qf)
		ewRun(t, d, func(r *Recorder) { r.SplitGated(gq, gg, gf, c.tokens, c.heads, c.hd) })
		// engine/model attention.forward's split
		q, gate := make([]float32, n), make([]float32, n)
		hd := c.hd
		for r := 0; r < c.tokens*c.heads; r++ {
			copy(q[r*hd:(r+1)*hd], qf[2*r*hd:(2*r+1)*hd])
			copy(gate[r*hd:(r+1)*hd], qf[(2*r+1)*hd:(2*r+2)*hd])
		}
		ewSameBits(t, "SplitGated q", ewDownloadF32(t, d, gq), q)
		ewSameBits(t, "SplitGated gate", ewDownloadF32(t, d, gg), gate)
	}
}

func TestEwGatherRows(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, dim = 9, 70
	src := ewWide(rng, rows*dim)
	src[5] = float32(math.NaN()) // bits are copied, whatever they are
	src[6] = math.Float32frombits(1)
	idx := []int32{8, 0, 3, 3, 7}
	gs := ewUploadF32(t, d, src)
	gi := ewUpload(t, d, i32Bytes(idx))
	gd := ewUploadF32(t, d, make([]float32, len(idx)*dim))
	ewRun(t, d, func(r *Recorder) { r.GatherRows(gd, gs, gi, len(idx), dim) })
	want := make([]float32, 0, len(idx)*dim)
	for _, i := range idx {
		want = append(want, src[int(i)*dim:(int(i)+1)*dim]...)
	}
	ewSameBits(t, "GatherRows", ewDownloadF32(t, d, gd), want)
}

func TestEwErrors(t *testing.T) {
	d := testDevice(t)
	x := ewUploadF32(t, d, make([]float32, 8))
	r := d.Begin()
	r.Add(x, x, 9)
	if _, err := r.Submit(); err == nil {
		t.Error("Add past the end of its range: no error")
	}
	r = d.Begin()
	r.Add(Range{Buf: x.Buf, Off: 2, Size: 8}, x, 1)
	if _, err := r.Submit(); err == nil {
		t.Error("Add at an unaligned offset: no error")
	}
}
