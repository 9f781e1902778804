package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refActFP4 quantizes x as vLLM's ref_nvfp4_quant does, step by step in
// float32 and in natural value order: per 16 values the scale
// SF = fp8(clamp(G*(vmax*(1/6)), 448)), the codes E2M1(clamp(x*(1/(SF*(1/G))), ±6)).
// It returns the E2M1 values (not doubled) and the SF per sub-block.
func refActFP4(x []float32, g float32) (vals []float64, sf []float32) {
	invG := 1 / g
	for s := 0; s < len(x)/16; s++ {
		xs := x[16*s : 16*s+16]
		var vmax float32
		for _, v := range xs {
			vmax = max(vmax, float32(math.Abs(float64(v))))
		}
		sc := g * (vmax * float32(1.0/6))
		if sc > 448 {
			sc = 448
		}
		f := float32(refE4M3(F32ToUE4M3(sc)))
		sf = append(sf, f)
		var o float32
		if f != 0 {
			o = 1 / (f * invG)
		}
		for _, v := range xs {
			y := v * o
			y = min(max(y, -6), 6)
			vals = append(vals, refE2M1(F32ToE2M1(y)))
		}
	}
	return vals, sf
}

// natural returns the doubled codes of act in natural value order.
func natural(act []fp4Act) []int8 {
	out := make([]int8, 64*len(act))
	for b := range act {
		for p := 0; p < 64; p++ {
			out[64*b+nibbleOrder[p]] = act[b].q[p]
		}
	}
	return out
}

func TestQuantizeActFP4(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name  string
		input float32 // the weight's input scale, 0: dynamic
		scale float64 // of the values
	}{
		{"dynamic", 0, 1},
		{"dynamic-tiny", 0, 1e-30},
		{"dynamic-huge", 0, 1e30},
		{"static", 3.0 / 2688, 1},
		{"static-overflow", 0.5 / 2688, 1}, // values beyond the calibrated amax saturate
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 256)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * tc.scale)
			}
			for i := 16; i < 32; i++ {
				x[i] = 0 // an all-zero sub-block: scale 0, codes 0
			}
			act := make([]fp4Act, len(x)/64)
			invG := quantizeActFP4(act, x, tc.input)
			is := tc.input
			if is == 0 {
				var amax float32
				for _, v := range x {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				is = amax / 2688
			}
			g := 1 / is
			if want := 1 / g; invG != want {
				t.Fatalf("1/G = %g, want %g", invG, want)
			}
			vals, sf := refActFP4(x, g)
			q := natural(act)
			for i := range x {
				if float64(q[i]) != 2*vals[i] {
					t.Fatalf("value %d (%g): doubled code %d, reference E2M1 %g", i, x[i], q[i], vals[i])
				}
				s := i / 16
				if a := act[s/4].d; a[2*(s%4)] != sf[s]/4 || a[2*(s%4)+1] != sf[s]/4 {
					t.Fatalf("sub-block %d: lane factors %g %g, reference SF/4 %g", s, a[2*(s%4)], a[2*(s%4)+1], sf[s]/4)
				}
				// Error bound: half the largest E2M1 step (1, between 4
				// and 6) in units of SF/G, or the clamp at 6 when SF
				// rounded down (at most 6*(1/(1-2^-4)) - 6 < 1) unless the
				// static scale saturated the block scale.
				if tc.name != "static-overflow" {
					deq := vals[i] * float64(sf[s]) * float64(invG)
					if e := math.Abs(float64(x[i]) - deq); e > float64(sf[s])*float64(invG)*(1+1e-6) {
						t.Fatalf("value %d: %g comes back as %g (SF/G %g)", i, x[i], deq, float64(sf[s])*float64(invG))
					}
				}
			}
		})
	}
	// All zeros: no scale at all, everything 0.
	act := make([]fp4Act, 1)
	act[0].q[3], act[0].d[1] = 5, 7
	if invG := quantizeActFP4(act, make([]float32, 64), 0); invG != 0 || act[0] != (fp4Act{}) {
		t.Errorf("zero vector: 1/G %g, block %+v", invG, act[0])
	}
}

