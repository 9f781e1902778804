package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// The K-quant kernels of kquant_arm64.s against their plain-Go twins on
// random blocks: the same bits. Under qemu (make test-arm64, or
//
//	GOARCH=arm64 CGO_ENABLED=0 go test -c -o /tmp/t-arm64.test ./engine/tensor
//	cd engine/tensor && QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64-static -cpu max /tmp/t-arm64.test -test.run 'Q8KNEON|KNEON'
//
// and with -cpu cortex-a72, which has no SDOT, for the fallbacks).

// kF16Gen draws an F16 weight scale: subnormal, ordinary, negative, or one
// of the extremes (zero, the smallest subnormal, 65504).
func kF16Gen() *rapid.Generator[uint16] {
	return rapid.OneOf(rapid.Uint16Range(0x0001, 0x03FF), rapid.Uint16Range(0x1000, 0x5BFF),
		rapid.Uint16Range(0x9000, 0xABFF), rapid.SampledFrom([]uint16{0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x3C00}))
}

// kRowGen draws nb blocks of a K-quant type: random bytes (with all-ones,
// all-zero and nibble patterns), an F16 scale drawn by kF16Gen at each
// offset in offs of every block.
func kRowGen(t *rapid.T, nb, blockBytes int, offs ...int) []byte {
	row := rapid.SliceOfN(rapid.OneOf(rapid.Byte(), rapid.SampledFrom([]byte{0, 0xFF, 0x0F, 0xF0, 0x55, 0xAA})), nb*blockBytes, nb*blockBytes).Draw(t, "row")
	for b := 0; b < nb; b++ {
		for _, o := range offs {
			h := kF16Gen().Draw(t, "d")
			row[b*blockBytes+o], row[b*blockBytes+o+1] = byte(h), byte(h>>8)
		}
	}
	return row
}

// kActGen draws n Q8_K activation blocks: quants over the whole int8 range
// (-128 included, which the quantizer never makes, to hold SDOT's signed
// bytes to the twins' arithmetic), their sums of 16 (or, sometimes, any
// int16), and a scale that may be tiny, subnormal, zero or large.
func kActGen(t *rapid.T, n int) []q8KAct {
	act := make([]q8KAct, n)
	for i := range act {
		copy(act[i].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8(), rapid.SampledFrom([]int8{-128, -127, 127, 0})), qkK, qkK).Draw(t, "x"))
		anySums := rapid.IntRange(0, 5).Draw(t, "anySums") == 0
		for k := range act[i].bsums {
			s := 0
			for _, x := range act[i].q[16*k : 16*k+16] {
				s += int(x)
			}
			if anySums {
				s = int(rapid.Int16().Draw(t, "bsum"))
			}
			act[i].bsums[k] = int16(s)
		}
		act[i].d = rapid.OneOf(rapid.Float32Range(1e-6, 10), rapid.SampledFrom([]float32{0, 1e-40, 1, 65504})).Draw(t, "dx")
	}
	return act
}

// noNEONDot runs f with the SDOT kernels off (the twins' paths).
func noNEONDot(f func()) {
	saved := useNEONDot
	useNEONDot = false
	defer func() { useNEONDot = saved }()
	f()
}

