package gpu

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The K-quant and legacy block types against the CPU engine: the
// activation quantizers bit for bit (Q8_K, Q8_1; Q8_0 is
// TestMatMulQ8Activations'), the embedding rows bit for bit, and the
// products within a bound derived from their arithmetic (kqBound).

// kqTypeList is every block type of op_matmul_kquant.go.
var kqTypeList = []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.Q2_K, tensor.Q3_K, tensor.IQ4_XS,
	tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.IQ4_NL}

// kqHalves is where each type keeps its F16 fields (scales, minimums),
// in bytes from the block's start.
var kqHalves = map[tensor.DType][]int{
	tensor.Q4_K: {0, 2}, tensor.Q5_K: {0, 2}, tensor.Q6_K: {208}, tensor.Q2_K: {80, 82}, tensor.Q3_K: {108},
	tensor.IQ4_XS: {0}, tensor.Q4_0: {0}, tensor.Q4_1: {0, 2}, tensor.Q5_0: {0}, tensor.Q5_1: {0, 2}, tensor.IQ4_NL: {0},
}

// kqQuants is the byte range of each type's quant bits (qs, and qh where
// there is one) in types with minimums: zeroed, the block decodes to its
// minimums alone.
var kqQuants = map[tensor.DType][2]int{
	tensor.Q4_K: {16, 144}, tensor.Q5_K: {16, 176}, tensor.Q2_K: {16, 80}, tensor.Q4_1: {4, 20}, tensor.Q5_1: {4, 24},
}

// kqMatrix is rows x cols random blocks of typ: random bytes for the
// quants and sub-block scales, F16 scales and minimums of random sign over
// a few decades, and with extreme the F16 corners too: subnormal, zero,
// the largest finite.
func kqMatrix(t testing.TB, rng *rand.Rand, typ tensor.DType, rows, cols int, extreme bool) tensor.Matrix {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int64(rows)*rb)
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, len(data)); j++ {
			data[j] = byte(v)
			v >>= 8
		}
	}
	bb := typ.BlockBytes()
	for b := 0; b < len(data)/bb; b++ {
		for k, at := range kqHalves[typ] {
			v := float32(math.Exp(rng.NormFloat64()) * 0.01)
			if k > 0 || rng.IntN(4) == 0 {
				v = -v
			}
			h := tensor.F32ToF16(v)
			if extreme {
				switch rng.IntN(8) {
				case 0:
					h = uint16(1 + rng.IntN(0x3ff)) // subnormal
				case 1:
					h = 0
				case 2:
					h = 0x7bff // 65504
				}
			}
			binary.LittleEndian.PutUint16(data[b*bb+at:], h)
		}
	}
	m, err := tensor.NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// kqRefQ8K is engine/tensor's quantizeQ8K (ggml's quantize_row_q8_K_ref):
