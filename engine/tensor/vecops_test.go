package tensor

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// ulpDiff is the distance in float32 steps between two finite values of the
// same sign.
func ulpDiff(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for n := 0; n < 40; n++ {
		a, b := randomRow(r, n, 1), randomRow(r, n, 1)
		var sum, abs float64
		for i := range a {
			sum += float64(a[i]) * float64(b[i])
			abs += math.Abs(float64(a[i]) * float64(b[i]))
		}
		got := Dot(a, b)
		if err := math.Abs(float64(got) - sum); err > float64((n+7)/8+3)*0x1p-24*abs {
			t.Fatalf("n=%d: Dot = %g, want %g", n, got, sum)
		}
		if got != ggmlDotF32(a, b) {
			t.Fatalf("n=%d: Dot differs from the matrix kernel", n)
		}
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	x, y := randomRow(r, 13, 1), randomRow(r, 13, 1)
	const a = float32(0.37)

	got := append([]float32(nil), y...)
	Axpy(got, a, x)
	for i := range got {
		if want := y[i] + float32(a*x[i]); got[i] != want {
			t.Fatalf("Axpy[%d] = %g, want %g", i, got[i], want)
		}
	}
	got = append(got[:0], y...)
	Scale(got, a)
	for i := range got {
		if want := y[i] * a; got[i] != want {
			t.Fatalf("Scale[%d] = %g, want %g", i, got[i], want)
		}
	}
	got = append(got[:0], y...)
	Add(got, x)
	for i := range got {
		if want := y[i] + x[i]; got[i] != want {
			t.Fatalf("Add[%d] = %g, want %g", i, got[i], want)
		}
	}
	got = append(got[:0], y...)
	Mul(got, x)
	for i := range got {
		if want := y[i] * x[i]; got[i] != want {
			t.Fatalf("Mul[%d] = %g, want %g", i, got[i], want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Add with different lengths did not panic")
		}
	}()
	Add(got, x[:3])
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{1, 7, 64, 1000} {
		x, w := randomRow(r, n, 2), randomRow(r, n, 1)
		const eps = 1e-6
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(n)+eps)
		for _, weight := range [][]float32{nil, w} {
			got := make([]float32, n)
			RMSNorm(got, x, weight, eps)
			for i := range got {
				want := float64(x[i]) * scale
				if weight != nil {
					want *= float64(weight[i])
				}
				if math.Abs(float64(got[i])-want) > 4*0x1p-24*math.Abs(want) {
					t.Fatalf("n=%d: RMSNorm[%d] = %g, want %g", n, i, got[i], want)
				}
			}
		}
		// In place gives the same.
		want := make([]float32, n)
		RMSNorm(want, x, w, eps)
		RMSNorm(x, x, w, eps)
		for i := range x {
			if x[i] != want[i] {
				t.Fatalf("in-place RMSNorm differs at %d", i)
			}
		}
	}
}

// exactFMA32 rounds a*b+c once, computed exactly with math/big.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFMA32(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, a, b, c float32) {
		got, want := fma32(a, b, c), exactFMA32(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	// Cases where the float64 sum lands exactly on a float32 midpoint while
	// the exact sum does not: a*b a midpoint of c's neighbours plus a tiny
	// term below float64 precision.
	one := float32(1)
	check(t, 1+0x1p-12, 1+0x1p-12, 0x1p-60) // plain
	check(t, 0x1p-24+0x1p-47, 1, one)       // exact midpoint above 1, nudged up
	check(t, 0x1p-24, 1+0x1p-23, one)       // product just above the midpoint
	check(t, -0x1p-25, 1+0x1p-23, one)      // just below 1
	check(t, 1+0x1p-23, 1+0x1p-23, -1)      // cancellation
	check(t, 0x1p-130, 0x1p-10, 0x1p-149)   // subnormal result
	check(t, 3*0x1p-76, 0x1p-75, 0)         // subnormal tie region
	rapid.Check(t, func(rt *rapid.T) {
		a := rapid.Float32().Draw(rt, "a")
		b := rapid.Float32().Draw(rt, "b")
		c := rapid.Float32().Draw(rt, "c")
		if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) || math.IsNaN(float64(c)) ||
			math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
			return
		}
		check(rt, a, b, c)
	})
	// Constructed double-rounding traps: c = 1, a*b = 2^-24 (half an ulp of
	// 1) plus or minus a term far below float64 precision.
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 10000; i++ {
		m := float32(1 + r.IntN(1<<20))
		a := m * 0x1p-20
		b := float32(0x1p-24) / a
		check(t, a, b, one)
		check(t, a, math.Nextafter32(b, 1), one)
		check(t, a, math.Nextafter32(b, 0), one)
		check(t, -a, b, one)
		check(t, -a, math.Nextafter32(b, 1), -one)
	}
}

