package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// What gemm_arm64.go says of SMMLA and BFMMLA, run on the CPU (under
// qemu-aarch64-static, -cpu max has both).

// SMMLA's outputs are sums of eight products, two of the twins' lanes at
// once. To give one lane each, half of every operand row must be zero:
// then one SMMLA gives two lanes of two vectors, four lane sums, as many
// as one SDOT, and the weights must first be masked into zero-padded
// halves and two vectors' activations interleaved.
func TestSMMLALanes(t *testing.T) {
	if !hasI8MM {
		t.Skip("CPU lacks I8MM")
	}
	r := rand.New(rand.NewPCG(61, 62))
	var w [32]int8    // a Q8_0 weight block's quants
	var x [2][32]int8 // the same block of two activation vectors
	// lane returns lane l of dotQ8 for vector v: quants 4l..4l+3.
	lane := func(v, l int) int32 {
		var s int32
		for k := 4 * l; k < 4*l+4; k++ {
			s += int32(w[k]) * int32(x[v][k])
		}
		return s
	}
	for rep := 0; rep < 200; rep++ {
		for k := range w {
			w[k] = int8(r.IntN(256) - 128)
			x[0][k], x[1][k] = int8(r.IntN(256)-128), int8(r.IntN(256)-128)
		}
		for g := 0; g < 4; g++ { // eight quants at a time
			var a, b [16]int8
			copy(a[:8], w[8*g:8*g+8])
			copy(a[8:], w[8*g:8*g+8])
			copy(b[:8], x[0][8*g:8*g+8])
			copy(b[8:], x[1][8*g:8*g+8])
			// As they come: each output merges lanes 2g and 2g+1.
			var c [4]int32
			smmlaOnce(&a, &b, &c)
			for i := 0; i < 2; i++ {
				for v := 0; v < 2; v++ {
					if want := lane(v, 2*g) + lane(v, 2*g+1); c[2*i+v] != want {
						t.Fatalf("SMMLA output (%d, %d) = %d, want lanes %d+%d = %d", i, v, c[2*i+v], 2*g, 2*g+1, want)
					}
				}
			}
			// Zero-padded weights: row 0 keeps quants 0-3, row 1 quants
			// 4-7; the outputs are lanes 2g and 2g+1 of both vectors.
			clear(a[4:12])
			c = [4]int32{}
			smmlaOnce(&a, &b, &c)
			for i := 0; i < 2; i++ {
				for v := 0; v < 2; v++ {
					if want := lane(v, 2*g+i); c[2*i+v] != want {
						t.Fatalf("padded SMMLA output (%d, %d) = %d, want lane %d = %d", i, v, c[2*i+v], 2*g+i, want)
					}
				}
			}
		}
	}
}

// BFMMLA (without FEAT_EBF16's FPCR.EBF, which Go leaves clear) rounds
// its additions to odd and flushes subnormals, so even with one product
// per output it is not dotBF16's lane step, acc + float32(w*x) rounded to
// nearest even.
func TestBFMMLARoundsToOdd(t *testing.T) {
	if !hasBF16 {
		t.Skip("CPU lacks BF16")
	}
	for _, c := range []struct {
		name      string
		acc, w, x float32
	}{
		{"1 + 2^-24", 1, 0x1p-24, 1},                    // a tie: even gives 1, odd 1+2^-23
		{"0 + 2^-130 (subnormal)", 0, 0x1p-65, 0x1p-65}, // exact in F32, flushed by BFMMLA
	} {
		w, x := F32ToBF16(c.w), F32ToBF16(c.x)
		if bf16(w) != c.w || bf16(x) != c.x {
			t.Fatalf("%s: inputs are not BF16 values", c.name)
		}
		var a, b [8]uint16
		a[0], b[0] = w, x
		out := [4]float32{c.acc, c.acc, c.acc, c.acc}
		bfmmlaOnce(&a, &b, &out)
		twin := c.acc + float32(bf16(w)*bf16(x))
		t.Logf("%s: BFMMLA %g (%#08x), dotBF16's step %g (%#08x)", c.name, out[0], math.Float32bits(out[0]), twin, math.Float32bits(twin))
		if math.Float32bits(out[0]) == math.Float32bits(twin) {
			t.Errorf("%s: BFMMLA gives dotBF16's bits %#08x: gemm_arm64.go's reason against it no longer holds", c.name, math.Float32bits(twin))
		}
	}
}