// TestQuantizeQ8KNEON: quantizeQ8KNEON gives quantizeQ8KGo's quants, sums
// and scale bit for bit, on blocks of normal values at any scale, with
// ties of the rounding (small integers and halves times a power of two),
// subnormals, zeros, ±65504, infinities and NaNs, and all-zero and
// zero-and-NaN blocks.
func TestQuantizeQ8KNEON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 5).Draw(t, "blocks")
		x := make([]float32, nb*qkK)
		for b := 0; b < nb; b++ {
			kind := rapid.IntRange(0, 5).Draw(t, "kind")
			scale := float32(math.Ldexp(1, rapid.IntRange(-140, 100).Draw(t, "exp")))
			for i := b * qkK; i < (b+1)*qkK; i++ {
				switch kind {
				case 0: // normal values
					x[i] = scale * rapid.Float32Range(-1, 1).Draw(t, "v")
				case 1: // halves: ties of nearestInt
					x[i] = scale * float32(rapid.IntRange(-254, 254).Draw(t, "h")) / 2
				case 2: // any bits: NaNs, infinities, subnormals
					x[i] = math.Float32frombits(rapid.Uint32().Draw(t, "bits"))
				case 3: // the extremes
					x[i] = rapid.SampledFrom([]float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 65504, -65504, 1, -1}).Draw(t, "e")
				case 4: // zeros and NaNs only
					if rapid.Bool().Draw(t, "nan") {
						x[i] = float32(math.NaN())
					}
				}
			}
		}
		got, want := make([]q8KAct, nb), make([]q8KAct, nb)
		for i := range got { // garbage, which a zero block must clear
			got[i].d, got[i].bsums[3], got[i].q[7] = 5, 9, 3
		}
		quantizeQ8K(got, x)
		quantizeQ8KGo(want, x)
		for b := range got {
			g, w := &got[b], &want[b]
			if g.q != w.q || g.bsums != w.bsums || math.Float32bits(g.d) != math.Float32bits(w.d) {
				t.Fatalf("block %d: NEON d %g (%#x) sums %v q %v\nGo d %g (%#x) sums %v q %v", b,
					g.d, math.Float32bits(g.d), g.bsums, g.q, w.d, math.Float32bits(w.d), w.bsums, w.q)
			}
		}
	})
}

// TestKQuantLanesNEON: the SDOT integer cores of Q4_K and Q6_K give their
// twins' eight lanes on random blocks, activations and scales.
func TestKQuantLanesNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		q := kRowGen(t, 1, 192)
		x := &kActGen(t, 1)[0].q
		var sc [8]int32
		for i, v := range rapid.SliceOfN(rapid.Int32Range(-200, 200), 8, 8).Draw(t, "sc") {
			sc[i] = v
		}
		var scv [64]int32
		for i, v := range rapid.SliceOfN(rapid.OneOf(rapid.Int32Range(-128, 127), rapid.SampledFrom([]int32{-128, 127, 0})), 64, 64).Draw(t, "scv") {
			scv[i] = v
		}
		var got, want [8]int32
		q4kLanes(q[:128], x, &sc, &got)
		q4kLanesGo(q[:128], x, &sc, &want)
		if got != want {
			t.Fatalf("Q4_K: NEON %v, Go %v", got, want)
		}
		q6kLanes(q[:128], q[128:192], x, &scv, &got)
		q6kLanesGo(q[:128], q[128:192], x, &scv, &want)
		if got != want {
			t.Fatalf("Q6_K: NEON %v, Go %v", got, want)
		}
	})
}

// kScaleGen draws an F32 scale as the kernels get them: an F16 weight
// scale (kF16Gen), or any finite F32 of moderate size.
func kScaleGen(t *rapid.T, name string) float32 {
	if rapid.Bool().Draw(t, name+"16") {
		return f16Table[kF16Gen().Draw(t, name)]
	}
	return rapid.Float32Range(-100, 100).Draw(t, name)
}