// the quants and the F32 scale of every 256 values.
func kqRefQ8K(x []float32) ([]int8, []float32) {
	q := make([]int8, len(x))
	d := make([]float32, len(x)/256)
	for b := range d {
		src := x[256*b : 256*b+256]
		var mx, amax float32
		for _, v := range src {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		for j, v := range src {
			f := float32(iscale * v)
			r := int32(math.Float32bits(f+12582912)&0x7fffff) - 0x400000
			q[256*b+j] = int8(min(127, r))
		}
		d[b] = 1 / iscale
	}
	return q, d
}

// kqRefQ8_1 is engine/tensor's quantizeQ8_1: the Q8_0 quants and scales
// of the x86 flavour, and s = F16(amax/127*Σq) per block.
func kqRefQ8_1(x []float32) ([]int8, []float32, []float32) {
	q, d := mmRefQ8(x, 1)
	s := make([]float32, len(d))
	for b := range s {
		var amax float32
		var sum int32
		for j, v := range x[32*b : 32*b+32] {
			if a := float32(math.Abs(float64(v))); !(amax > a) {
				amax = a
			}
			sum += int32(q[32*b+j])
		}
		s[b] = tensor.F16ToF32(tensor.F32ToF16(amax / 127 * float32(sum)))
	}
	return q, d, s
}

// kqInputs is n vectors of cols values whose 256-value blocks go through
// the Q8_K quantizer's corners: ties (max -127 makes iscale 1, so k+0.5
// rounds to even), the largest magnitude negative or positive, twice
// (the first one counts) and of both signs, zeros, equal values, tiny and
// huge scales, and random blocks over twelve decades.
func kqInputs(rng *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	for b := 0; b < len(x)/256; b++ {
		blk := x[256*b : 256*b+256]
		switch b % 8 {
		case 0: // ties
			for j := range blk {
				blk[j] = float32(rng.IntN(252)-126) + 0.5
			}
			blk[rng.IntN(256)] = -127
		case 1: // the max twice, both signs: the first one's sign counts
			for j := range blk {
				blk[j] = float32(rng.NormFloat64())
			}
			i, k := rng.IntN(128), 128+rng.IntN(128)
			blk[i], blk[k] = 9, -9
			if rng.IntN(2) == 0 {
				blk[i], blk[k] = -9, 9
			}
		case 2: // zeros
		case 3: // all equal
			v := float32(rng.NormFloat64())
			for j := range blk {
				blk[j] = v
			}
		case 4: // tiny
			for j := range blk {
				blk[j] = float32(rng.NormFloat64() * 1e-30)
			}
		case 5: // huge
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

// kqProbe is a cols x cols matrix of typ whose row j picks value j of a
// vector (as mmQ8Probe): scale 1 on j's sub-block, integer weight 1 at j,
// 0 (Q4_K's minimum 0) elsewhere. The product is q_j*d exactly as the
// CPU quantized the vector: one nonzero term, one rounding.
func kqProbe(typ tensor.DType, cols int) tensor.Matrix {
	nb := cols / 256
	switch typ {
	case tensor.Q4_K:
		data := make([]byte, cols*nb*144)
		for j := 0; j < cols; j++ {
			blk := data[(j*nb+j/256)*144:]
			binary.LittleEndian.PutUint16(blk, 0x3c00)
			c := (j % 256) / 32 // sub-block c's scale 1: get_scale_min_k4's bits
			if c < 4 {
				blk[4+c] = 1
			} else {
				blk[4+c+4] = 1
			}
			l := j % 32
			blk[16+32*(c/2)+l] = byte(1) << (4 * (c % 2))
		}
		m, _ := tensor.NewMatrix(typ, cols, cols, data)
		return m
	}
	// Q4_1: d = 0 and minimum 1 on j's block: the product is s of that block.
	nb = cols / 32
	data := make([]byte, cols*nb*20)
	for j := 0; j < cols; j++ {
		blk := data[(j*nb+j/32)*20:]
		binary.LittleEndian.PutUint16(blk[2:], 0x3c00)
	}
	m, _ := tensor.NewMatrix(typ, cols, cols, data)
	return m
}

func TestMatMulQ8KActivations(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(35, 1))
	const n, cols = 2, 2048
	x := kqInputs(rng, n, cols)

	// The test's twin against the CPU, through the probe.
	q, dd := kqRefQ8K(x)
	probe := mmCPU(kqProbe(tensor.Q4_K, cols), x, n, 0)
	for i, got := range probe {
		if want := float32(q[i]) * dd[i/256]; math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("twin of the CPU's Q8_K quantizer: value %d (%g) gives %g, the CPU %g", i, x[i], want, got)
		}
	}
	// The GPU's scratch (quants, then a scale per 256) against the twin.
	w, err := d.UploadMatrix("w", kqMatrix(t, rng, tensor.Q6_K, 3, cols, false))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	_, s := mmGPU(t, d, w, x, n, 0, 8)
	gd := bytesF32(s[len(x):])
	for b := range dd {
		if math.Float32bits(gd[b]) != math.Float32bits(dd[b]) {
			t.Fatalf("quant_q8_k block %d: scale %g (%#x), want %g (%#x)", b, gd[b], math.Float32bits(gd[b]), dd[b], math.Float32bits(dd[b]))
		}
		for j := 256 * b; j < 256*b+256; j++ {
			if int8(s[j]) != q[j] {
				t.Fatalf("quant_q8_k block %d value %d (%g): quant %d, want %d", b, j%256, x[j], int8(s[j]), q[j])
			}
		}
	}
}

func TestMatMulQ8_1Activations(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(35, 2))
	const n, cols = 3, 288
	x := mmQ8Inputs(rng, n, cols, false)

	// The twin's s against the CPU's, through the probe (Q8_1's quants
	// and scales are quant_q8_0's x86 flavour, checked with it).
	q, dd, s := kqRefQ8_1(x)
	probe := mmCPU(kqProbe(tensor.Q4_1, cols), x, n, 0)
	for i, got := range probe {
		if want := s[i/32]; math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("twin of the CPU's Q8_1 sums: block %d gives %g, the CPU %g", i/32, want, got)
		}
	}
	// The GPU's scratch: quants, scales, sums.
	w, err := d.UploadMatrix("w", kqMatrix(t, rng, tensor.Q5_1, 3, cols, false))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	_, sc := mmGPU(t, d, w, x, n, 0, 4)
	gq, gd := mmSplitQ8(sc, len(x))
	mmSameQ8(t, "quant_q8_1", gq, gd, q, dd)
	gs := bytesF32(sc[len(x)+4*len(dd):])
	for b := range s {
		if math.Float32bits(gs[b]) != math.Float32bits(s[b]) {
			t.Fatalf("quant_q8_1 block %d: s %g (%#x), want %g (%#x)", b, gs[b], math.Float32bits(gs[b]), s[b], math.Float32bits(s[b]))
		}
	}
}

