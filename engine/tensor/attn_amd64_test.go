package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The kernels of attn_amd64.s against their plain-Go twins in attn_kernels.go, on
// the same inputs: the bits must be equal (any NaN matching any NaN).

func sameBitsNaN(t *testing.T, what string, got, want float32) {
	t.Helper()
	if got != got && want != want {
		return
	}
	if math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("%s: SIMD %g (%#08x), Go %g (%#08x)", what, got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// expEdges are arguments around every branch of ggml_v_expf: the
// flush-to-zero and overflow ends, the |n| > 126 and > 192 thresholds,
// signed zeros, infinities and NaN.
var expEdges = func() []float32 {
	e := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -0.5, 1e-30, -1e-30,
		87, 88, 88.5, 89, 100, 133, 134, 150, -87, -88, -88.5, -89, -100, -103.9, -103.98, -104, -133, -134, -150,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32}
	for _, c := range []float32{126, 192} {
		x := c * float32(math.Ln2)
		for _, s := range []float32{1, -1} {
			for d := -4; d <= 4; d++ {
				e = append(e, math.Float32frombits(uint32(int32(math.Float32bits(s*x))+int32(d))))
			}
		}
	}
	return e
}()

func TestAttnExpShiftSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 100} {
		for _, kind := range []string{"softmax", "wide", "edges"} {
			src := make([]float32, n)
			for i := range src {
				switch kind {
				case "softmax": // scores minus a maximum at most 30 above them
					src[i] = float32(r.NormFloat64() * 10)
				case "wide":
					src[i] = float32(r.NormFloat64() * 200)
				case "edges":
					src[i] = expEdges[r.IntN(len(expEdges))]
				}
			}
			for _, m := range []float32{0, 3.25, -7, 30} {
				got, want := make([]float32, n), make([]float32, n)
				AttnExpShift(got, src, m)
				for i := range want {
					want[i] = expf32(src[i] - m)
				}
				for i := range got {
					sameBitsNaN(t, fmt.Sprintf("%s n=%d m=%g: exp(%g - m)", kind, n, m, src[i]), got[i], want[i])
				}
			}
		}
	}
	// every edge in every lane position
	src := make([]float32, 8*len(expEdges))
	for i := range src {
		src[i] = expEdges[(i/8+i%8)%len(expEdges)]
	}
	got := make([]float32, len(src))
	AttnExpShift(got, src, 0)
	for i := range got {
		sameBitsNaN(t, fmt.Sprintf("edge exp(%g)", src[i]), got[i], expf32(src[i]))
	}
}

// attnValues makes n values of a kind: normal, wide-ranged, or with
// signed zeros, subnormals and infinities mixed in.
func attnValues(r *rand.Rand, kind string, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch kind {
		case "normal":
			x[i] = float32(r.NormFloat64())
		case "wide":
			x[i] = float32(math.Copysign(math.Pow(10, r.Float64()*30-15), r.NormFloat64()))
		case "edges":
			x[i] = []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-42, 65504, -65504, float32(math.Inf(1)),
				float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())}[r.IntN(10)]
		}
	}
	return x
}

func TestAttnScores64SIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, hd := range []int{1, 8, 13, 32, 64, 128, 256} {
		for _, kind := range []string{"normal", "wide", "edges"} {
			q, kt := attnValues(r, kind, hd), attnValues(r, kind, 64*hd)
			var got, want [64]float32
			for i := range got {
				got[i] = float32(math.NaN()) // must be overwritten
			}
			scale := float32(1 / math.Sqrt(float64(hd)))
			AttnScores64(&got, kt, q, scale)
			attnScores64Go(&want, kt, q, scale)
			for l := range got {
				sameBitsNaN(t, fmt.Sprintf("hd=%d %s lane %d", hd, kind, l), got[l], want[l])
			}
		}
	}
}

// f16Values makes n F16 codes of a kind; "edges" mixes in zeros,
// subnormals, the largest finite values and infinities.
func f16Values(r *rand.Rand, kind string, n int) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		switch kind {
		case "normal":
			v[i] = F32ToF16(float32(r.NormFloat64()))
		case "wide":
			v[i] = uint16(r.IntN(0x7c00)) | uint16(r.IntN(2))<<15 // every finite code
		case "edges":
			v[i] = []uint16{0, 0x8000, 1, 0x8001, 0x3ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, F32ToF16(float32(r.NormFloat64()))}[r.IntN(10)]
		}
	}
	return v
}

func TestDeltaStepSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, dk := range []int{32, 64, 128, 256} {
		for _, kind := range []string{"normal", "wide", "edges"} {
			S := attnValues(r, kind, dk*dk)
			q, k, v := attnValues(r, "normal", dk), attnValues(r, kind, dk), attnValues(r, kind, dk)
			eg, beta, scale := float32(r.Float64()), float32(r.Float64()), float32(1/math.Sqrt(float64(dk)))
			S2 := append([]float32(nil), S...)
			got, want := make([]float32, dk), make([]float32, dk)
			DeltaStep(S, q, k, v, eg, beta, scale, got)
			deltaStepGo(S2, q, k, v, eg, beta, scale, want)
			for j := range got {
				sameBitsNaN(t, fmt.Sprintf("dk=%d %s o[%d]", dk, kind, j), got[j], want[j])
			}
			for i := range S {
				sameBitsNaN(t, fmt.Sprintf("dk=%d %s S[%d]", dk, kind, i), S[i], S2[i])
			}
		}
	}
}

func TestAttnDotF16RowsSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(9, 10))
	for _, hd := range []int{1, 8, 31, 32, 33, 64, 100, 128, 256} {
		for _, rows := range []int{1, 3, 17} {
			for _, kind := range []string{"normal", "wide", "edges"} {
				stride := hd + r.IntN(3)*8
				k := f16Values(r, kind, (rows-1)*stride+hd)
				q16 := f16Values(r, kind, hd)
				q := make([]float32, hd)
				for i, h := range q16 {
					q[i] = F16ToF32(h)
				}
				got, want := make([]float32, rows), make([]float32, rows)
				AttnDotF16Rows(got, k, stride, q)
				useSIMD = false
				AttnDotF16Rows(want, k, stride, q)
				useSIMD = true
				for i := range got {
					sameBitsNaN(t, fmt.Sprintf("hd=%d rows=%d %s row %d", hd, rows, kind, i), got[i], want[i])
				}
			}
		}
	}
}

func TestAttnAccF16SIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, hd := range []int{1, 8, 16, 24, 32, 40, 64, 100, 128, 256} {
		for _, rows := range []int{1, 2, 9, 64} {
			for _, kind := range []string{"normal", "wide", "edges"} {
				stride := hd + r.IntN(3)*8
				v := f16Values(r, kind, (rows-1)*stride+hd)
				ms, vs := make([]float32, rows), make([]float32, rows)
				for i := range ms {
					ms[i], vs[i] = 1, float32(r.Float64())
					if r.IntN(3) == 0 {
						ms[i], vs[i] = float32(r.Float64()), 1
					}
					if kind == "edges" && r.IntN(4) == 0 {
						ms[i] = []float32{0, 1e-30, 2, 1e5}[r.IntN(4)]
					}
				}
				got := make([]float32, hd)
				for i, h := range f16Values(r, kind, hd) {
					got[i] = F16ToF32(h)
				}
				want := append([]float32(nil), got...)
				AttnAccF16(got, v, stride, ms, vs)
				attnAccF16Go(want, v, stride, ms, vs)
				for d := range got {
					sameBitsNaN(t, fmt.Sprintf("hd=%d rows=%d %s dim %d", hd, rows, kind, d), got[d], want[d])
				}
			}
		}
	}
}

func TestAttnKTSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(15, 16))
	for _, hd := range []int{1, 7, 8, 9, 32, 36, 256} {
		for _, rows := range []int{1, 7, 8, 9, 31, 64} {
			stride := hd + r.IntN(3)*8
			k := f16Values(r, "wide", (rows-1)*stride+hd)
			got, want := make([]float32, 64*hd), make([]float32, 64*hd)
			AttnKT(got, k, stride, rows, hd)
			useSIMD = false
			AttnKT(want, k, stride, rows, hd)
			useSIMD = true
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("hd=%d rows=%d: kt[%d] (dim %d, row %d) = %g, want %g", hd, rows, i, i/64, i%64, got[i], want[i])
				}
			}
		}
	}
}

func TestAttnExpSumSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(17, 18))
	for _, m := range []int{1, 2, 7, 8, 9, 15, 16, 33, 63, 64} {
		for _, kind := range []string{"softmax", "wide", "edges"} {
			var s [64]float32
			for i := range s {
				switch kind {
				case "softmax":
					s[i] = float32(r.NormFloat64() * 8)
				case "wide":
					s[i] = float32(r.NormFloat64() * 200)
				case "edges":
					s[i] = expEdges[r.IntN(len(expEdges))]
				}
			}
			mx := float32(r.NormFloat64() * 4)
			var got, want [64]float32
			for i := range got {
				got[i], want[i] = -1, -1
			}
			gs := AttnExpSum(&got, &s, m, mx)
			ws := attnExpSumGo(&want, &s, m, mx)
			if !(gs != gs && ws != ws) && math.Float64bits(gs) != math.Float64bits(ws) {
				t.Fatalf("%s m=%d: sum %g, want %g", kind, m, gs, ws)
			}
			for i := 0; i < (m+7)/8*8; i++ {
				sameBitsNaN(t, fmt.Sprintf("%s m=%d lane %d", kind, m, i), got[i], want[i])
			}
		}
	}
}

func TestAttnDotF32RowsSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(19, 20))
	for _, hd := range []int{1, 8, 31, 32, 33, 35, 64, 100, 128, 256} {
		for _, rows := range []int{1, 3, 17} {
			for _, kind := range []string{"normal", "wide", "edges"} {
				stride := hd + r.IntN(3)*8
				k, q := attnValues(r, kind, (rows-1)*stride+hd), attnValues(r, kind, hd)
				got, want := make([]float32, rows), make([]float32, rows)
				AttnDotF32Rows(got, k, stride, q)
				useSIMD = false
				AttnDotF32Rows(want, k, stride, q)
				useSIMD = true
				for i := range got {
					sameBitsNaN(t, fmt.Sprintf("hd=%d rows=%d %s row %d", hd, rows, kind, i), got[i], want[i])
					if w := ggmlDotF32(k[i*stride:i*stride+hd], q); !(w != w && want[i] != want[i]) && math.Float32bits(w) != math.Float32bits(want[i]) {
						t.Fatalf("twin row %d: %g, ggmlDotF32 %g", i, want[i], w)
					}
				}
			}
		}
	}
}

func TestAttnMadF32SIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 100} {
		for _, kind := range []string{"normal", "wide", "edges"} {
			x, y := attnValues(r, kind, n), attnValues(r, kind, n)
			a := float32(r.NormFloat64())
			got := append([]float32(nil), y...)
			AttnMadF32(got, x, a)
			for i := range got {
				sameBitsNaN(t, fmt.Sprintf("%s n=%d [%d]", kind, n, i), got[i], fma32(x[i], a, y[i]))
			}
		}
	}
}

func TestAttnMadRowsSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(23, 24))
	for _, hd := range []int{1, 7, 8, 16, 24, 32, 40, 64, 72, 100, 128, 136, 256} {
		for _, rows := range []int{0, 1, 2, 5, 64} {
			for _, kind := range []string{"normal", "wide", "edges"} {
				stride := hd + r.IntN(3)*8
				v16 := f16Values(r, kind, max(0, (rows-1)*stride+hd))
				p := attnValues(r, "normal", rows)
				for i := range p {
					p[i] = float32(math.Abs(float64(p[i]))) / 3
				}
				// widen (SIMD and Go) and check against the F16 kernel's twin
				vf, vg := make([]float32, rows*hd), make([]float32, rows*hd)
				AttnWidenF16(vf, v16, stride, rows, hd)
				useSIMD = false
				AttnWidenF16(vg, v16, stride, rows, hd)
				useSIMD = true
				for i := range vf {
					sameBitsNaN(t, fmt.Sprintf("widen hd=%d rows=%d [%d]", hd, rows, i), vf[i], vg[i])
				}
				got := attnValues(r, "normal", hd)
				want := append([]float32(nil), got...)
				AttnMadRows(got, vf, hd, p)
				attnMadF16RowsGo(want, v16, stride, p)
				for d := range got {
					sameBitsNaN(t, fmt.Sprintf("hd=%d rows=%d %s dim %d", hd, rows, kind, d), got[d], want[d])
				}
			}
		}
	}
}

// attnMadF16RowsGo is AttnMadRows over F16 rows, the loop of attendTiled.
func attnMadF16RowsGo(o []float32, v []uint16, stride int, p []float32) {
	if len(o) == 0 {
		return
	}
	for j, pj := range p {
		row := v[j*stride : j*stride+len(o)]
		for d := range o {
			o[d] = fma32(pj, f16Table[row[d]], o[d])
		}
	}
}