// sameBitsK fails t unless got and want have the same bits, or are both
// NaN (sameFloat).
func sameBitsK(t *rapid.T, what string, got, want []float32) {
	for i := range got {
		if !sameFloat(got[i], want[i]) {
			t.Fatalf("%s [%d]: NEON %g (%#x), Go %g (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestQ4KStepNEON: one repacked Q4_K block against 1 to 9 activation
// blocks (strides 1 to 3) gives q4kStepGo's accumulators bit for bit.
func TestQ4KStepNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 9).Draw(t, "n")
		stride := rapid.IntRange(1, 3).Draw(t, "stride")
		blk := kRowGen(t, 1, q4KBytes)
		act := kActGen(t, (n-1)*stride+1)
		var sm [4]uint32
		q4KScaleBytes(blk[4:16], &sm)
		dW, dminW := kScaleGen(t, "dW"), kScaleGen(t, "dminW")
		got := make([]float32, 2*n)
		for i := range got {
			got[i] = kScaleGen(t, "acc")
		}
		want := append([]float32(nil), got...)
		q4kStep(blk[16:144], act, stride, n, &sm, dW, dminW, got)
		q4kStepGo(blk[16:144], act, stride, n, &sm, dW, dminW, want)
		sameBitsK(t, "acc", got, want)
	})
}

// TestQ4KRowNEON: the Q4_K row kernel of decode gives dotQ4KRepacked's
// bits (with the twins' cores) on 1 to 7 random blocks with extreme
// scales.
func TestQ4KRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 7).Draw(t, "blocks")
		row := kRowGen(t, nb, q4KBytes, 0, 2)
		act := kActGen(t, nb)
		got := []float32{dotQ4KRepackedRow(row, act), dotQ4K(row, act)}
		want := make([]float32, 2)
		noNEONDot(func() { want[0], want[1] = dotQ4KRepacked(row, act), dotQ4K(row, act) })
		sameBitsK(t, "dotQ4KRepacked, dotQ4K", got, want)
	})
}

// TestQ6KStepNEON: one Q6_K block against 1 to 9 activation blocks
// (strides 1 to 3) gives q6kStepGo's lanes bit for bit.
func TestQ6KStepNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 9).Draw(t, "n")
		stride := rapid.IntRange(1, 3).Draw(t, "stride")
		blk := kRowGen(t, 1, q6KBytes)
		act := kActGen(t, (n-1)*stride+1)
		dW := kScaleGen(t, "dW")
		got := make([]float32, 8*n)
		for i := range got {
			got[i] = kScaleGen(t, "acc")
		}
		want := append([]float32(nil), got...)
		var scratch [144]int16
		q6kStep(blk[0:128], blk[128:192], blk[192:208], act, stride, n, &scratch, dW, got)
		q6kStepGo(blk[0:128], blk[128:192], blk[192:208], act, stride, n, &scratch, dW, want)
		sameBitsK(t, "lanes", got, want)
	})
}

// TestQ6KRowNEON: the Q6_K row kernel of decode gives dotQ6K's bits (with
// the twins' cores) on 1 to 7 random blocks with extreme scales.
func TestQ6KRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 7).Draw(t, "blocks")
		row := kRowGen(t, nb, q6KBytes, 208)
		act := kActGen(t, nb)
		got := []float32{dotQ6KRow(row, act)}
		want := make([]float32, 1)
		noNEONDot(func() { want[0] = dotQ6K(row, act) })
		sameBitsK(t, "dotQ6K", got, want)
	})
}

// TestQ5KRowNEON: the Q5_K row kernel gives dotQ5K's bits (with the
// twins' cores) on 1 to 7 random blocks with extreme scales.
func TestQ5KRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 7).Draw(t, "blocks")
		row := kRowGen(t, nb, q5KBytes, 0, 2)
		act := kActGen(t, nb)
		got := []float32{dotQ5KRow(row, act)}
		want := make([]float32, 1)
		noNEONDot(func() { want[0] = dotQ5K(row, act) })
		sameBitsK(t, "dotQ5K", got, want)
	})
}

