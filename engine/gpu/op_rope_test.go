package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// ewRopeApply transliterates engine/model's rope.apply (unexported): per head,
// pairs (k, k+dims/2) for NeoX, else (2k, 2k+1), y0 = fma(x0, c, -x1*s),
// y1 = fma(x0, s, x1*c).
func ewRopeApply(x []float32, heads, headDim, dims int, neox bool, cs []float32) {
	half := dims / 2
	stride, step := half, 1
	if !neox {
		stride, step = 1, 2
	}
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	for h := 0; h < heads; h++ {
		v := x[h*headDim : h*headDim+dims]
		for k := 0; k < half; k++ {
			c, s := cs[2*k], cs[2*k+1]
			i := k * step
			x0, x1 := v[i], v[i+stride]
			v[i] = fma(x0, c, -(x1 * s))
			v[i+stride] = fma(x0, s, x1*c)
		}
	}
}

// ewRopeTable is cos and sin of angles pos * base^(-2k/dims), as a stand-in
// for model.Rope.Table where no model is loaded (the op takes any table).
func ewRopeTable(tokens, dims int, pos0 int) []float32 {
	cs := make([]float32, tokens*dims)
	for i := 0; i < tokens; i++ {
		for k := 0; k < dims/2; k++ {
			s, c := math.Sincos(float64(pos0+i) * math.Pow(10000, -2*float64(k)/float64(dims)))
			cs[i*dims+2*k], cs[i*dims+2*k+1] = float32(c), float32(s)
		}
	}
	return cs
}

func ewRopeCheck(t *testing.T, d *Device, rng *rand.Rand, tokens, heads, hd, dims int, neox bool, cs []float32) {
	t.Helper()
	x := ewRand(rng, tokens*heads*hd, 4)
	gx, gc := ewUploadF32(t, d, x), ewUploadF32(t, d, cs)
	ewRun(t, d, func(r *Recorder) { r.Rope(gx, gc, tokens, heads, hd, dims, neox) })
	got := ewDownloadF32(t, d, gx)
	want := append([]float32(nil), x...)
	for i := 0; i < tokens; i++ {
		ewRopeApply(want[i*heads*hd:(i+1)*heads*hd], heads, hd, dims, neox, cs[i*dims:(i+1)*dims])
	}
	// The CPU rounds the second product, then fuses the first into the
	// add; a device that did not fuse (Vulkan does not promise it) rounds
	// once more, half an ulp of the larger product: |Δ| <= 2u *
	// (|x0*c| + |x1*s|), bounded here per value by 2u * 2 * max|x| (|cos|,
	// |sin| <= 1) taken over the pair. Unrotated values must be the same bits.
	same := 0
	for i := range want {
		if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
			same++
			continue
		}
		if i%hd >= dims {
			t.Fatalf("value %d (not rotated) = %g, want %g", i, got[i], want[i])
		}
		if e := math.Abs(float64(got[i] - want[i])); e > 4*ewU*8 {
			t.Fatalf("value %d = %g, want %g (|Δ| %.3g)", i, got[i], want[i], e)
		}
	}
	t.Logf("rope %d tokens × %d heads × %d (%d rotated, neox %v): %d of %d values the CPU's bits", tokens, heads, hd, dims, neox, same, len(want))
}

func TestEwRope(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range []struct {
		tokens, heads, hd, dims int
		neox                    bool
	}{{1, 4, 64, 64, false}, {5, 3, 128, 128, true}, {9, 2, 256, 64, true}, {4, 8, 64, 32, false}, {300, 2, 32, 32, true}} {
		ewRopeCheck(t, d, rng, c.tokens, c.heads, c.hd, c.dims, c.neox, ewRopeTable(c.tokens, c.dims, 17))
	}
}

// TestEwRopeModelTable rotates with the table of a real model
// (stories260K: llama, adjacent pairs) as model.Rope.Table gives it.
func TestEwRopeModelTable(t *testing.T) {
	d := testDevice(t)
	f, err := gguf.Open("../../testdata/models/stories260K.gguf")
	if err != nil {
		t.Skipf("stories260K: %v", err)
	}
	defer f.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F32, Pool: tensor.NewPool(1)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.Describe(m)
	if err != nil {
		t.Fatal(err)
	}
	a := w.Layers[0].Attn
	rd := a.Rope.Dims()
	const tokens = 40
	cs := make([]float32, tokens*rd)
	for i := 0; i < tokens; i++ {
		a.Rope.Table(cs[i*rd:(i+1)*rd], int32(100+7*i))
	}
	ewRopeCheck(t, d, rand.New(rand.NewPCG(17, 18)), tokens, a.Heads, a.HeadDim, rd, a.Rope.NeoX(), cs)
}
