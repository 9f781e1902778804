package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

func TestEwRMSNorm(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct {
		rows, dim int
		weight    bool
		inPlace   bool
	}{{1, 64, true, false}, {7, 128, true, true}, {3, 1000, false, false}, {2, 4096, true, false}, {5, 256, false, true}} {
		n := c.rows * c.dim
		x := ewRand(rng, n, 3)
		for i := range x { // rows of very different sizes
			x[i] *= float32(1 + i/c.dim*7)
		}
		w := ewRand(rng, c.dim, 2)
		gx := ewUploadF32(t, d, x)
		var gw Range
		if c.weight {
			gw = ewUploadF32(t, d, w)
		} else {
			w = nil
		}
		dst := gx
		if !c.inPlace {
			dst = ewUploadF32(t, d, make([]float32, n))
		}
		const eps = 1e-6
		ewRun(t, d, func(r *Recorder) { r.RMSNorm(dst, gx, gw, c.rows, c.dim, eps) })
		want := make([]float32, n)
		for r := 0; r < c.rows; r++ {
			tensor.RMSNorm(want[r*c.dim:(r+1)*c.dim], x[r*c.dim:(r+1)*c.dim], w, eps)
		}
		// The sum of squares is as good as the CPU's float64 one (about
		// 2^-44 apart), so the scale 1/sqrt(mean+eps) differs only by the
		// GPU's division of the sum (Vulkan allows 2.5 ulp), its square
		// root (inherited from 1/inversesqrt: up to 4.5 ulp, half of
		// that in the scale... counted whole) and the final reciprocal
		// (2.5 ulp): 10 ulp of scale, plus an ulp for re-rounding the
		// products: 11 ulp (22 u) of each value.
		ewWithin(t, "RMSNorm", ewDownloadF32(t, d, dst), want, 22*ewU, 0x1p-126)
	}
}