// kqSeen is the activations as the product with typ multiplies them (the
// twins of the CPU's quantizers, checked above), for the bound.
func kqSeen(typ tensor.DType, x []float32) []float64 {
	out := make([]float64, len(x))
	var q []int8
	var d []float32
	bs := 32
	switch typ {
	case tensor.Q4_0, tensor.Q5_0, tensor.IQ4_NL:
		q, d = mmRefQ8(x, mmQ8Flavor())
	case tensor.Q4_1, tensor.Q5_1:
		q, d, _ = kqRefQ8_1(x)
	default:
		q, d = kqRefQ8K(x)
		bs = 256
	}
	for i := range x {
		out[i] = float64(q[i]) * float64(d[i/bs])
	}
	return out
}

// kqBound is how far apart the GPU's and the CPU's results for one row
// and vector may be. Both make exact integer sums (of integer weights
// times activation quants, per 16 or 32 values, or per lane) and add them
// in F32 as terms (d_w*d_x)*sum in different orders and groupings; each
// term is rounded at most three times (the scale product, the sum's
// conversion, the product) and the additions chain at most cols/4 + 48
// roundings on either side (mmBound's count). The terms' magnitudes: a
// type without minimums multiplies integer weights whose scaled values
// are W itself, so every term is at most Σ|W·x| over its values; with
// minimums (W = d·s·w - dmin·m) the scaled-value terms are at most
// Σ(|W| + |min|)·|x| and the minimums' Σ|min·x|: abs = Σ|W·x| + 2Σ|min·x|
// (Q4_1 and Q5_1 add m·s, s the block's rounded Σq·d: the 1.01 covers
// its F16 rounding). So the bound is mmBound's with that abs.
func kqBound(cols int, abs float64) float64 { return mmBound(cols, abs) }

// kqCheck holds the GPU's products to the CPU's (kqBound).
func kqCheck(t *testing.T, name string, cpuM tensor.Matrix, x, got []float32, n int) {
	t.Helper()
	rows, cols := cpuM.Rows, cpuM.Cols
	want := mmCPU(cpuM, x, n, 0)
	seen := kqSeen(cpuM.Type, x)
	rb := len(cpuM.Data) / rows
	wrow, mrow := make([]float32, cols), make([]float32, cols)
	zero := make([]byte, rb)
	for r := 0; r < rows; r++ {
		row := cpuM.Data[r*rb : (r+1)*rb]
		if err := tensor.DequantizeRow(cpuM.Type, wrow, row); err != nil {
			t.Fatal(err)
		}
		clear(mrow)
		if span, ok := kqQuants[cpuM.Type]; ok {
			copy(zero, row)
			bb := cpuM.Type.BlockBytes()
			for b := 0; b < rb/bb; b++ {
				clear(zero[b*bb+span[0] : b*bb+span[1]])
			}
			if err := tensor.DequantizeRow(cpuM.Type, mrow, zero); err != nil {
				t.Fatal(err)
			}
		}
		for v := 0; v < n; v++ {
			var abs float64
			for i := range wrow {
				abs += math.Abs(float64(wrow[i])*seen[v*cols+i]) + 2*math.Abs(float64(mrow[i])*seen[v*cols+i])
			}
			g, e := got[v*rows+r], want[v*rows+r]
			if b := kqBound(cols, abs); !(math.Abs(float64(g)-float64(e)) <= b) {
				t.Fatalf("%s: row %d vector %d: GPU %g, CPU %g: off by %g, bound %g", name, r, v, g, e, math.Abs(float64(g)-float64(e)), b)
			}
		}
	}
}