// refDotFP4 is the W4A4 dot product from the definitions: for every value
// its lane (derived here from the block_nvfp4 layout: the value's code
// byte j (0..31) and nibble, position 32*nibble + j, lane position/4),
// integer sums of doubled products per lane, each times w*SF/4 added to its
// F32 lane in block order, then lanes k and k+8 added and hsum8. It also
// returns the float64 sum of the same dequantized values and the sum of
// the magnitudes of the terms.
func refDotFP4(row []byte, act []fp4Act) (bits float32, exact, mag float64) {
	q := natural(act)
	var lanes [16]float32
	for b := 0; b < len(row)/36; b++ {
		blk := row[36*b : 36*b+36]
		var isum [16]int32
		var dl [16]float32
		for v := 0; v < 64; v++ { // value v of the block
			sub, k := v/16, v%16
			byteIdx := 8*sub + k%8
			nib := k / 8
			code := blk[4+byteIdx] & 15
			if nib == 1 {
				code = blk[4+byteIdx] >> 4
			}
			lane := (32*nib + byteIdx) / 4
			xq := q[64*b+v]
			isum[lane] += int32(nvI8[code]) * int32(xq)
			sf4 := act[b].d[2*sub] // SF/4 of the sub-block
			d := float32(refE4M3(blk[sub]&0x7F)) * sf4
			if blk[sub]&0x7F == 0x7F {
				d = 0
			}
			dl[lane] = d
			// weight E2M1*w times activation (xq/2)*SF, with w*SF = 4d
			term := refE2M1(code) * float64(xq) / 2 * 4 * float64(d)
			exact += term
			mag += math.Abs(term)
		}
		for l := range lanes {
			lanes[l] += dl[l] * float32(isum[l])
		}
	}
	var h [8]float32
	for l := range h {
		h[l] = lanes[l] + lanes[l+8]
	}
	return hsum8(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]), exact, mag
}

// TestDotNVFP4FP4 checks the kernel bit for bit against refDotFP4 and,
// with the bound of F32 accumulation (every term exact, one add per block
// and lane, then four more), against the float64 sum of the same values.
func TestDotNVFP4FP4(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, cols := range []int{64, 128, 1024, 4096} {
		m := randNVFP4(rng, 9, cols)
		rb := cols / 64 * 36
		// Edge inputs in row 0: largest and NaN scale codes, every code.
		for i := 0; i < rb; i++ {
			if i%36 < 4 {
				m.Data[i] = []byte{0x7E, 0x7F, 0x01, 0x00}[i%4]
			} else {
				m.Data[i] = byte(i * 37)
			}
		}
		for r := 0; r < m.Rows; r++ {
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Exp(rng.Float64()*4-2))
			}
			act := make([]fp4Act, cols/64)
			quantizeActFP4(act, x, 0)
			row := m.Data[r*rb : (r+1)*rb]
			got := dotNVFP4FP4(row, act)
			want, exact, mag := refDotFP4(row, act)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("cols %d row %d: %g, reference %g", cols, r, got, want)
			}
			bound := float64(cols/64+4) * 0x1p-24 * mag
			if e := math.Abs(float64(got) - exact); e > bound {
				t.Fatalf("cols %d row %d: %g is %g from the float64 %g (bound %g)", cols, r, got, e, exact, bound)
			}
		}
	}
}

// TestNVFP4MatMulFP4: W4A4 through the Pool, MatMul equal to MatVec bit for
// bit, equal to the kernel times 1/G, static input scale honoured.
func TestNVFP4MatMulFP4(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const rows, cols, n = 21, 192, 3
	m := randNVFP4(rng, rows, cols)
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	p := NewPool(2)
	defer p.Close()
	p.SetNVFP4Activations(NVFP4ActFP4)
	for _, is := range []float32{0, 4.0 / 2688} {
		m.InputScale = is
		all := make([]float32, n*rows)
		p.MatMul(all, m, x, n)
		for v := 0; v < n; v++ {
			xv := x[v*cols : (v+1)*cols]
			one := make([]float32, rows)
			p.MatVec(one, m, xv)
			act := make([]fp4Act, cols/64)
			invG := quantizeActFP4(act, xv, is)
			for r := 0; r < rows; r++ {
				want := dotNVFP4FP4(m.Data[r*cols/64*36:(r+1)*cols/64*36], act) * invG
				if one[r] != want || all[v*rows+r] != want {
					t.Fatalf("input scale %g, vector %d row %d: MatVec %g, MatMul %g, kernel %g", is, v, r, one[r], all[v*rows+r], want)
				}
			}
		}
	}
}