// TestLegacyRowNEON: the Q4_0/IQ4_NL repacked row kernel and the vec_dot
// row kernels of Q4_0/Q5_0 and Q4_1/Q5_1 give dotLegacyRepacked's,
// dotLegacyQ8's and dotLegacyQ8_1's bits on 1 to 9 random blocks with
// extreme scales and minimums.
func TestLegacyRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.SampledFrom([]DType{Q4_0, IQ4_NL, Q5_0, Q4_1, Q5_1}).Draw(t, "type")
		nb := rapid.IntRange(1, 9).Draw(t, "blocks")
		row := kRowGen(t, nb, typ.BlockBytes(), 0)
		act := make([]q8Act, nb)
		for b := range act {
			copy(act[b].q[:], rapid.SliceOfN(rapid.OneOf(rapid.Int8(), rapid.SampledFrom([]int8{-128, -127, 127, 0})), 32, 32).Draw(t, "x"))
			act[b].d = rapid.OneOf(rapid.Float32Range(1e-6, 10), rapid.SampledFrom([]float32{0, 1e-40, 1, 65504})).Draw(t, "dx")
		}
		var got, want []float32
		switch typ {
		case Q4_1, Q5_1:
			sx := make([]float32, nb)
			for b := range sx {
				sx[b] = kScaleGen(t, "s")
			}
			for b := 0; b < nb; b++ { // the minimums, F16 at byte 2
				h := kF16Gen().Draw(t, "m")
				row[b*typ.BlockBytes()+2], row[b*typ.BlockBytes()+3] = byte(h), byte(h>>8)
			}
			got = []float32{dotLegacyQ8_1Row(typ, row, act, sx)}
			want = []float32{dotLegacyQ8_1(typ, row, act, sx)}
		case Q5_0:
			got = []float32{dotLegacyQ8Row(typ, row, act)}
			want = []float32{dotLegacyQ8(typ, row, act)}
		default:
			got = []float32{dotLegacyRepackedRow(typ, row, act)}
			want = []float32{dotLegacyRepacked(typ, row, act)}
			if typ == Q4_0 {
				got = append(got, dotLegacyQ8Row(typ, row, act))
				want = append(want, dotLegacyQ8(typ, row, act))
			}
		}
		sameBitsK(t, typ.String(), got, want)
	})
}

// TestIQ4XSRowNEON: the IQ4_XS row kernel gives dotIQ4XS's bits on 1 to 7
// random blocks with extreme scales.
func TestIQ4XSRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 7).Draw(t, "blocks")
		row := kRowGen(t, nb, iq4XSBytes, 0)
		act := kActGen(t, nb)
		sameBitsK(t, "dotIQ4XS", []float32{dotIQ4XSRow(row, act)}, []float32{dotIQ4XS(row, act)})
	})
}

// TestQ2KTileNEON: the arm64 Q2_K two-row tile (q2kStepNEON per block)
// gives q2kTileGo's lanes bit for bit on random blocks with extreme
// scales, 1 to 9 vectors and activation strides past the row.
func TestQ2KTileNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 4).Draw(t, "blocks")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "pad")
		rb := nb*q2KBytes + rapid.IntRange(0, 1).Draw(t, "rowPad")*q2KBytes
		w := kRowGen(t, 2*rb/q2KBytes, q2KBytes, 80, 82)
		act := kActGen(t, (n-1)*astride+nb)
		got := make([]float32, 16*n)
		for i := range got {
			got[i] = kScaleGen(t, "acc")
		}
		want := append([]float32(nil), got...)
		q2kTile(w, rb, act, astride, nb, n, got)
		q2kTileGo(w, rb, act, astride, nb, n, want)
		sameBitsK(t, "acc", got, want)
	})
}