func TestMatMulKQuant(t *testing.T) {
	d := testDevice(t)
	if err := d.SetMatMul(MatMulScalar); err != nil {
		t.Fatal(err)
	}
	defer d.SetMatMul(MatMulAuto)
	// Both K-quant shaders: matmul_kquant_dp where the device has packed
	// dot products, and matmul_kquant, which the others run.
	intDot := d.info.IntDot
	defer func() { d.info.IntDot = intDot }()
	for _, dot := range []bool{intDot, false} {
		d.info.IntDot = dot
		t.Run(fmt.Sprintf("intDot=%v", dot), func(t *testing.T) { kqMatMulTypes(t, d) })
		if !intDot {
			break
		}
	}
}

// kqMatMulTypes is TestMatMulKQuant for one choice of shaders.
func kqMatMulTypes(t *testing.T, d *Device) {
	rng := rand.New(rand.NewPCG(35, 3))
	run := 0
	for _, typ := range kqTypeList {
		be := typ.BlockElems()
		// Ragged row counts (a multiple of 8 or not: the CPU's repacked
		// arithmetic or vec_dot's), one block, odd and even block counts.
		shapes := [][2]int{{1, be}, {7, 3 * be}, {33, 2 * be}}
		if be == 32 {
			shapes = append(shapes, [2]int{16, 288})
		}
		for _, sh := range shapes {
			for _, extreme := range []bool{false, true} {
				cpuM := kqMatrix(t, rng, typ, sh[0], sh[1], extreme)
				w, err := d.UploadMatrix("w", cpuM)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{1, 2, 3, 8, 17} {
					name := fmt.Sprintf("%s %dx%d extreme=%v n=%d", typ, sh[0], sh[1], extreme, n)
					x := mmVectors(rng, n, sh[1])
					if extreme { // a block of zeros and one of tiny values
						clear(x[:be])
						if len(x) >= 3*be {
							for i := be; i < 2*be; i++ {
								x[i] *= 1e-30
							}
						}
					}
					pad := int64(4 * (run % 3))
					run++
					got, _ := mmGPU(t, d, w, x, n, 0, pad)
					kqCheck(t, name, cpuM, x, got, n)
					if n > 1 { // a vector's result does not depend on the others in its batch
						v := n - 1
						one, _ := mmGPU(t, d, w, x[v*sh[1]:(v+1)*sh[1]], 1, 0, pad)
						for r := range one {
							if math.Float32bits(one[r]) != math.Float32bits(got[v*sh[0]+r]) {
								t.Fatalf("%s: row %d vector %d: %g alone, %g in the batch", name, r, v, one[r], got[v*sh[0]+r])
							}
						}
					}
				}
				w.Free()
			}
		}
	}
}

