package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The matrix products and embedding lookups against the CPU engine. The
// activation converters must give the CPU's bits: the test has its own
// twins of engine/tensor's unexported quantizers (mmRefQ8, mmRefFP4),
// checks them against the CPU through probe products that expose every
// converted value exactly, then checks the GPU's scratch against them.
// The products themselves sum in another order than the CPU, and are
// checked with a bound derived below (mmBound).

// mmBuffer makes a device buffer holding data from byte off (room for at
// least size bytes after it), and fills the rest with NaN bits so that
// values a shader forgets to write show.
func mmBuffer(t testing.TB, d *Device, off int64, data []byte, size int64) *Buffer {
	t.Helper()
	size = max(size, int64(len(data)))
	b, err := d.NewBuffer(off + size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	fill := make([]byte, off+size)
	for i := 0; i+4 <= len(fill); i += 4 {
		binary.LittleEndian.PutUint32(fill[i:], 0x7fc00001)
	}
	copy(fill[off:], data)
	if err := d.Upload(b.All(), fill); err != nil {
		t.Fatal(err)
	}
	return b
}

func mmDownload(t testing.TB, d *Device, b *Buffer, off, n int64) []byte {
	t.Helper()
	out := make([]byte, n)
	if err := d.Download(b.Slice(off, n), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// mmMatrix quantizes rows*cols random values (normal, with a scale that
// changes every 32 columns) to typ, as a file would hold them.
func mmMatrix(t testing.TB, rng *rand.Rand, typ tensor.DType, rows, cols int) tensor.Matrix {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int64(rows)*rb)
	src := make([]float32, cols)
	for r := 0; r < rows; r++ {
		scale := 1.0
		for c := range src {
			if c%32 == 0 {
				scale = math.Exp(rng.NormFloat64())
			}
			src[c] = float32(rng.NormFloat64() * scale)
		}
		if err := tensor.QuantizeRow(typ, data[int64(r)*rb:int64(r+1)*rb], src); err != nil {
			t.Fatal(err)
		}
	}
	m, err := tensor.NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mmVectors is n random activation vectors, with a magnitude that changes
// every 16 values over six decades.
func mmVectors(rng *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	scale := 1.0
	for i := range x {
		if i%16 == 0 {
			scale = math.Pow(10, 3*rng.Float64()-1.5)
		}
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// mmGPU runs MatMul on the device with x, dst and scratch at byte offset
// pad of their buffers, and returns dst and the scratch.
func mmGPU(t testing.TB, d *Device, w *Matrix, x []float32, n int, act tensor.NVFP4Activations, pad int64) ([]float32, []byte) {
	t.Helper()
	sBytes := MatMulScratchBytes(w, n, act)
	dBytes := 4 * int64(n) * int64(w.Rows)
	xb := mmBuffer(t, d, pad, f32Bytes(x), 0)
	db := mmBuffer(t, d, pad, nil, dBytes)
	sb := mmBuffer(t, d, pad, nil, sBytes)
	r := d.Begin()
	r.MatMul(db.Slice(pad, dBytes), w, xb.Slice(pad, 4*int64(len(x))), n, act, sb.Slice(pad, sBytes))
	r.Barrier()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, n*w.Rows)
	copy(y, bytesF32(mmDownload(t, d, db, pad, dBytes)))
	return y, mmDownload(t, d, sb, pad, sBytes)
}

// mmCPU is the CPU engine's product.
func mmCPU(m tensor.Matrix, x []float32, n int, act tensor.NVFP4Activations) []float32 {
	p := tensor.NewPool(2)
	defer p.Close()
	p.SetNVFP4Activations(act)
	y := make([]float32, n*m.Rows)
	p.MatMul(y, m, x, n)
	return y
}

// mmRefQ8 is engine/tensor's quantizeActQ8_0 (quant.go) for every block of
// x with the given flavour (0 reference, 1 x86, 2 NEON; mmQ8Flavor): the
// quants and the scale d after its trip through F16.
func mmRefQ8(x []float32, flavor uint32) ([]int8, []float32) {
	q := make([]int8, len(x))
	d := make([]float32, len(x)/32)
	for b := range d {
		src := x[32*b : 32*b+32]
		var amax float32
		for _, v := range src {
			if a := float32(math.Abs(float64(v))); !(amax > a) {
				amax = a
			}
		}
		dv := amax / 127
		var id float32
		if flavor == 1 {
			if amax != 0 {
				id = 127 / amax
			}
		} else if dv != 0 {
			id = 1 / dv
		}
		d[b] = tensor.F16ToF32(tensor.F32ToF16(dv))
		for j, v := range src {
			r := float64(v * id)
			if flavor == 0 {
				r = math.Round(r)
			} else {
				r = math.RoundToEven(r)
			}
			if r == r {
				q[32*b+j] = int8(int32(r))
			}
		}
	}
	return q, d
}

// mmRefFP4 is engine/tensor's quantizeActFP4 (nvfp4a4.go) for one vector,
// in value order: the doubled E2M1 codes, SF/4 per 16 values, and 1/G.
func mmRefFP4(x []float32, inputScale float32) ([]int8, []float32, float32) {
	q := make([]int8, len(x))
	sf4 := make([]float32, len(x)/16)
	is := inputScale
	if !(is > 0) {
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		is = amax / (6 * 448)
	}
	if !(is > 0) || math.IsInf(float64(is), 0) {
		return q, sf4, 0
	}
	g := 1 / is
	if math.IsInf(float64(g), 0) {
		return q, sf4, 0
	}
	invG := 1 / g
	for s := range sf4 {
		xs := x[16*s : 16*s+16]
		var vmax float32
		for _, v := range xs {
			vmax = max(vmax, float32(math.Abs(float64(v))))
		}
		c := tensor.F32ToUE4M3(min(g*(vmax*float32(1.0/6)), 448))
		var sf, o float32
		if c != 0x7f {
			sf = tensor.UE4M3ToF32(c)
		}
		if sf != 0 {
			o = 1 / (sf * invG)
		}
		sf4[s] = sf / 4
		for i, v := range xs {
			q[16*s+i] = int8(2 * tensor.E2M1ToF32(tensor.F32ToE2M1(min(max(v*o, -6), 6))))
		}
	}
	return q, sf4, invG
}

// mmQ8Probe is a cols x cols Q8_0 matrix whose row j picks value j: scale
// 1 and quant 1 there, zeros elsewhere. Its product with a vector is the
// vector's Q8_0 activations dequantized, q*d, exactly: one nonzero term,
// whatever the order of the sum.
func mmQ8Probe(cols int) tensor.Matrix {
	nb := cols / 32
	data := make([]byte, cols*nb*34)
	for j := 0; j < cols; j++ {
		blk := data[(j*nb+j/32)*34:]
		binary.LittleEndian.PutUint16(blk, 0x3c00)
		blk[2+j%32] = 1
	}
	m, _ := tensor.NewMatrix(tensor.Q8_0, cols, cols, data)
	return m
}

// mmFP4Probe is mmQ8Probe for NVFP4: row j has scale 1 (UE4M3 0x38) on the
// sub-block of value j and E2M1 1.0 (code 2) at j, so that a W4A4 product
// gives (SF/4 * 2*code) * (1/G) with one rounding, at the end.
func mmFP4Probe(cols int, inputScale float32) tensor.Matrix {
	nb := cols / 64
	data := make([]byte, cols*nb*36)
	for j := 0; j < cols; j++ {
		blk := data[(j*nb+j/64)*36:]
		s, i := (j%64)/16, j%16
		blk[s] = 0x38
		blk[4+8*s+i%8] = 2 << (4 * (i / 8))
	}
	m, _ := tensor.NewMatrix(tensor.NVFP4, cols, cols, data)
	m.InputScale = inputScale
	return m
}

// mmQ8Inputs is n vectors of cols values whose blocks of 32 go through the
// quantizer's corners: halves after scaling (amax 127 and 63.5 make id 1
// and 2), blocks of zeros and of equal values, scales whose F16 is
// subnormal or zero, and random blocks over twelve decades. huge adds
// blocks whose scale overflows F16.
func mmQ8Inputs(rng *rand.Rand, n, cols int, huge bool) []float32 {
	x := make([]float32, n*cols)
	for b := 0; b < len(x)/32; b++ {
		blk := x[32*b : 32*b+32]
		kind := b % 9
		if huge && kind == 8 {
			kind = 9
		}
		switch kind {
		case 0, 1: // ties: k+0.5 at id 1, k/2+0.25 at id 2
			amax := float32(127)
			if kind == 1 {
				amax = 63.5
			}
			blk[0] = amax
			for j := 1; j < 32; j++ {
				v := float32(rng.IntN(254)-127) + 0.5
				if kind == 1 {
					v /= 2
				}
				blk[j] = v
			}
			if rng.IntN(2) == 0 {
				blk[0] = -amax
			}
		case 2: // zeros
		case 3: // all equal
			v := float32(rng.NormFloat64())
			for j := range blk {
				blk[j] = v
			}
		case 4: // d = 2^-20, an F16 subnormal
			for j := range blk {
				blk[j] = float32(rng.NormFloat64()) * 0x1p-20 * 40
			}
			blk[rng.IntN(32)] = 127 * 0x1p-20
		case 5: // d rounds to 0 in F16; the quants do not
			for j := range blk {
				blk[j] = float32(rng.NormFloat64() * 1e-30)
			}
		case 9: // d overflows F16
			for j := range blk {
				blk[j] = float32(rng.NormFloat64() * 1e30)
			}
		default:
			scale := math.Pow(10, 12*rng.Float64()-6)
			for j := range blk {
				blk[j] = float32(rng.NormFloat64() * scale)
			}
		}
	}
	return x
}

// mmQuantQ8 runs quant_q8_0 with a given flavour and returns the quants and
// scales it writes.
func mmQuantQ8(t *testing.T, d *Device, x []float32, flavor uint32) ([]int8, []float32) {
	t.Helper()
	blocks := len(x) / 32
	xb := mmBuffer(t, d, 0, f32Bytes(x), 0)
	sb := mmBuffer(t, d, 0, nil, int64(len(x)+4*blocks))
	r := d.Begin()
	r.Dispatch("quant_q8_0", []uint32{mmConvWG, flavor}, Groups((blocks+mmConvWG-1)/mmConvWG),
		[]uint32{uint32(blocks), 0, 0, uint32(len(x) / 4)}, xb.All(), sb.All(), sb.All())
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	return mmSplitQ8(mmDownload(t, d, sb, 0, int64(len(x)+4*blocks)), len(x))
}

// mmSplitQ8 reads a Q8_0 scratch of vals activations: the int8 quants,
// then a scale per block.
func mmSplitQ8(s []byte, vals int) ([]int8, []float32) {
	q := make([]int8, vals)
	for i := range q {
		q[i] = int8(s[i])
	}
	d := append([]float32(nil), bytesF32(s[vals:vals+vals/8])...)
	return q, d
}

// mmSameQ8 compares two quantizations bit for bit.
func mmSameQ8(t *testing.T, what string, q []int8, d []float32, wq []int8, wd []float32) {
	t.Helper()
	for b := range wd {
		if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
			t.Fatalf("%s: block %d scale %g (%#x), want %g (%#x)", what, b, d[b], math.Float32bits(d[b]), wd[b], math.Float32bits(wd[b]))
		}
		for j := 32 * b; j < 32*b+32; j++ {
			if q[j] != wq[j] {
				t.Fatalf("%s: block %d quant %d = %d, want %d", what, b, j%32, q[j], wq[j])
			}
		}
	}
}

func TestMatMulQ8Activations(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n, cols = 3, 288

	// The test's twin against the CPU: the probe product shows q*d of
	// every value as the CPU's MatMul quantizes it on this machine...
	x := mmQ8Inputs(rng, n, cols, false)
	probe := mmCPU(mmQ8Probe(cols), x, n, tensor.NVFP4ActQ8)
	q, dd := mmRefQ8(x, mmQ8Flavor())
	for i, got := range probe {
		if want := float32(q[i]) * dd[i/32]; got != want {
			t.Fatalf("twin of the CPU's Q8_0 quantizer (flavour %d): value %d (%g) gives %g, the CPU %g", mmQ8Flavor(), i, x[i], want, got)
		}
	}
	// ...and the reference flavour is what tensor.QuantizeRow writes.
	row := make([]byte, n*cols/32*34)
	if err := tensor.QuantizeRow(tensor.Q8_0, row, x); err != nil {
		t.Fatal(err)
	}
	rq, rd := mmRefQ8(x, 0)
	for b := range rd {
		if got := tensor.F16ToF32(binary.LittleEndian.Uint16(row[34*b:])); math.Float32bits(got) != math.Float32bits(rd[b]) {
			t.Fatalf("twin of quantize_row_q8_0_ref: block %d scale %g, QuantizeRow %g", b, rd[b], got)
		}
		for j := 0; j < 32; j++ {
			if int8(row[34*b+2+j]) != rq[32*b+j] {
				t.Fatalf("twin of quantize_row_q8_0_ref: block %d quant %d = %d, QuantizeRow %d", b, j, rq[32*b+j], int8(row[34*b+2+j]))
			}
		}
	}

	// The GPU against the twin, every flavour, F16 overflow included.
	x = mmQ8Inputs(rng, n, cols, true)
	for flavor := uint32(0); flavor < 3; flavor++ {
		gq, gd := mmQuantQ8(t, d, x, flavor)
		wq, wd := mmRefQ8(x, flavor)
		mmSameQ8(t, fmt.Sprintf("quant_q8_0 flavour %d", flavor), gq, gd, wq, wd)
	}
	// And what MatMul leaves in its scratch, for both weight types that
	// take Q8_0 activations.
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.NVFP4} {
		w, err := d.UploadMatrix("w", mmMatrix(t, rng, typ, 3, 576))
		if err != nil {
			t.Fatal(err)
		}
		x := mmQ8Inputs(rng, 2, 576, false)
		_, s := mmGPU(t, d, w, x, 2, tensor.NVFP4ActQ8, 4)
		gq, gd := mmSplitQ8(s, len(x))
		wq, wd := mmRefQ8(x, mmQ8Flavor())
		mmSameQ8(t, "MatMul "+typ.String()+" scratch", gq, gd, wq, wd)
		w.Free()
	}
}

// mmFP4Inputs is a set of W4A4 activation vectors of cols values with the
// input scale each is quantized with (0: its own).
func mmFP4Inputs(rng *rand.Rand, cols int) (x [][]float32, inputScale []float32) {
	add := func(v []float32, is float32) { x, inputScale = append(x, v), append(inputScale, is) }
	for _, scale := range []float64{1, 1e-30, 1e30, 3e-3} {
		v := mmVectors(rng, 1, cols)
		for i := range v {
			v[i] *= float32(scale)
		}
		clear(v[16:32]) // a sub-block of zeros
		add(v, 0)
	}
	v := mmVectors(rng, 1, cols)
	var amax float32
	for _, f := range v {
		amax = max(amax, float32(math.Abs(float64(f))))
	}
	add(v, amax/(6*448)*0.3) // calibrated too low: scales saturate at 448, codes at ±6
	add(mmVectors(rng, 1, cols), amax/(6*448)*5)
	add(make([]float32, cols), 0)           // zeros without an input scale: all 0
	for _, at := range []int{0, cols - 1} { // the amax first and last
		v := mmVectors(rng, 1, cols)
		v[at] = 1e4
		add(v, 0)
	}
	// Ties of E2M1 rounding: G = 1 and vmax = 6 make SF = 1 and o = 1.
	ties := make([]float32, cols)
	points := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 0.1, 0.3, 2.9}
	for i := range ties {
		ties[i] = points[rng.IntN(len(points))]
		if rng.IntN(2) == 0 {
			ties[i] = -ties[i]
		}
		if i%16 == 0 {
			ties[i] = 6
		}
	}
	add(ties, 1)
	return x, inputScale
}

func TestMatMulFP4Activations(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const cols = 256
	xs, scales := mmFP4Inputs(rng, cols)
	w, err := d.UploadMatrix("w", mmMatrix(t, rng, tensor.NVFP4, 5, cols))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	for k, x := range xs {
		is := scales[k]
		q, sf4, invG := mmRefFP4(x, is)
		// The twin against the CPU, through the probe product.
		probe := mmCPU(mmFP4Probe(cols, is), x, 1, tensor.NVFP4ActFP4)
		for i, got := range probe {
			want := float32(float32(sf4[i/16]*float32(2*int32(q[i]))) * invG)
			if math.Float32bits(got) != math.Float32bits(want) && got != want {
				t.Fatalf("vector %d: twin of the CPU's W4A4 quantizer: value %d (%g) gives %g, the CPU %g", k, i, x[i], want, got)
			}
		}
		// The GPU's scratch against the twin.
		w.InputScale = is
		_, s := mmGPU(t, d, w, x, 1, tensor.NVFP4ActFP4, 12)
		for i := range q {
			if int8(s[i]) != q[i] {
				t.Fatalf("vector %d: quant_nvfp4 value %d (%g): code %d, want %d", k, i, x[i], int8(s[i]), q[i])
			}
		}
		gs := bytesF32(s[cols:])
		for j := range sf4 {
			if math.Float32bits(gs[j]) != math.Float32bits(sf4[j]) {
				t.Fatalf("vector %d: quant_nvfp4 sub-block %d: SF/4 %g, want %g", k, j, gs[j], sf4[j])
			}
		}
		if g := gs[len(sf4)]; math.Float32bits(g) != math.Float32bits(invG) {
			t.Fatalf("vector %d: quant_nvfp4 1/G %g, want %g", k, g, invG)
		}
	}
}

func TestMatMulHalfActivations(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(5, 6))
	// Random bits cover every exponent, NaN and Inf included; then the
	// corners of F16 (ties, subnormals, overflow) and of BF16.
	x := make([]float32, 4096)
	for i := range x {
		x[i] = math.Float32frombits(rng.Uint32())
	}
	special := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x477fefff, 0x477ff000, 0x477fe000,
		0x38800000, 0x387fffff, 0x33000000, 0x33000001, 0x32ffffff, 0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x7f7fffff}
	for i, b := range special {
		x[i] = math.Float32frombits(b)
	}
	for i := len(special); i < 1024; i++ { // F16's range, ties included
		x[i] = math.Float32frombits(0x33000000 + rng.Uint32N(0x477ff000-0x33000000)&^0xfff | uint32(rng.IntN(2))<<12)
	}
	for _, typ := range []tensor.DType{tensor.F16, tensor.BF16} {
		w, err := d.UploadMatrix("w", mmMatrix(t, rng, typ, 1, 512))
		if err != nil {
			t.Fatal(err)
		}
		_, s := mmGPU(t, d, w, x, len(x)/512, tensor.NVFP4ActQ8, 8)
		w.Free()
		got := bytesF32(s)
		for i, v := range x {
			want := tensor.RoundF16(v)
			if typ == tensor.BF16 {
				want = tensor.BF16ToF32(tensor.F32ToBF16(v))
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%s rounding of %g (%#x): %#x, want %#x", typ, v, math.Float32bits(v), math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
}

// mmSeen is the activations as the product with m multiplies them, from
// the test's twins (checked above), for the error bound.
func mmSeen(m tensor.Matrix, x []float32, n int, act tensor.NVFP4Activations) []float64 {
	out := make([]float64, len(x))
	switch {
	case m.Type == tensor.F16 || m.Type == tensor.BF16:
		for i, v := range x {
			if m.Type == tensor.F16 {
				out[i] = float64(tensor.RoundF16(v))
			} else {
				out[i] = float64(tensor.BF16ToF32(tensor.F32ToBF16(v)))
			}
		}
	case m.Type == tensor.Q8_0 || m.Type == tensor.NVFP4 && act == tensor.NVFP4ActQ8:
		q, d := mmRefQ8(x, mmQ8Flavor())
		for i := range x {
			out[i] = float64(q[i]) * float64(d[i/32])
		}
	case m.Type == tensor.NVFP4 && act == tensor.NVFP4ActFP4:
		for v := 0; v < n; v++ {
			q, sf4, invG := mmRefFP4(x[v*m.Cols:(v+1)*m.Cols], m.InputScale)
			for i := range q {
				out[v*m.Cols+i] = float64(q[i]) * 2 * float64(sf4[i/16]) * float64(invG)
			}
		}
	default:
		for i, v := range x {
			out[i] = float64(v)
		}
	}
	return out
}

// mmBound is how far apart the GPU's and the CPU's results for one row and
// vector may be. Both add the same terms t_i (products of a weight and a
// converted activation, exact or rounded once) in F32, in different orders.
// A sum whose longest chain of roundings has k of them is within
// k*2^-24*sum|t_i| of the exact sum (the classic bound for recursive
// summation, Higham, Accuracy and Stability of Numerical Algorithms, 4.2),
// so the two results are within (k_CPU + k_GPU)*2^-24*sum|t_i|:
//   - the CPU's lanes (engine/tensor/kernels.go) take at most cols/8 steps
//     for float weights, 2*cols/64 for NVFP4 W4A8, cols/16 (one per
//     sub-block) for W4A16 plus the 8-term sub-block sums, and fewer for Q8_0
//     and W4A4; then 3 adds for the lanes, and up to two roundings of the
//     scales and one of W4A4's final 1/G: at most cols/8 + 16;
//   - the GPU's invocations take ceil(units/mmTPR) steps (units of 4 to 16
//     values), each adding a unit sum of at most 16 terms (17 roundings
//     with the products and the scale) or an exact integer sum scaled with
//     two roundings, then log2(mmTPR) = 5 adds in the tree and W4A4's 1/G:
//     at most cols/(4*mmTPR) + 24.
//
// cols/4 + 48 covers both with room to spare, and stays far below what any
// real error does: one term of the 64..512 computed wrong moves the result
// by about sum|t_i|/cols, 100 or more times the bound. (An activation quant
// off by one moves it far less: the converters' bit-exact tests above are
// there for that.)
// mmCheck holds each GPU result (got, n vectors of x times cpuM's rows) to
// the CPU's within bound(cols, Σ|w·x|) and gives the largest difference as a
// share of its bound; wrow is a row's scratch.
func mmCheck(t *testing.T, name string, cpuM tensor.Matrix, wrow []float32, x, got []float32, n int,
	act tensor.NVFP4Activations, bound func(cols int, abs float64) float64) (worst float64) {
	t.Helper()
	rows, cols := cpuM.Rows, cpuM.Cols
	want := mmCPU(cpuM, x, n, act)
	seen := mmSeen(cpuM, x, n, act)
	rowBytes := len(cpuM.Data) / rows
	for r := 0; r < rows; r++ {
		if err := tensor.DequantizeRow(cpuM.Type, wrow, cpuM.Data[r*rowBytes:(r+1)*rowBytes]); err != nil {
			t.Fatal(err)
		}
		for v := 0; v < n; v++ {
			var abs float64
			for i, wv := range wrow {
				abs += math.Abs(float64(wv) * seen[v*cols+i])
			}
			g, e := got[v*rows+r], want[v*rows+r]
			b := bound(cols, abs)
			worst = max(worst, math.Abs(float64(g)-float64(e))/b)
			if !(math.Abs(float64(g)-float64(e)) <= b) {
				t.Fatalf("%s: row %d vector %d: GPU %g, CPU %g: off by %g, bound %g", name, r, v, g, e, math.Abs(float64(g)-float64(e)), b)
			}
		}
	}
	return worst
}

func mmBound(cols int, abs float64) float64 {
	return float64(cols/4+48)*0x1p-24*abs*1.01 + 1e-37
}

func TestMatMul(t *testing.T) {
	// The scalar shaders, whatever auto picks on this device (the
	// cooperative-matrix ones: TestMatMulCoopMat).
	d := testDevice(t)
	if err := d.SetMatMul(MatMulScalar); err != nil {
		t.Fatal(err)
	}
	defer d.SetMatMul(MatMulAuto)
	rng := rand.New(rand.NewPCG(7, 8))
	type shape struct{ rows, cols int }
	cases := []struct {
		typ    tensor.DType
		act    tensor.NVFP4Activations
		shapes []shape
	}{
		{tensor.F32, 0, []shape{{7, 64}, {33, 37}, {2, 512}}},
		{tensor.F16, 0, []shape{{7, 64}, {33, 100}, {5, 512}}},
		{tensor.BF16, 0, []shape{{9, 256}, {3, 37}}},
		{tensor.Q8_0, 0, []shape{{1, 64}, {33, 256}, {7, 512}}},
		{tensor.NVFP4, tensor.NVFP4ActQ8, []shape{{7, 64}, {33, 512}}},
		{tensor.NVFP4, tensor.NVFP4ActF32, []shape{{7, 64}, {33, 512}}},
		{tensor.NVFP4, tensor.NVFP4ActFP4, []shape{{7, 64}, {33, 512}}},
	}
	run := 0
	for _, c := range cases {
		for _, sh := range c.shapes {
			cpuM := mmMatrix(t, rng, c.typ, sh.rows, sh.cols)
			if c.act == tensor.NVFP4ActFP4 && sh.rows == 33 {
				cpuM.InputScale = 0.002 // calibrated; the others scale each vector
			}
			w, err := d.UploadMatrix("w", cpuM)
			if err != nil {
				t.Fatal(err)
			}
			wrow := make([]float32, sh.cols)
			for _, n := range []int{1, 2, 3, 8, 17} {
				name := fmt.Sprintf("%s act %d %dx%d n=%d", c.typ, c.act, sh.rows, sh.cols, n)
				x := mmVectors(rng, n, sh.cols)
				pad := int64(4 * (run % 3)) // offsets of 0, 1, 2 words: vec4 loads or not
				run++
				got, _ := mmGPU(t, d, w, x, n, c.act, pad)
				mmCheck(t, name, cpuM, wrow, x, got, n, c.act, mmBound)
				// A vector's result does not depend on the others in its batch.
				if n > 1 {
					for _, v := range []int{0, n - 1} {
						one, _ := mmGPU(t, d, w, x[v*sh.cols:(v+1)*sh.cols], 1, c.act, pad)
						for r := range one {
							if math.Float32bits(one[r]) != math.Float32bits(got[v*sh.rows+r]) {
								t.Fatalf("%s: row %d vector %d: %g alone, %g in the batch", name, r, v, one[r], got[v*sh.rows+r])
							}
						}
					}
				}
			}
			w.Free()
		}
	}
}

func TestMatMulErrors(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(9, 10))
	q8, err := d.UploadMatrix("q8", mmMatrix(t, rng, tensor.Q8_0, 4, 64))
	if err != nil {
		t.Fatal(err)
	}
	defer q8.Free()
	q4data := make([]byte, 4*2*17) // MXFP4: a type no shader runs
	q4m, _ := tensor.NewMatrix(tensor.MXFP4, 4, 64, q4data)
	q4, err := d.UploadMatrix("q4", q4m)
	if err != nil {
		t.Fatal(err)
	}
	defer q4.Free()
	buf := mmBuffer(t, d, 0, nil, 4096)
	other := mmBuffer(t, d, 0, nil, 4096)
	for _, tc := range []struct {
		name, want string
		rec        func(r *Recorder)
	}{
		{"type", "MXFP4", func(r *Recorder) { r.MatMul(buf.Slice(0, 32), q4, other.Slice(0, 512), 2, 0, buf.Slice(1024, 1024)) }},
		{"short x", "x needs 512 bytes", func(r *Recorder) { r.MatMul(buf.Slice(0, 32), q8, other.Slice(0, 256), 2, 0, buf.Slice(1024, 1024)) }},
		{"short dst", "dst needs 32 bytes", func(r *Recorder) { r.MatMul(buf.Slice(0, 16), q8, other.Slice(0, 512), 2, 0, buf.Slice(1024, 1024)) }},
		{"short scratch", "scratch needs 144 bytes", func(r *Recorder) { r.MatMul(buf.Slice(0, 32), q8, other.Slice(0, 512), 2, 0, buf.Slice(1024, 100)) }},
		{"unaligned", "not a multiple of 4", func(r *Recorder) { r.MatMul(buf.Slice(2, 32), q8, other.Slice(0, 512), 2, 0, buf.Slice(1024, 1024)) }},
		{"overlap", "overlap", func(r *Recorder) { r.MatMul(buf.Slice(0, 32), q8, other.Slice(0, 512), 2, 0, buf.Slice(16, 1024)) }},
		{"activations", "NVFP4 activations 7", func(r *Recorder) {
			r.MatMul(buf.Slice(0, 32), &Matrix{Type: tensor.NVFP4, Rows: 4, Cols: 64, RowBytes: 36, Buf: q8.Buf}, other.Slice(0, 512), 2, 7, buf.Slice(1024, 1024))
		}},
		{"bad shape", "bad shape", func(r *Recorder) {
			r.MatMul(buf.Slice(0, 32), &Matrix{Type: tensor.Q8_0, Rows: 4, Cols: 48, RowBytes: 51, Buf: q8.Buf}, other.Slice(0, 512), 2, 0, buf.Slice(1024, 1024))
		}},
		{"rows type", "MXFP4", func(r *Recorder) { r.GetRows(buf.Slice(0, 512), q4, other.Slice(0, 8), 2) }},
		{"rows short ids", "ids needs 8 bytes", func(r *Recorder) { r.GetRows(buf.Slice(0, 512), q8, other.Slice(0, 4), 2) }},
		{"rows short dst", "dst needs 512 bytes", func(r *Recorder) { r.GetRows(buf.Slice(0, 256), q8, other.Slice(0, 8), 2) }},
	} {
		r := d.Begin()
		tc.rec(r)
		r.Dispatch("fill_f32", nil, Groups(1), []uint32{1, 0}, buf.All()) // recording stops after an error
		if n := r.Dispatches; n != 0 {
			t.Errorf("%s: %d dispatches recorded after the error", tc.name, n)
		}
		if _, err := r.Submit(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func TestGetRows(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.NVFP4} {
		for _, cols := range []int{64, 320} {
			const rows = 37
			cpuM := mmMatrix(t, rng, typ, rows, cols)
			if typ == tensor.F16 { // subnormals, Inf and NaN decode too
				for i, b := range []uint16{0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e01, 0x0400} {
					binary.LittleEndian.PutUint16(cpuM.Data[2*i:], b)
				}
			}
			checkGetRows(t, d, &cpuM, []int32{0, 36, 5, 5, 17, -1, 37, 1 << 30, 2})
		}
	}
}

// checkGetRows gathers ids' rows of cpuM (an id out of range gives a zero
// row) on the GPU and holds them to the CPU's decoding, bit for bit.
func checkGetRows(t *testing.T, d *Device, cpuM *tensor.Matrix, ids []int32) {
	t.Helper()
	rows, cols := cpuM.Rows, cpuM.Cols
	m, err := d.UploadMatrix("embd", *cpuM)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	n := len(ids)
	const pad = 12
	ib := mmBuffer(t, d, pad, i32Bytes(ids), 0)
	db := mmBuffer(t, d, pad, nil, int64(4*n*cols))
	r := d.Begin()
	r.GetRows(db.Slice(pad, int64(4*n*cols)), m, ib.Slice(pad, int64(4*n)), n)
	r.Barrier()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(mmDownload(t, d, db, pad, int64(4*n*cols)))
	want := make([]float32, cols)
	for i, id := range ids {
		if id >= 0 && int(id) < rows {
			cpuM.RowTo(want, int(id))
		} else {
			clear(want)
		}
		for c, w := range want {
			if g := got[i*cols+c]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("%s %dx%d: row %d (id %d) value %d: %g (%#x), want %g (%#x)", cpuM.Type, rows, cols, i, id, c, g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}

// BenchmarkMatVecGPU times one matrix-vector product (the decode step's
// unit of work) of a 4096x4096 matrix on the device, by the GPU time of
// the command buffer (the activation conversion included), and reports
// the weight bytes read per second.
func BenchmarkMatVecGPU(b *testing.B) {
	d := testDevice(b)
	rng := rand.New(rand.NewPCG(13, 14))
	const rows, cols = 4096, 4096
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.F16, tensor.NVFP4} {
		b.Run(typ.String(), func(b *testing.B) {
			cpuM := mmMatrix(b, rng, typ, rows, cols)
			w, err := d.UploadMatrix("w", cpuM)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Free()
			x := mmVectors(rng, 1, cols)
			xb := mmBuffer(b, d, 0, f32Bytes(x), 0)
			db := mmBuffer(b, d, 0, nil, 4*rows)
			sb := mmBuffer(b, d, 0, nil, MatMulScratchBytes(w, 1, tensor.NVFP4ActQ8))
			var gpu float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := d.Begin()
				r.MatMul(db.All(), w, xb.All(), 1, tensor.NVFP4ActQ8, sb.All())
				s, err := r.Submit()
				if err != nil {
					b.Fatal(err)
				}
				gpu += s
			}
			per := gpu / float64(b.N)
			b.ReportMetric(per*1e6, "µs/product")
			b.ReportMetric(float64(len(cpuM.Data))/per/1e9, "GB/s")
		})
	}
}