func TestAttnPairKernelsMatchSingle(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(25, 26))
	for _, hd := range []int{1, 8, 13, 32, 40, 64, 128, 256} {
		for _, kind := range []string{"normal", "wide", "edges"} {
			kt, q0, q1 := attnValues(r, kind, 64*hd), attnValues(r, kind, hd), attnValues(r, kind, hd)
			var g0, g1, w0, w1 [64]float32
			AttnScores64x2(&g0, &g1, kt, q0, q1, 0.125)
			attnScores64Go(&w0, kt, q0, 0.125)
			attnScores64Go(&w1, kt, q1, 0.125)
			for l := range g0 {
				sameBitsNaN(t, fmt.Sprintf("scores hd=%d %s q0 lane %d", hd, kind, l), g0[l], w0[l])
				sameBitsNaN(t, fmt.Sprintf("scores hd=%d %s q1 lane %d", hd, kind, l), g1[l], w1[l])
			}
			for _, rows := range []int{1, 5, 64} {
				stride := hd + r.IntN(3)*8
				v := attnValues(r, kind, (rows-1)*stride+hd)
				p0, p1 := attnValues(r, "normal", rows), attnValues(r, "normal", rows)
				o0, o1 := attnValues(r, "normal", hd), attnValues(r, "normal", hd)
				e0, e1 := append([]float32(nil), o0...), append([]float32(nil), o1...)
				AttnMadRowsx2(o0, o1, v, stride, p0, p1)
				attnMadRowsGo(e0, v, stride, p0)
				attnMadRowsGo(e1, v, stride, p1)
				for d := range o0 {
					sameBitsNaN(t, fmt.Sprintf("mad hd=%d rows=%d %s o0 %d", hd, rows, kind, d), o0[d], e0[d])
					sameBitsNaN(t, fmt.Sprintf("mad hd=%d rows=%d %s o1 %d", hd, rows, kind, d), o1[d], e1[d])
				}
			}
		}
	}
}

func TestConvTapsSIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	defer func() { useSIMD = true }()
	r := rand.New(rand.NewPCG(27, 28))
	for _, c := range []int{1, 7, 8, 9, 64, 100} {
		for _, k := range []int{1, 2, 3, 4, 5, 8} {
			for _, kind := range []string{"normal", "wide", "edges"} {
				win, mix, taps := attnValues(r, kind, (k-1)*c), attnValues(r, kind, c), attnValues(r, kind, k*c)
				got, want := make([]float32, c), make([]float32, c)
				ConvTaps(got, win, mix, taps, k)
				useSIMD = false
				ConvTaps(want, win, mix, taps, k)
				useSIMD = true
				for i := range got {
					sameBitsNaN(t, fmt.Sprintf("c=%d k=%d %s ch %d", c, k, kind, i), got[i], want[i])
				}
			}
		}
	}
}

func TestAttnAccE4M3SIMDMatchesGo(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(29, 30))
	for _, hd := range []int{1, 8, 16, 24, 32, 40, 64, 100, 128, 256} {
		for _, rows := range []int{1, 2, 9, 64} {
			for _, kind := range []string{"normal", "all"} {
				stride := hd + r.IntN(3)*8
				v := make([]byte, (rows-1)*stride+hd)
				for i := range v {
					if kind == "all" {
						v[i] = byte(r.IntN(256)) // every code, NaN ones included
					} else {
						v[i] = byte(r.IntN(0x7f)) | byte(r.IntN(2))<<7
					}
				}
				ms, vs := make([]float32, rows), make([]float32, rows)
				for i := range ms {
					ms[i], vs[i] = 1, float32(r.Float64())
					if r.IntN(3) == 0 {
						ms[i], vs[i] = float32(r.Float64()), 1
					}
				}
				got := attnValues(r, "normal", hd)
				want := append([]float32(nil), got...)
				AttnAccE4M3(got, v, stride, ms, vs)
				attnAccE4M3Go(want, v, stride, ms, vs)
				for d := range got {
					sameBitsNaN(t, fmt.Sprintf("hd=%d rows=%d %s dim %d", hd, rows, kind, d), got[d], want[d])
				}
			}
		}
	}
}