// TestMatMulKQuantCoopMat: the block types on cooperative matrices
// (matmul_cm_kquant), with the driver's int8 tiles and NVIDIA's 16x16x32
// (through NV2's flexible dimensions; 32-deep tiles stage the activations
// twice for the types with a scale per 16 values), on ragged shapes: within
// kqBound of the CPU (the chunks' float terms added one after another:
// fewer roundings than matmul_kquant's), every multiply-add counted on the
// tensor cores, a vector's result the same bits alone and in its pass.
func TestMatMulKQuantCoopMat(t *testing.T) {
	// Every type's unpacking on the driver's tiles; the larger tiles (slow
	// on lavapipe) with one type of each kind: Q4_K (a scale per 32 values,
	// minimums; the legacy types' blocks take the same path), Q6_K (a
	// scale per 16: two sums per chunk).
	all := kqTypeList
	two := []tensor.DType{tensor.Q4_K, tensor.Q6_K}
	for _, tiles := range []struct {
		name    string
		f16, i8 tile
		types   []tensor.DType
	}{
		{"driver's tiles", tile{}, tile{}, all},
		{"16x16x16 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 16}, two},
		{"NVIDIA's 16x16x32 int8 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 32}, two},
	} {
		t.Run(tiles.name, func(t *testing.T) {
			d := coopDevice(t, tiles.f16, tiles.i8)
			rng := rand.New(rand.NewPCG(35, 6))
			for _, typ := range tiles.types {
				shapes := [][2]int{{17, 256}, {75, 512}}
				if typ.BlockElems() == 32 { // an odd block count
					shapes[0][1] = 288
				}
				for _, sh := range shapes {
					cpuM := kqMatrix(t, rng, typ, sh[0], sh[1], sh[0] == 17)
					w, err := d.UploadMatrix("w", cpuM)
					if err != nil {
						t.Fatal(err)
					}
					for _, n := range []int{3, 70} {
						name := fmt.Sprintf("%s %dx%d n=%d", typ, sh[0], sh[1], n)
						x := mmVectors(rng, n, sh[1])
						before := d.MatMulMACs()
						got, _ := mmGPU(t, d, w, x, n, 0, 4)
						if m := d.MatMulMACs(); m.CoopMat-before.CoopMat != int64(n*sh[0]*sh[1]) || m.Scalar != before.Scalar {
							t.Fatalf("%s: multiply-adds counted %+v -> %+v, want %d on the tensor cores", name, before, m, n*sh[0]*sh[1])
						}
						kqCheck(t, name, cpuM, x, got, n)
						if n > 1 {
							v := n - 1
							one, _ := mmGPU(t, d, w, x[v*sh[1]:(v+1)*sh[1]], 1, 0, 4)
							for r := range one {
								if math.Float32bits(one[r]) != math.Float32bits(got[v*sh[0]+r]) {
									t.Fatalf("%s: row %d vector %d: %g alone, %g in the pass", name, r, v, one[r], got[v*sh[0]+r])
								}
							}
						}
					}
					w.Free()
				}
			}
		})
	}
}

func TestGetRowsKQuant(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(35, 4))
	for _, typ := range kqTypeList {
		const rows = 37
		cols := 2 * typ.BlockElems()
		cpuM := kqMatrix(t, rng, typ, rows, cols, true)
		checkGetRows(t, d, &cpuM, []int32{0, 36, 5, 5, 17, -1, 37, 1 << 30, 2, 11})
	}
}

// kqFiles are llama.cpp's quantizations of stories260K and of the
// synthetic qwen35 file (testdata/kquant/README.md): between them every
// block type of op_matmul_kquant.go, mixed as llama-quantize mixes them.
var kqFiles = []string{"stories260K-Q4_K_M", "stories260K-Q5_K_M", "stories260K-Q6_K", "stories260K-Q3_K_M",
	"stories260K-Q4_0", "stories260K-IQ4_XS", "synth-kquant-Q4_K_M", "synth-kquant-Q5_K_M", "synth-kquant-Q6_K",
	"synth-kquant-Q3_K_M", "synth-kquant-Q2_K", "synth-kquant-Q4_0", "synth-kquant-IQ4_XS"}

// kqModelTol is the logit tolerance of a file, as a fraction of the
// largest |logit|, from the arithmetic as TestModelQwen35Synth's: the F16
// cache's whole-vector flips (four rounded vectors per attention layer,
// 2^-10 each: tolF16Cache's count) and the activations' per-block
// quantization (Q8_K, Q8_0 and Q8_1 alike: a step of 2^-7 of the block's
// largest value), whose flips in each of the file's matrix products add
// as a random walk, two standard deviations (tolBlockQuant's count with
// the file's own number of products).
func kqModelTol(h model.Hyper, products int) float64 {
	attn := h.Layers
	if len(h.Recurrent) > 0 {
		attn = 0
		for _, r := range h.Recurrent {
			if !r {
				attn++
			}
		}
	}
	return 4*float64(attn)*0x1p-10 + 2*math.Sqrt(float64(products))*0x1p-7
}

// TestModelKQuantFiles runs each file on the GPU beside the CPU engine:
// the logits of the CPU's greedy continuations within kqModelTol
// (forcedParity, which also holds the top token to the CPU's wherever the
// CPU's margin is more than twice that), and free greedy decoding from
// llama.cpp's golden prompts: identical tokens, or a divergence where the
// CPU's own top-1/top-2 margin is inside the tolerance (a near-tie, counted
// and logged), never at a clear winner.
func TestModelKQuantFiles(t *testing.T) {
	for _, name := range kqFiles {
		path := "../../testdata/kquant/" + name + ".gguf"
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		products := 0
		types := map[tensor.DType]bool{}
		for _, ti := range f.Tensors {
			if len(ti.Shape) >= 2 && ti.Shape[1] > 1 {
				products++
				types[ti.Type] = true
			}
		}
		f.Close()
		cpu, gm := loadPair(t, path, tensor.F16, tensor.NVFP4ActQ8)
		tol := kqModelTol(cpu.Hyper(), products)
		golden := readGolden(t, "../../testdata/kquant/golden-"+name+".jsonl")
		const n = 20
		prompts := [][]int32{}
		for _, g := range golden[:kqPrompts(t, len(golden))] {
			prompts = append(prompts, g.PromptTokens)
		}
		worst := forcedParity(t, name, cpu, gm, prompts, n, tol)
		V := cpu.Hyper().Vocab
		same, ties := 0, 0
		for _, p := range prompts {
			want := greedy(t, cpu, cpu.NewState(len(p)+n+1), p, n)
			got := greedy(t, gm, gm.NewState(len(p)+n+1), p, n)
			i := 0
			for i < n && got[i] == want[i] {
				i++
			}
			if i == n {
				same++
				continue
			}
			// The CPU's logits where the two parted.
			lg := make([]float32, V)
			st := cpu.NewState(len(p) + n + 1)
			if err := cpu.Forward(st, model.ChainBatch(append(append([]int32{}, p...), want[:i]...), 0, false), lg); err != nil {
				t.Fatal(err)
			}
			margin, bound, tie := nearTie(lg, tol)
			if !tie {
				t.Errorf("%s prompt %v: GPU token %d is %d, CPU %d, by a CPU margin of %.3g (near-tie bound %.3g)", name, p, i, got[i], want[i], margin, bound)
			}
			ties++
			t.Logf("%s prompt %v: a near-tie at token %d (CPU margin %.3g, bound %.3g): GPU %d, CPU %d", name, p, i, margin, bound, got[i], want[i])
		}
		t.Logf("%s (%d products, types %v): greedy tokens identical on %d/%d prompts, %d near-ties; largest |GPU-CPU| logit %.2g of the largest (tolerance %.2g)",
			name, products, slices.Sorted(maps.Keys(types)), same, len(prompts), ties, worst, tol)
	}
}

// nearTie is the rule by which a greedy token the GPU picks apart from
// the CPU engine's may be let pass: the CPU's own top-1/top-2 margin in
// its logits lg is within twice the model's logit tolerance tol (a
// fraction of the largest |logit|), the distance by which the two
// engines' top two logits may each move (forcedParity's rule). margin
// and bound are in logits; TestModelKQuantFiles and TestModelAgreement
// take it.
func nearTie(lg []float32, tol float64) (margin, bound float64, tie bool) {
	w := append([]float32(nil), lg...)
	slices.Sort(w)
	V := len(w)
	margin, scale := float64(w[V-1]-w[V-2]), math.Max(math.Abs(float64(w[V-1])), math.Abs(float64(w[0])))
	bound = 2 * tol * scale
	return margin, bound, margin <= bound
}

// kqPrompts is how many of a file's golden prompts TestModelKQuantFiles
// runs: 2 (the test's time on lavapipe), or EDGELLMD_KQUANT_PROMPTS (up to
// all of them) for the figures in docs/performance/kquants.md.
func kqPrompts(t *testing.T, have int) int {
	n := 2
	if s := os.Getenv("EDGELLMD_KQUANT_PROMPTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("EDGELLMD_KQUANT_PROMPTS=%q: want a count of prompts", s)
		}
		n = v
	}
	return min(n, have)
}

