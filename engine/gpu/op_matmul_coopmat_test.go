package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The cooperative-matrix products (matmul_cm_*.comp) against the CPU
// engine, with the tiles the driver lists (8×8×8 on lavapipe) and, through
// VK_NV_cooperative_matrix2's flexible dimensions, the 16×16×16 tiles
// NVIDIA GPUs list, on shapes that are no multiple of any tile.

// coopDevice is the test device switched to the cooperative-matrix path
// with tiles f16 and i8 (zero: the driver's own) for every row count; the
// cleanup puts the device back on auto.
func coopDevice(t *testing.T, f16, i8 tile) *Device {
	t.Helper()
	d := testDevice(t)
	if !d.Info().CoopMat {
		if requireCoopMat() {
			t.Fatalf("EDGELLMD_REQUIRE_COOPMAT=1 and %s has no cooperative matrices", d.Info().Name)
		}
		t.Skipf("%s has no cooperative matrices (Mesa 26 lavapipe has: make gpu-test-mesa26)", d.Info().Name)
	}
	t.Cleanup(func() {
		d.coopMin = mmCoopMinVectors
		if err := d.SetMatMul(MatMulAuto); err != nil {
			t.Error(err)
		}
	})
	if err := d.SetMatMul(MatMulCoopMat); err != nil {
		t.Fatal(err)
	}
	if f16 != (tile{}) {
		if err := d.setTiles(f16, i8); err != nil {
			if requireCoopMat() {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	d.coopMin = 1
	return d
}

// coopBound bounds |GPU-CPU| for a product of cols terms whose sum of
// |terms| is abs: the tile products' order is the driver's (a float32 sum
// of cols terms in any order, fused or not, is within cols·2^-24·abs of
// the exact sum; the Q8_0 path adds cols/32 block terms, each rounded
// twice), and the CPU's own order adds cols/4+48 roundings (mmBound).
func coopBound(cols int, abs float64) float64 {
	return float64(cols+cols/4+48)*0x1p-24*abs*1.01 + 1e-37
}

func TestMatMulCoopMat(t *testing.T) {
	for _, tiles := range []struct {
		name    string
		f16, i8 tile
	}{
		{"driver's tiles", tile{}, tile{}},
		{"16x16x16 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 16}},
		{"NVIDIA's 16x16x16 f16, 16x16x32 int8 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 32}},
	} {
		t.Run(tiles.name, func(t *testing.T) {
			d := coopDevice(t, tiles.f16, tiles.i8)
			t.Logf("%s: %s", d.Info().Name, d.CoopMatTiles())
			rng := rand.New(rand.NewPCG(31, 8))
			type shape struct{ rows, cols int }
			for _, c := range []struct {
				typ    tensor.DType
				act    tensor.NVFP4Activations
				shapes []shape
			}{
				{tensor.Q8_0, 0, []shape{{17, 64}, {255, 96}, {16, 32}, {3, 160}}},
				{tensor.F16, 0, []shape{{33, 37}, {16, 100}, {255, 64}, {1, 9}}},
				{tensor.NVFP4, tensor.NVFP4ActQ8, []shape{{17, 64}, {40, 192}, {3, 128}}},
				{tensor.NVFP4, tensor.NVFP4ActFP4, []shape{{17, 64}, {40, 192}, {3, 128}}},
			} {
				for _, sh := range c.shapes {
					cpuM := mmMatrix(t, rng, c.typ, sh.rows, sh.cols)
					w, err := d.UploadMatrix("w", cpuM)
					if err != nil {
						t.Fatal(err)
					}
					wrow := make([]float32, sh.cols)
					for _, n := range []int{1, 3, 16, 17, 255} {
						name := fmt.Sprintf("%s act %d %dx%d n=%d", c.typ, c.act, sh.rows, sh.cols, n)
						x := mmVectors(rng, n, sh.cols)
						before := d.MatMulMACs()
						got, _ := mmGPU(t, d, w, x, n, c.act, 0)
						if m := d.MatMulMACs(); m.CoopMat-before.CoopMat != int64(n*sh.rows*sh.cols) || m.Scalar != before.Scalar {
							t.Fatalf("%s: multiply-adds counted %+v -> %+v, want %d on the tensor cores", name, before, m, n*sh.rows*sh.cols)
						}
						worst := mmCheck(t, name, cpuM, wrow, x, got, n, c.act, coopBound)
						// A vector's result does not depend on the others in its batch.
						if n > 1 {
							v := n - 1
							one, _ := mmGPU(t, d, w, x[v*sh.cols:(v+1)*sh.cols], 1, c.act, 0)
							for r := range one {
								if math.Float32bits(one[r]) != math.Float32bits(got[v*sh.rows+r]) {
									t.Fatalf("%s: row %d vector %d: %g alone, %g in the batch", name, r, v, one[r], got[v*sh.rows+r])
								}
							}
						}
						if n == 255 {
							t.Logf("%s: largest |GPU-CPU| %.3f of the bound", name, worst)
						}
					}
					w.Free()
				}
			}
		})
	}
}

// skinnyDevice is coopDevice with passes below mmCoopMinVectors on the
// skinny shaders (matmul_cms_*.comp), every one of them (skinnyMin 1).
func skinnyDevice(t *testing.T, f16, i8 tile) *Device {
	t.Helper()
	d := coopDevice(t, f16, i8)
	d.coopMin, d.skinnyMin = mmCoopMinVectors, 1
	t.Cleanup(func() { d.skinnyMin = mmSkinnyMinVectors })
	return d
}

// TestMatMulSkinny holds the skinny cooperative-matrix products (decode
// steps, verify trees, a few sequences) to the CPU engine's on ragged
// shapes, with the driver's tiles and NVIDIA's (through NV2's flexible
// dimensions): within coopBound, every multiply-add counted on the tensor
// cores, a vector's result the same bits alone and in its pass (so that
// a decode step and a verify pass agree), and, with unit scales, the
// CPU's integer sums exactly.
func TestMatMulSkinny(t *testing.T) {
	for _, tiles := range []struct {
		name    string
		f16, i8 tile
		groups  int
	}{
		{"driver's tiles", tile{}, tile{}, mmSkinnyMinGroups},
		{"driver's tiles, 32 rows a workgroup", tile{}, tile{}, 0},
		{"NVIDIA's 16x16x16 f16, 16x16x32 int8 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 32}, mmSkinnyMinGroups},
	} {
		t.Run(tiles.name, func(t *testing.T) {
			d := skinnyDevice(t, tiles.f16, tiles.i8)
			d.skinnyGroups = tiles.groups
			defer func() { d.skinnyGroups = mmSkinnyMinGroups }()
			rng := rand.New(rand.NewPCG(31, 9))
			for _, c := range skinnyCases {
				for _, sh := range c.shapes {
					cpuM := mmMatrix(t, rng, c.typ, sh.rows, sh.cols)
					w, err := d.UploadMatrix("w", cpuM)
					if err != nil {
						t.Fatal(err)
					}
					wrow := make([]float32, sh.cols)
					var alone [][]float32 // each vector of the largest pass, multiplied alone
					ns := []int{1, 3, 16, 17, 40}
					x := mmVectors(rng, ns[len(ns)-1], sh.cols)
					for v := range ns[len(ns)-1] {
						one, _ := mmGPU(t, d, w, x[v*sh.cols:(v+1)*sh.cols], 1, c.act, 0)
						alone = append(alone, one)
					}
					for _, n := range ns {
						name := fmt.Sprintf("%s act %d %dx%d n=%d", c.typ, c.act, sh.rows, sh.cols, n)
						before := d.MatMulMACs()
						got, _ := mmGPU(t, d, w, x[:n*sh.cols], n, c.act, 0)
						if m := d.MatMulMACs(); m.CoopMat-before.CoopMat != int64(n*sh.rows*sh.cols) || m.Scalar != before.Scalar {
							t.Fatalf("%s: multiply-adds counted %+v -> %+v, want %d on the tensor cores", name, before, m, n*sh.rows*sh.cols)
						}
						worst := mmCheck(t, name, cpuM, wrow, x[:n*sh.cols], got, n, c.act, coopBound)
						for v := range n {
							for r := range sh.rows {
								if math.Float32bits(alone[v][r]) != math.Float32bits(got[v*sh.rows+r]) {
									t.Fatalf("%s: row %d vector %d: %g alone, %g in the pass", name, r, v, alone[v][r], got[v*sh.rows+r])
								}
							}
						}
						if n == 40 {
							t.Logf("%s: largest |GPU-CPU| %.3f of the bound", name, worst)
						}
					}
					w.Free()
				}
			}
			for _, sh := range []struct{ rows, cols, n int }{{17, 96, 5}, {40, 544, 16}, {3, 512, 33}} {
				q8Exact(t, d, rng, sh.rows, sh.cols, sh.n)
			}
		})
	}
}

// skinnyCases are the weight types with skinny shaders and ragged shapes
// for them: rows past a workgroup's 32, depth past a stage of 4 blocks.
var skinnyCases = []struct {
	typ    tensor.DType
	act    tensor.NVFP4Activations
	shapes []struct{ rows, cols int }
}{
	{tensor.Q8_0, 0, []struct{ rows, cols int }{{17, 64}, {75, 288}, {3, 160}}},
	{tensor.F16, 0, []struct{ rows, cols int }{{33, 37}, {40, 300}, {1, 9}}},
	{tensor.NVFP4, tensor.NVFP4ActQ8, []struct{ rows, cols int }{{17, 64}, {40, 320}}},
	{tensor.NVFP4, tensor.NVFP4ActFP4, []struct{ rows, cols int }{{17, 64}, {40, 320}}},
}

// TestMatMulCoopMatQ8Exact makes every float step of the Q8_0 product
// exact (weight and activation block scales of 1, integer sums below
// 2^24), so that the result is the integer sum itself: the tensor cores'
// int8 products must give the CPU's bits exactly, on ragged shapes.
func TestMatMulCoopMatQ8Exact(t *testing.T) {
	for _, tiles := range []struct {
		name    string
		f16, i8 tile
	}{
		{"driver's tiles", tile{}, tile{}},
		{"16x16x16 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 16}},
		{"NVIDIA's 16x16x16 f16, 16x16x32 int8 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 32}},
	} {
		t.Run(tiles.name, func(t *testing.T) {
			d := coopDevice(t, tiles.f16, tiles.i8)
			rng := rand.New(rand.NewPCG(5, 6))
			for _, sh := range []struct{ rows, cols, n int }{{17, 96, 5}, {40, 256, 33}, {3, 512, 255}} {
				q8Exact(t, d, rng, sh.rows, sh.cols, sh.n)
			}
		})
	}
}

// q8Exact multiplies a rows×cols Q8_0 matrix with unit block scales by n
// integer vectors with 127 in each block (so unit activation scales too)
// and wants the CPU's bits: the integer sums themselves.
func q8Exact(t *testing.T, d *Device, rng *rand.Rand, rows, cols, n int) {
	t.Helper()
	const blockBytes = 34
	nb := cols / 32
	data := make([]byte, rows*nb*blockBytes)
	for b := 0; b < rows*nb; b++ {
		binary.LittleEndian.PutUint16(data[b*blockBytes:], 0x3c00) // 1.0
		for i := 0; i < 32; i++ {
			data[b*blockBytes+2+i] = byte(int8(rng.IntN(255) - 127))
		}
	}
	cpuM, err := tensor.NewMatrix(tensor.Q8_0, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	// Integer activations with 127 somewhere in each block: the
	// block scale is 127/127 and the quants are the values.
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.IntN(255) - 127)
		if i%32 == 7 {
			x[i] = 127 * float32(1-2*rng.IntN(2))
		}
	}
	w, err := d.UploadMatrix("w", cpuM)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	got, _ := mmGPU(t, d, w, x, n, 0, 0)
	want := mmCPU(cpuM, x, n, 0)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) || want[i] != float32(int32(want[i])) {
			t.Fatalf("%dx%d n=%d: output %d: GPU %g, CPU %g: the integer sums differ", rows, cols, n, i, got[i], want[i])
		}
	}
}

func TestMatMulPath(t *testing.T) {
	d := testDevice(t)
	defer d.SetMatMul(MatMulAuto)
	if err := ParseMatMul("tensor"); err == nil {
		t.Error("ParseMatMul(tensor) accepted")
	}
	if err := d.SetMatMul(MatMulScalar); err != nil || d.MatMulPath() != MatMulScalar {
		t.Fatalf("SetMatMul(scalar) = %v, path %s", err, d.MatMulPath())
	}
	if err := d.SetMatMul(MatMulAuto); err != nil {
		t.Fatal(err)
	}
	want := MatMulScalar
	if d.Info().CoopMat {
		want = MatMulCoopMat
	}
	if d.MatMulPath() != want {
		t.Errorf("auto on %s (cooperative_matrix %v) picked %s, want %s", d.Info().Name, d.Info().CoopMat, d.MatMulPath(), want)
	}
	err := d.SetMatMul(MatMulCoopMat)
	if d.Info().CoopMat != (err == nil) {
		t.Errorf("SetMatMul(coopmat) on a device with cooperative_matrix %v: %v", d.Info().CoopMat, err)
	}
	t.Logf("auto: %s %s; coopmat: %v", want, d.CoopMatTiles(), err)
}

// BenchmarkMatMulPaths times MatMul on the 27B model's shapes (FFN up and
// down, and the 248,320-row output head in Q8_0; a small one on
// Vulkan-on-the-CPU devices) for one vector (a decode step), 4, 16 (a
// verify pass), 32 to 128, and 512 (a prefill chunk), on the scalar
// shaders and, where the device has cooperative matrices, on the skinny
// tile shaders (below 64 vectors, what coopmat runs there) and the 64×64
// tile shaders (16 vectors and more), by the GPU's timestamps (the
// activation conversion included): TFLOPS of the product and GB/s of
// weights read.
//
//	go test ./engine/gpu -run '^$' -bench MatMulPaths -benchtime 10x
func BenchmarkMatMulPaths(b *testing.B) {
	d := testDevice(b)
	type shape struct {
		name       string
		rows, cols int
		types      []tensor.DType
		ns         []int
	}
	all := []tensor.DType{tensor.Q8_0, tensor.F16, tensor.NVFP4}
	ns := []int{1, 4, 16, 32, 64, 128, 512}
	shapes := []shape{
		{"ffn_up_17408x5120", 17408, 5120, all, ns},
		{"ffn_down_5120x17408", 5120, 17408, all[:2], ns},
		{"output_248320x5120", 248320, 5120, all[:1], []int{1, 16}},
	}
	if d.Info().Kind == KindCPU {
		shapes = []shape{{"1024x1024", 1024, 1024, all, []int{1, 16, 64}}}
	}
	paths := []string{MatMulScalar}
	if d.Info().CoopMat {
		paths = append(paths, "skinny", "tiles")
	}
	defer func() {
		d.coopMin, d.skinnyMin = mmCoopMinVectors, mmSkinnyMinVectors
		d.SetMatMul(MatMulAuto)
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range shapes {
		for _, typ := range sh.types {
			cpuM := mmMatrix(b, rng, typ, sh.rows, sh.cols)
			w, err := d.UploadMatrix("w", cpuM)
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range sh.ns {
				x := mmVectors(rng, n, sh.cols)
				xb := mmBuffer(b, d, 0, f32Bytes(x), 0)
				dBytes := 4 * int64(n) * int64(sh.rows)
				db := mmBuffer(b, d, 0, nil, dBytes)
				sBytes := MatMulScratchBytes(w, n, tensor.NVFP4ActQ8)
				sb := mmBuffer(b, d, 0, nil, max(sBytes, 4))
				for _, path := range paths {
					if path == "skinny" && n >= mmCoopMinVectors || path == "tiles" && n < 16 {
						continue
					}
					b.Run(fmt.Sprintf("%s/%s/n=%d/%s", typ, sh.name, n, path), func(b *testing.B) {
						mm := MatMulCoopMat
						d.coopMin, d.skinnyMin = mmCoopMinVectors, 1
						switch path {
						case MatMulScalar:
							mm = MatMulScalar
						case "tiles":
							d.coopMin = 1
						}
						if err := d.SetMatMul(mm); err != nil {
							b.Fatal(err)
						}
						product := func() float64 {
							r := d.Begin()
							r.MatMul(db.Slice(0, dBytes), w, xb.Slice(0, 4*int64(len(x))), n, tensor.NVFP4ActQ8, sb.Slice(0, max(sBytes, 4)))
							s, err := r.Submit()
							if err != nil {
								b.Fatal(err)
							}
							return s
						}
						product() // the pipelines are built at the first dispatch
						b.ResetTimer()
						var sec float64
						for i := 0; i < b.N; i++ {
							sec += product()
						}
						if sec > 0 {
							b.ReportMetric(2*float64(sh.rows)*float64(sh.cols)*float64(n)*float64(b.N)/sec/1e12, "TFLOPS")
							b.ReportMetric(float64(sh.rows)*float64(w.RowBytes)*float64(b.N)/sec/1e9, "weightGB/s")
							b.ReportMetric(sec/float64(b.N)*1e6, "µs/product")
						}
					})
				}
				xb.Free()
				db.Free()
				sb.Free()
			}
			w.Free()
		}
	}
}

// TestMatMulQ8DotProduct holds matmul_q8_0_dp (packed int8 dot products,
// where the device has shaderIntegerDotProduct) and matmul_q8_0 to the
// CPU's products on ragged shapes (mmBound: the integer sums are exact in
// both; their float steps are the same, but a compiler may fuse them
// differently, so the bits may differ by a rounding).
func TestMatMulQ8DotProduct(t *testing.T) {
	d := testDevice(t)
	if !d.info.IntDot {
		t.Skipf("%s has no shaderIntegerDotProduct: matmul_q8_0_dp is not used there", d.Info().Name)
	}
	if err := d.SetMatMul(MatMulScalar); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.info.IntDot = true
		d.SetMatMul(MatMulAuto)
	}()
	rng := rand.New(rand.NewPCG(4, 8))
	for _, sh := range []struct{ rows, cols int }{{17, 64}, {75, 288}, {3, 160}} {
		cpuM := mmMatrix(t, rng, tensor.Q8_0, sh.rows, sh.cols)
		w, err := d.UploadMatrix("w", cpuM)
		if err != nil {
			t.Fatal(err)
		}
		wrow := make([]float32, sh.cols)
		for _, n := range []int{1, 3, 16} {
			x := mmVectors(rng, n, sh.cols)
			for _, dot := range []bool{true, false} {
				d.info.IntDot = dot
				got, _ := mmGPU(t, d, w, x, n, 0, 0)
				mmCheck(t, fmt.Sprintf("%dx%d n=%d dot %v", sh.rows, sh.cols, n, dot), cpuM, wrow, x, got, n, 0, mmBound)
			}
		}
		w.Free()
	}
}
