package tensor

import (
	"math/rand/v2"
	"testing"
)

// Per-call cost of the tiled attention kernels at head size 256 (the keys
// and values of one block stay in cache across calls, as across the
// queries of a tile).
func BenchmarkAttnTileKernels(b *testing.B) {
	const hd = 256
	r := rand.New(rand.NewPCG(1, 1))
	kt, q := attnValues(r, "normal", 64*hd), attnValues(r, "normal", hd)
	v16 := f16Values(r, "normal", 64*hd)
	vf := make([]float32, 64*hd)
	AttnWidenF16(vf, v16, hd, 64, hd)
	var s, p [64]float32
	for i := range p {
		p[i] = 1.0 / 64
	}
	o := make([]float32, hd)
	b.Run("scores", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			AttnScores64(&s, kt, q, 0.0625)
		}
	})
	b.Run("scores-x2", func(b *testing.B) {
		var s1 [64]float32
		for i := 0; i < b.N; i++ {
			AttnScores64x2(&s, &s1, kt, q, q, 0.0625)
		}
	})
	b.Run("mad-x2", func(b *testing.B) {
		o1 := make([]float32, hd)
		for i := 0; i < b.N; i++ {
			AttnMadRowsx2(o, o1, vf, hd, p[:], p[:])
		}
	})
	b.Run("expsum", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			AttnExpSum(&p, &s, 64, 3)
		}
	})
	b.Run("mad", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			AttnMadRows(o, vf, hd, p[:])
		}
	})
	b.Run("kt", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			AttnKT(kt, v16, hd, 64, hd)
		}
	})
}