// BenchmarkMatMulKQuant times MatMul with the K-quant and legacy weights
// on the 27B model's FFN shapes (a small one on Vulkan-on-the-CPU
// devices), Q8_0 beside them, for one vector (a decode step), 16 (a
// verify pass), 64 and 512 (prefill chunks), by the GPU's timestamps (the
// activation quantization included): µs per product, GB/s of weights
// read, TFLOPS. The block types run on the scalar shaders on every path
// (no tile loaders yet); Q8_0 on the device's path.
//
//	go test ./engine/gpu -run '^$' -bench MatMulKQuant -benchtime 20x
func BenchmarkMatMulKQuant(b *testing.B) {
	d := testDevice(b)
	type shape struct {
		name       string
		rows, cols int
	}
	shapes := []shape{{"ffn_up_17408x5120", 17408, 5120}, {"ffn_down_5120x17408", 5120, 17408}}
	ns := []int{1, 16, 64, 512}
	if d.Info().Kind == KindCPU {
		shapes, ns = []shape{{"1024x1024", 1024, 1024}}, []int{1, 16}
	}
	rng := rand.New(rand.NewPCG(35, 5))
	for _, typ := range []tensor.DType{tensor.Q4_K, tensor.Q6_K, tensor.Q5_K, tensor.Q4_0, tensor.Q8_0, tensor.Q3_K, tensor.Q2_K, tensor.IQ4_XS, tensor.Q5_0, tensor.Q4_1} {
		for _, sh := range shapes {
			var cpuM tensor.Matrix
			if typ == tensor.Q8_0 {
				cpuM = mmMatrix(b, rng, typ, sh.rows, sh.cols)
			} else {
				cpuM = kqMatrix(b, rng, typ, sh.rows, sh.cols, false)
			}
			w, err := d.UploadMatrix("w", cpuM)
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range ns {
				x := mmVectors(rng, n, sh.cols)
				xb := mmBuffer(b, d, 0, f32Bytes(x), 0)
				dBytes := 4 * int64(n) * int64(sh.rows)
				db := mmBuffer(b, d, 0, nil, dBytes)
				sBytes := MatMulScratchBytes(w, n, 0)
				sb := mmBuffer(b, d, 0, nil, max(sBytes, 4))
				b.Run(fmt.Sprintf("%s/%s/n=%d", typ, sh.name, n), func(b *testing.B) {
					product := func() float64 {
						r := d.Begin()
						r.MatMul(db.Slice(0, dBytes), w, xb.Slice(0, 4*int64(len(x))), n, 0, sb.Slice(0, max(sBytes, 4)))
						s, err := r.Submit()
						if err != nil {
							b.Fatal(err)
						}
						return s
					}
					// The pipelines are built at the first dispatch; the
					// rest wakes the GPU's clocks, which drop while the
					// CPU makes the next matrix.
					for range 10 {
						product()
					}
					b.ResetTimer()
					var sec float64
					for i := 0; i < b.N; i++ {
						sec += product()
					}
					if sec > 0 {
						b.ReportMetric(sec/float64(b.N)*1e6, "µs/product")
						b.ReportMetric(float64(len(cpuM.Data))*float64(b.N)/sec/1e9, "weightGB/s")
						b.ReportMetric(2*float64(sh.rows)*float64(sh.cols)*float64(n)*float64(b.N)/sec/1e12, "TFLOPS")
					}
				})
			}
			w.Free()
		}
	}
}