// BenchmarkKQuantNEON times each kernel of kquant_arm64.s beside its Go
// twin (go: useNEONDot off, or quantizeQ8KGo) on one 4096-value row (16
// super-blocks) of random blocks with ordinary scales, in ns per 256
// values and vector (the block steps and the tiles over 64 vectors:
// per row and vector). Under qemu the figures mean nothing; on an arm64
// machine:
//
//	go test ./engine/tensor -run XXX -bench KQuantNEON
func BenchmarkKQuantNEON(b *testing.B) {
	const nb, vecs = 16, 64
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, vecs*nb*qkK)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	act := make([]q8KAct, vecs*nb)
	quantizeQ8KGo(act, x)
	act8 := make([]q8Act, nb*qkK/q8Block)
	quantizeQ8Vector(act8, x[:nb*qkK])
	row := func(t DType, offs ...int) []byte {
		bb := t.BlockBytes()
		r := make([]byte, nb*qkK/t.BlockElems()*bb)
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		for blk := 0; blk < len(r)/bb; blk++ {
			for _, o := range offs {
				r[blk*bb+o+1] = 0x20 | byte(rng.Uint32()&0x0F) // about 2^-7
			}
		}
		return r
	}
	q4k, q6k, q5k, iq4 := row(Q4_K, 0, 2), row(Q6_K, 208), row(Q5_K, 0, 2), row(IQ4_XS, 0)
	q40, q50 := row(Q4_0, 0), row(Q5_0, 0)
	q2k, q3k := row(Q2_K, 80, 82), row(Q3_K, 108)
	q5k2 := append(append([]byte(nil), q5k...), row(Q5_K, 0, 2)...)
	q2k2 := append(append([]byte(nil), q2k...), row(Q2_K, 80, 82)...)
	acc5 := make([]float32, 32*vecs)
	var sink float32
	acc := make([]float32, 8*vecs)
	var sm [4]uint32
	var scratch [144]int16
	kernels := []struct {
		name    string
		vectors int
		run     func()
	}{
		{"quantizeQ8K", 1, nil},
		{"q4kRow", 1, func() { sink += dotQ4KRepackedRow(q4k, act[:nb]) }},
		{"q6kRow", 1, func() { sink += dotQ6KRow(q6k, act[:nb]) }},
		{"q5kRow", 1, func() { sink += dotQ5KRow(q5k, act[:nb]) }},
		{"iq4xsRow", 1, func() { sink += dotIQ4XSRow(iq4, act[:nb]) }},
		{"q4_0Repacked", 1, func() { sink += dotLegacyRepackedRow(Q4_0, q40, act8) }},
		{"q5_0Row", 1, func() { sink += dotLegacyQ8Row(Q5_0, q50, act8) }},
		{"q2kRow", 1, func() { sink += dotQ2KRow(q2k, act[:nb]) }},
		{"q3kRow", 1, func() { sink += dotQ3KRow(q3k, act[:nb]) }},
		{"q4kStep64", vecs, func() {
			for blk := 0; blk < nb; blk++ {
				q4KScaleBytes(q4k[blk*q4KBytes+4:blk*q4KBytes+16], &sm)
				q4kStep(q4k[blk*q4KBytes+16:(blk+1)*q4KBytes], act[blk:], nb, vecs, &sm, 0.01, 0.02, acc)
			}
		}},
		{"q5kTile64", 2 * vecs, func() { // two rows against 64 vectors
			q5kTile(q5k2, nb*q5KBytes, act, nb, nb, vecs, acc5)
		}},
		{"q2kTile64", 2 * vecs, func() {
			q2kTile(q2k2, nb*q2KBytes, act, nb, nb, vecs, acc5)
		}},
		{"q6kStep64", vecs, func() {
			for blk := 0; blk < nb; blk++ {
				w := q6k[blk*q6KBytes:]
				q6kStep(w[0:128], w[128:192], w[192:208], act[blk:], nb, vecs, &scratch, 0.01, acc)
			}
		}},
	}
	for _, k := range kernels {
		for _, impl := range []string{"neon", "go"} {
			b.Run(k.name+"/"+impl, func(b *testing.B) {
				run := k.run
				if k.name == "quantizeQ8K" {
					run = func() { quantizeQ8K(act[:nb], x[:nb*qkK]) }
					if impl == "go" {
						run = func() { quantizeQ8KGo(act[:nb], x[:nb*qkK]) }
					}
				} else if impl == "go" {
					saved := useNEONDot
					useNEONDot = false
					defer func() { useNEONDot = saved }()
				}
				for b.Loop() {
					run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nb*k.vectors), "ns/superblock")
			})
		}
	}
	_ = sink
}