func TestExpf32(t *testing.T) {
	// Accuracy: ggml documents 1.45 + 0.5 ulp; allow 2.
	for x := float32(-103); x < 88.7; x += 0.000731 {
		got := expf32(x)
		want := float32(math.Exp(float64(x)))
		if want < 0x1p-126 { // subnormal results: compare absolutely
			if math.Abs(float64(got)-float64(want)) > 2*0x1p-149 {
				t.Fatalf("expf32(%g) = %g, want %g", x, got, want)
			}
			continue
		}
		if d := ulpDiff(got, want); d > 2 {
			t.Fatalf("expf32(%g) = %g, want %g (%d ulp)", x, got, want, d)
		}
	}
	special := []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(-1)), 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
		{-200, 0}, {100, float32(math.Inf(1))}, {-1e30, 0}, {1e30, float32(math.Inf(1))},
	}
	for _, c := range special {
		if got := expf32(c.x); got != c.want {
			t.Errorf("expf32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
}

func TestSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 2, 9, 100} {
		x := randomRow(r, n, 5)
		if n > 2 {
			x[1] = float32(math.Inf(-1)) // a masked position
		}
		want := make([]float64, n)
		maxv := math.Inf(-1)
		for _, v := range x {
			maxv = math.Max(maxv, float64(v))
		}
		var sum float64
		for i, v := range x {
			want[i] = math.Exp(float64(v - float32(maxv))) // the difference is rounded to F32, as in ggml
			sum += want[i]
		}
		Softmax(x)
		var total float64
		for i := range x {
			want[i] /= sum
			total += float64(x[i])
			// expf's 2 ulp, the rounding of 1/sum and of the product
			if math.Abs(float64(x[i])-want[i]) > 4*0x1p-24*want[i]+1e-45 {
				t.Fatalf("n=%d: softmax[%d] = %g, want %g", n, i, x[i], want[i])
			}
		}
		if math.Abs(total-1) > 1e-5 {
			t.Fatalf("n=%d: softmax sums to %g", n, total)
		}
		if n > 2 && x[1] != 0 {
			t.Fatalf("masked position got %g", x[1])
		}
	}
}

func TestSiLU(t *testing.T) {
	var x []float32
	for v := float32(-88); v < 90; v += 0.0137 {
		x = append(x, v)
	}
	x = append(x, 0, float32(math.Inf(-1)), float32(math.Inf(1)), -89, -1e6)
	in := append([]float32(nil), x...)
	SiLU(x)
	for i, v := range in {
		want := float64(v) / (1 + math.Exp(-float64(v)))
		got := float64(x[i])
		switch {
		case math.IsInf(float64(v), -1):
			if !math.IsNaN(got) && got != 0 { // -Inf/Inf: ggml gives NaN too
				t.Errorf("SiLU(-Inf) = %g", got)
			}
		case v <= -89: // exp(89) overflows F32: ggml's expf gives Inf, so -0
			if got != 0 {
				t.Errorf("SiLU(%g) = %g, want -0", v, got)
			}
		case math.IsInf(float64(v), 1):
			if !math.IsInf(got, 1) {
				t.Errorf("SiLU(+Inf) = %g", got)
			}
		case math.Abs(got-want) > 4*0x1p-24*math.Abs(want)+1e-44:
			t.Fatalf("SiLU(%g) = %g, want %g", v, got, want)
		}
	}
}

// SiLU's AVX2 blocks (siluBlocks) give the bits of the one-value-at-a-time
// twin, for random values, the exp thresholds, signed zeros, subnormals
// and infinities, at every length (whole blocks and tails).
func TestSiLUBlocksMatchScalar(t *testing.T) {
	// siluTwin is SiLU in plain Go: the blocks of eight by siluScalar,
	// the rest with glibc's expf
	siluTwin := func(x []float32) {
		n := len(x) &^ 7
		siluScalar(x[:n])
		for i := n; i < len(x); i++ {
			x[i] = x[i] / (1 + Expf(-x[i]))
		}
	}
	rng := rand.New(rand.NewPCG(8, 9))
	var x []float32
	for _, v := range []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 88.7, -88.7, 89, -89, 103, -103,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32} {
		x = append(x, v)
	}
	for len(x) < 4096 {
		x = append(x, float32(rng.NormFloat64()*float64([]float32{1, 10, 100}[rng.IntN(3)])))
	}
	for n := 0; n <= 40; n++ {
		for _, in := range [][]float32{x[:n], x[len(x)-n:]} {
			got, want := append([]float32(nil), in...), append([]float32(nil), in...)
			SiLU(got)
			siluTwin(want)
			for i := range got {
				g, w := got[i], want[i]
				if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
					t.Fatalf("n=%d: SiLU(%g) = %g (%#08x), scalar twin %g (%#08x)", n, in[i], g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		}
	}
	got, want := append([]float32(nil), x...), append([]float32(nil), x...)
	SiLU(got)
	siluTwin(want)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("SiLU(%g) = %g, scalar twin %g", x[i], got[i], want[i])
		}
	}
}