// kqRandomFile rewrites the synthetic F16 or F32 file src as a Q4_K_M-like
// file for speed measurements (BenchmarkModel27B with
// EDGELLMD_BENCH_TYPE=Q4_K_M): every matrix whose rows are a multiple of
// 256 values becomes random blocks (kqMatrix), Q6_K where llama-quantize's
// Q4_K_M puts Q6_K (ffn_down, attn_v, the output head), Q4_K elsewhere; the
// rest is copied. Its outputs mean nothing (edgellmd quantize does not
// write K-quants), its shapes and bytes are a Q4_K_M file's.
func kqRandomFile(t testing.TB, src string) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		v := kv.Value
		if kv.Key == "general.file_type" {
			v = uint32(15) // LLAMA_FTYPE_MOSTLY_Q4_K_M
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(35, 7))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		typ, data := ti.Type, f.TensorData(ti)
		if len(ti.Shape) == 2 && ti.Shape[1] > 1 && ti.Shape[0]%256 == 0 && (typ == tensor.F16 || typ == tensor.F32 || typ == tensor.BF16) {
			typ = tensor.Q4_K
			if strings.Contains(ti.Name, "ffn_down") || strings.Contains(ti.Name, "attn_v") || ti.Name == "output.weight" {
				typ = tensor.Q6_K
			}
			data = kqMatrix(t, rng, typ, int(ti.Shape[1]), int(ti.Shape[0]), false).Data
		}
		if err := w.AddTensor(ti.Name, typ, ti.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	dst := src + ".q4_k_m.gguf"
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}
