package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/sample"
)

func TestEwArgmax(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(19, 20))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, vocab := range []int{1, 5, 256, 1000, 32000} {
		var rows [][]float32
		add := func(r []float32) { rows = append(rows, r) }
		add(ewRand(rng, vocab, 10))
		add(ewWide(rng, vocab))
		ties := make([]float32, vocab) // one value everywhere: index 0
		add(ties)
		r := ewRand(rng, vocab, 1) // the maximum twice: the lower index
		if vocab > 3 {
			r[vocab-1], r[vocab/2], r[vocab/3] = 5, 5, -5
		}
		add(r)
		r = ewRand(rng, vocab, 1) // NaNs never win, except in column 0
		for i := 1; i < vocab; i += 3 {
			r[i] = nan
		}
		add(r)
		r = ewRand(rng, vocab, 1)
		r[0] = nan
		add(r)
		r = ewRand(rng, vocab, 1) // -0 and +0 tie
		for i := range r {
			r[i] = -float32(math.Abs(float64(r[i])))
		}
		r[vocab-1] = 0
		if vocab > 1 {
			r[vocab/2] = float32(math.Copysign(0, -1))
		}
		add(r)
		r = make([]float32, vocab) // denormals are values, not zeros
		r[vocab-1] = math.Float32frombits(3)
		if vocab > 2 {
			r[1] = math.Float32frombits(2)
		}
		add(r)
		r = ewRand(rng, vocab, 1)
		for i := range r {
			r[i] = -inf
		}
		if vocab > 1 {
			r[vocab-1] = inf
		}
		add(r)
		var flat []float32
		for _, r := range rows {
			flat = append(flat, r...)
		}
		gl := ewUploadF32(t, d, flat)
		gd := ewUpload(t, d, make([]byte, 4*len(rows)))
		ewRun(t, d, func(r *Recorder) { r.Argmax(gd, gl, len(rows), vocab) })
		got := bytesI32(ewDownload(t, d, gd))
		for i, r := range rows {
			if want := sample.Argmax(r); got[i] != want {
				t.Errorf("vocab %d row %d: argmax %d, want %d (sample.Argmax)", vocab, i, got[i], want)
			}
		}
	}
}