// TestQ23KRowNEON: the Q2_K and Q3_K row kernels give dotQ2K's and
// dotQ3K's bits on 1 to 7 random blocks with extreme scales.
func TestQ23KRowNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 7).Draw(t, "blocks")
		act := kActGen(t, nb)
		q2 := kRowGen(t, nb, q2KBytes, 80, 82)
		q3 := kRowGen(t, nb, q3KBytes, 108)
		sameBitsK(t, "dotQ2K, dotQ3K", []float32{dotQ2KRow(q2, act), dotQ3KRow(q3, act)}, []float32{dotQ2K(q2, act), dotQ3K(q3, act)})
	})
}

// TestMatMulKQuantNEON: MatMul with the SDOT kernels gives the same bits
// as with them off (the twins), for every K-quant and legacy type, row
// counts that are and are not a multiple of 8 (the repacked arithmetic and
// vec_dot), 1 to 5 vectors (decode's row kernels, prefill's block steps)
// and one and two threads.
func TestMatMulKQuantNEON(t *testing.T) {
	requireNEONDot(t)
	rng := rand.New(rand.NewPCG(35, 36))
	offs := map[DType][]int{Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208}, Q2_K: {80, 82}, Q3_K: {108}, IQ4_XS: {0},
		Q4_0: {0}, Q5_0: {0}, Q4_1: {0, 2}, Q5_1: {0, 2}, IQ4_NL: {0}}
	const cols = 768
	for typ, o := range offs {
		for _, rows := range []int{16, 13} {
			bb := typ.BlockBytes()
			data := make([]byte, rows*cols/typ.BlockElems()*bb)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			for blk := 0; blk < len(data)/bb; blk++ {
				for _, k := range o {
					data[blk*bb+k+1] = 0x20 | byte(rng.Uint32()&0x0F)
				}
			}
			m, err := NewMatrix(typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 2} {
				p := NewPool(threads)
				for n := 1; n <= 5; n++ {
					x := randomRow(rng, n*cols, 1)
					got, want := make([]float32, n*rows), make([]float32, n*rows)
					p.MatMul(got, m, x, n)
					noNEONDot(func() { p.MatMul(want, m, x, n) })
					for i := range got {
						if !sameFloat(got[i], want[i]) {
							t.Fatalf("%s %dx%d, %d vectors, %d threads: output %d (vector %d, row %d) SDOT %g, twins %g",
								typ, rows, cols, n, threads, i, i/rows, i%rows, got[i], want[i])
						}
					}
				}
				p.Close()
			}
		}
	}
}

// TestQ5KTileNEON: the arm64 Q5_K two-row tile (q5kStepNEON per block)
// gives q5kTileGo's accumulators bit for bit on random blocks with
// extreme scales, 1 to 9 vectors and activation strides past the row.
func TestQ5KTileNEON(t *testing.T) {
	requireNEONDot(t)
	rapid.Check(t, func(t *rapid.T) {
		nb := rapid.IntRange(1, 4).Draw(t, "blocks")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		astride := nb + rapid.IntRange(0, 2).Draw(t, "pad")
		rb := nb*q5KBytes + rapid.IntRange(0, 1).Draw(t, "rowPad")*q5KBytes
		w := kRowGen(t, 2*rb/q5KBytes, q5KBytes, 0, 2)
		act := kActGen(t, (n-1)*astride+nb)
		got := make([]float32, 32*n)
		for i := range got {
			got[i] = kScaleGen(t, "acc")
		}
		want := append([]float32(nil), got...)
		q5kTile(w, rb, act, astride, nb, n, got)
		q5kTileGo(w, rb, act, astride, nb, n, want)
		sameBitsK(t, "acc", got, want)
	})
}
