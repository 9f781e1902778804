package gpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// attKVInputs is n values meant to hit every branch of the F16 and E4M3
// encoders: random bit patterns (NaNs, infinities, denormals included),
// values of every magnitude, F16 ties, and exact E4M3 midpoints times
// scale and their neighbours.
func attKVInputs(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch i % 6 {
		case 0:
			v[i] = math.Float32frombits(rng.Uint32())
		case 1:
			v[i] = float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(60)-40))
		case 2: // F16 ties: 11 significant bits and a half
			m := float64(rng.IntN(1<<11) | 1<<11)
			v[i] = float32(math.Ldexp(m+0.5, rng.IntN(50)-35))
		case 3, 4: // E4M3 midpoints (4 significant bits and a half), scaled, and next to them
			m := float64(rng.IntN(8)|8) + 0.5
			x := float32(math.Ldexp(m, rng.IntN(20)-15)) * scale
			switch rng.IntN(3) {
			case 1:
				x = math.Nextafter32(x, float32(math.Inf(1)))
			case 2:
				x = math.Nextafter32(x, 0)
			}
			if rng.IntN(2) == 0 {
				x = -x
			}
			v[i] = x
		case 5:
			v[i] = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
				448 * scale, 464 * scale, 480 * scale, -1e30, math.Float32frombits(1), 65504, 65520, 65519.99, 0x1p-25, 0x1p-24, 0x1.8p-25}[rng.IntN(16)]
		}
	}
	return v
}

// attKVEncode is the CPU engine's store of rows (engine/model attention.forward).
func attKVEncode(t tensor.DType, src []float32, dim int, scale float32) []byte {
	switch t {
	case tensor.F16:
		h := make([]uint16, len(src))
		for i, x := range src {
			h[i] = tensor.F32ToF16(x)
		}
		return append([]byte(nil), u16Bytes(h)...)
	case tensor.E4M3:
		b := make([]byte, len(src))
		for r := 0; r < len(src)/dim; r++ {
			tensor.EncodeE4M3Row(b[r*dim:(r+1)*dim], src[r*dim:(r+1)*dim], scale)
		}
		return b
	}
	return append([]byte(nil), f32Bytes(src)...)
}

func TestAttnStoreKV(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		kv             tensor.DType
		slots, first   int
		n, dim         int
		kScale, vScale float32
	}{
		{tensor.F32, 10, 3, 4, 64, 1, 1},
		{tensor.F16, 6, 0, 6, 4, 1, 1},
		{tensor.F16, 40, 7, 30, 256, 1, 1},
		{tensor.E4M3, 8, 2, 5, 64, 1, 1},
		{tensor.E4M3, 8, 0, 8, 128, 0.5, 3.7},
		{tensor.E4M3, 12, 5, 7, 256, 0.0173, 448},
		{tensor.E4M3, 4, 1, 3, 1024, 1e-40, 0x1p-126},
		{tensor.E4M3, 4, 1, 3, 1024, 1.2e4, 3e38},
	} {
		t.Run(fmt.Sprintf("%s/%d+%dx%d/%g,%g", c.kv, c.first, c.n, c.dim, c.kScale, c.vScale), func(t *testing.T) {
			_, size, _ := attKVType(c.kv)
			k := attKVInputs(rng, c.n*c.dim, c.kScale)
			v := attKVInputs(rng, c.n*c.dim, c.vScale)
			cacheBytes := int(int64(c.slots*c.dim) * size)
			// what the cache held before: bytes outside the new slots must stay
			oldK, oldV := make([]byte, cacheBytes), make([]byte, cacheBytes)
			for i := range oldK {
				oldK[i], oldV[i] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			gk, gv := ewUpload(t, d, oldK), ewUpload(t, d, oldV)
			gks, gvs := ewUploadF32(t, d, k), ewUploadF32(t, d, v)
			ewRun(t, d, func(r *Recorder) {
				r.StoreKV(gk, gv, c.kv, gks, gvs, c.first, c.n, c.dim, c.kScale, c.vScale)
			})
			at := int(int64(c.first*c.dim) * size)
			for _, x := range []struct {
				name  string
				g     Range
				old   []byte
				src   []float32
				scale float32
			}{{"K", gk, oldK, k, c.kScale}, {"V", gv, oldV, v, c.vScale}} {
				want := append([]byte(nil), x.old...)
				copy(want[at:], attKVEncode(c.kv, x.src, c.dim, x.scale))
				got := ewDownload(t, d, x.g)
				if bytes.Equal(got, want) {
					continue
				}
				bad := 0
				for i := range want {
					if got[i] != want[i] {
						if bad < 5 {
							e := (i - at) / int(size)
							in := float32(0)
							if e >= 0 && e < len(x.src) {
								in = x.src[e]
							}
							t.Errorf("%s byte %d (value %d, %g = %#08x) = %#02x, want %#02x", x.name, i, e, in, math.Float32bits(in), got[i], want[i])
						}
						bad++
					}
				}
				t.Errorf("%s: %d of %d bytes differ", x.name, bad, len(want))
			}
		})
	}
}

func TestAttnStoreKVErrors(t *testing.T) {
	d := testDevice(t)
	c := ewUpload(t, d, make([]byte, 64))
	x := ewUploadF32(t, d, make([]float32, 6))
	for _, f := range []func(r *Recorder){
		func(r *Recorder) { r.StoreKV(c, c, tensor.E4M3, x, x, 0, 1, 6, 1, 1) }, // 6 codes: not whole words
		func(r *Recorder) { r.StoreKV(c, c, tensor.E4M3, x, x, 0, 1, 4, 0, 1) }, // scale 0
		func(r *Recorder) { r.StoreKV(c, c, tensor.F16, x, x, 10, 1, 6, 1, 1) }, // past the cache
		func(r *Recorder) { r.StoreKV(c, c, tensor.Q8_0, x, x, 0, 1, 4, 1, 1) }, // not a KV type
	} {
		r := d.Begin()
		f(r)
		if _, err := r.Submit(); err == nil {
			t.Error("bad StoreKV: no error")
		} else {
			t.Log(err)
		}
	}
}
