package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/cpu"
)

// The AVX-512 VNNI kernels of vnni_amd64.s against their plain-Go twins,
// bit for bit. They run wherever the CPU has the features, whatever
// useVNNI says; where it lacks one, the test says which and that the
// kernels were not run.

// missingVNNI names the CPU features the VNNI kernels need and this CPU
// lacks ("" when it has them all).
func missingVNNI() string {
	var miss []string
	for _, f := range []struct {
		name string
		has  bool
	}{
		{"AVX2/FMA/F16C", useSIMD},
		{"AVX512F", cpu.X86.HasAVX512F},
		{"AVX512BW", cpu.X86.HasAVX512BW},
		{"AVX512VL", cpu.X86.HasAVX512VL},
		{"AVX512VNNI", cpu.X86.HasAVX512VNNI},
	} {
		if !f.has {
			miss = append(miss, f.name)
		}
	}
	return strings.Join(miss, ", ")
}

func requireVNNI(t *testing.T) {
	t.Helper()
	if m := missingVNNI(); m != "" {
		t.Skipf("CPU lacks %s: the AVX-512 VNNI kernels (q8VnniTile*, q8VnniVec4, nvVnniTile*, nvVnniVec4) were NOT run", m)
	}
}

// vnniActs makes n vectors of nb Q8_0 activation blocks: quants anywhere
// in -128..127 (all -128, or all ±127, for some reps), scales of any
// finite F16 value, zero or realistic.
func vnniActs(r *rand.Rand, n, nb, rep int) []q8Act {
	act := make([]q8Act, n*nb)
	for i := range act {
		for k := range act[i].q {
			switch {
			case rep%5 == 0:
				act[i].q[k] = -128
			case rep%5 == 1:
				act[i].q[k] = int8(127 - 254*r.IntN(2))
			default:
				act[i].q[k] = int8(r.IntN(256) - 128)
			}
		}
		act[i].d = float32(r.NormFloat64())
		switch {
		case rep%3 == 0:
			act[i].d = f16Table[finiteHalf(r, false)]
		case rep%7 == 3 && i%3 == 0:
			act[i].d = 0
		}
	}
	return act
}

// packAllVNNI packs n vectors of nb blocks as MatMul does.
func packAllVNNI(act []q8Act, n, nb int, nibble bool) []byte {
	packed := make([]byte, vnniSlots(n)*nb*vnniActBytes)
	for i := range packed {
		packed[i] = 0xA5 // padding must be cleared by the packer
	}
	for v := 0; v < n; v++ {
		packVNNI(packed, act[v*nb:(v+1)*nb], v, n, nibble)
	}
	return packed
}

// TestPackVNNI checks packVNNI's layout against its description, for
// every group size and padding: each vector's quants (in nibble order for
// W4A8), its corrections -128 * (the sum of each four of them), its scale
// (times 128 for W4A8), and zeros for the padding vectors of a group.
func TestPackVNNI(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, nibble := range []bool{false, true} {
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 19} {
			const nb = 3
			act := vnniActs(r, n, nb, n)
			packed := packAllVNNI(act, n, nb, nibble)
			for v := 0; v < vnniSlots(n); v++ {
				v0, s, used := vnniGroup(min(v, n-1), n)
				if v >= v0+s {
					t.Fatalf("n=%d: slot %d is outside its group [%d,%d)", n, v, v0, v0+s)
				}
				k := v - v0
				for b := 0; b < nb; b++ {
					blk := packed[(v0*nb+b*s)*vnniActBytes : (v0*nb+(b+1)*s)*vnniActBytes]
					var q [32]int8
					var d float32
					if k < used {
						a := act[v*nb+b]
						q, d = a.q, a.d
						if nibble {
							for i := 0; i < 8; i++ {
								q[i], q[8+i], q[16+i], q[24+i] = a.q[i], a.q[16+i], a.q[8+i], a.q[24+i]
							}
							d *= 128
						}
					}
					what := fmt.Sprintf("nibble=%v n=%d vector slot %d (group of %d at %d, %d used) block %d", nibble, n, v, s, v0, used, b)
					for i := range q {
						if got := int8(blk[32*k+i]); got != q[i] {
							t.Fatalf("%s: quant %d = %d, want %d", what, i, got, q[i])
						}
					}
					for j := 0; j < 8; j++ {
						want := -128 * (int32(q[4*j]) + int32(q[4*j+1]) + int32(q[4*j+2]) + int32(q[4*j+3]))
						if got := int32(binary.LittleEndian.Uint32(blk[32*s+32*k+4*j:])); got != want {
							t.Fatalf("%s: correction %d = %d, want %d", what, j, got, want)
						}
					}
					if got := math.Float32bits(math.Float32frombits(binary.LittleEndian.Uint32(blk[64*s+4*k:]))); got != math.Float32bits(d) {
						t.Fatalf("%s: scale bits %#x, want %#x", what, got, math.Float32bits(d))
					}
				}
			}
		}
	}
}

func TestVNNIQ8(t *testing.T) {
	requireVNNI(t)
	forTileWidths(t, testVNNIQ8)
}

// forTileWidths runs test with vnni_amd64.s's 512-bit tiles and with
// vnniymm_amd64.s's 256-bit ones (useVnniYmm), whichever the CPU would
// choose; the 256-bit ones also need AVX-512 VBMI.
func forTileWidths(t *testing.T, test func(t *testing.T)) {
	defer func(y bool) { useVnniYmm = y }(useVnniYmm)
	for _, ymm := range []bool{false, true} {
		useVnniYmm = ymm
		t.Run(fmt.Sprintf("ymm=%v", ymm), func(t *testing.T) {
			if ymm && !cpu.X86.HasAVX512VBMI {
				t.Skip("CPU lacks AVX512VBMI: the 256-bit tiles (q8YmmTile*, nvYmmTile*) were NOT run")
			}
			test(t)
		})
	}
}

func testVNNIQ8(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, nb := range []int{1, 2, 3, 8, 33, 128} {
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 19} {
			for rep := 0; rep < 10; rep++ {
				rows := []int{1, 2, 3, 4, 5, 6, 7, 9, 12, 19}[rep]
				lo := rep % 2 // row ranges that do not start at 0
				data, _ := q8Inputs(r, rows+lo, nb, rep)
				act := vnniActs(r, n, nb, rep+n)
				packed := packAllVNNI(act, n, nb, false)
				rb := nb * q8BlockBytes
				all := rows + lo
				got := make([]float32, n*all)
				gemmQ8VnniRows(got, data, rb, lo, all, all, packed, n)
				for v := 0; v < n; v++ {
					for i := lo; i < all; i++ {
						want := dotQ8(data[i*rb:(i+1)*rb], act[v*nb:(v+1)*nb])
						sameBitsOrFail(t, fmt.Sprintf("Q8_0 VNNI %d blocks, %d vectors, vector %d row %d of [%d,%d), rep %d", nb, n, v, i, lo, all, rep), got[v*all+i], want)
					}
				}
			}
		}
	}
}

func TestVNNINVFP4(t *testing.T) {
	requireVNNI(t)
	forTileWidths(t, testVNNINVFP4)
}

func testVNNINVFP4(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, nb := range []int{1, 2, 3, 7, 17, 64} {
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 19} {
			for rep := 0; rep < 10; rep++ {
				rows := []int{1, 2, 3, 4, 5, 6, 7, 9, 12, 19}[rep]
				lo := rep % 2
				all := rows + lo
				data := nvfp4EdgeRow(r, all*nb, rep)
				act := vnniActs(r, n, 2*nb, rep+n)
				packed := packAllVNNI(act, n, 2*nb, true)
				rb := nb * nvBlockBytes
				got := make([]float32, n*all)
				gemmNVVnniRows(got, data, rb, lo, all, all, packed, n)
				for v := 0; v < n; v++ {
					for i := lo; i < all; i++ {
						want := dotNVFP4Q8(data[i*rb:(i+1)*rb], act[v*2*nb:(v+1)*2*nb])
						sameBitsOrFail(t, fmt.Sprintf("W4A8 VNNI %d blocks, %d vectors, vector %d row %d of [%d,%d), rep %d", nb, n, v, i, lo, all, rep), got[v*all+i], want)
					}
				}
			}
		}
	}
}

// MatVec and MatMul with the AVX-512 kernels (VNNI for Q8_0 and W4A8,
// half512_amd64.s for F16 and BF16) against the AVX2 kernels and the
// plain-Go twins, on one thread and two, with row counts and vector counts
// that exercise every group size, the one-vector streams and the overlap
// of the last tiles; activations with a NaN included (a Q8_0 quant of
// -128, which the AVX2 tiles cannot take).
func TestMatMulAVX512(t *testing.T) {
	requireVNNI(t)
	defer func() { useSIMD, useVNNI, useHalf512 = true, true, true }()
	r := rand.New(rand.NewPCG(35, 36))
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, typ := range []DType{Q8_0, NVFP4, F16, BF16} {
			for _, shape := range [][2]int{{1, 64}, {3, 128}, {5, 64}, {9, 256}, {33, 512}, {130, 1024}} {
				rows, cols := shape[0], shape[1]
				m := quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.02))
				if typ == NVFP4 {
					m = randNVFP4(r, rows, cols)
				}
				for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 13, 16, 19} {
					x := randomRow(r, n*cols, 1)
					if n == 5 {
						x[7] = float32(math.NaN())
					}
					var outs [3][]float32
					for k, mode := range []struct{ simd, avx512 bool }{{false, false}, {true, false}, {true, true}} {
						useSIMD, useVNNI, useHalf512 = mode.simd, mode.avx512, mode.avx512
						outs[k] = make([]float32, n*rows)
						if n == 1 {
							p.MatVec(outs[k], m, x)
						} else {
							p.MatMul(outs[k], m, x, n)
						}
					}
					for i := range outs[2] {
						what := fmt.Sprintf("%s %dx%d n=%d threads=%d out %d", typ, rows, cols, n, threads, i)
						sameBitsOrFail(t, what+" (AVX-512 vs Go)", outs[2][i], outs[0][i])
						sameBitsOrFail(t, what+" (AVX-512 vs AVX2)", outs[2][i], outs[1][i])
					}
				}
			}
		}
		p.Close()
	}
}

// BenchmarkMatMulAVX512 runs MatVec (n=1) and MatMul (n=8, 64) on Q8_0,
// NVFP4 (W4A8), F16 and BF16 4096x1024 matrices (a few MB: the compute
// cost, with the weights in the last-level cache) through the AVX2 kernels
// and the AVX-512 ones, and reports vectors per second ("tok/s": a decode
// step or a prompt token per weight matrix) and the weight GB/s of MatVec.
// One thread counts the thread's own CPU time (the steadier figure on a
// shared machine), two threads wall time.
// go test -run NONE -bench MatMulAVX512 -benchtime 300ms ./engine/tensor/
func BenchmarkMatMulAVX512(b *testing.B) {
	if m := missingVNNI(); m != "" {
		b.Skipf("CPU lacks %s", m)
	}
	defer func() { useVNNI, useHalf512 = true, true }()
	for _, typ := range []string{"Q8_0", "NVFP4", "F16", "BF16"} {
		for _, n := range []int{1, 8, 64} {
			for _, threads := range []int{1, 2} {
				for _, kernels := range []string{"avx2", "avx512"} {
					b.Run(fmt.Sprintf("%s/n=%d/threads=%d/%s", typ, n, threads, kernels), func(b *testing.B) {
						useVNNI, useHalf512 = kernels == "avx512", kernels == "avx512"
						m := gemmBenchMatrices()[typ+"/4096x1024"]
						p := NewPool(threads)
						defer p.Close()
						x := randomRow(rand.New(rand.NewPCG(1, 1)), n*m.Cols, 1)
						y := make([]float32, n*m.Rows)
						run := func() { p.MatMul(y, m, x, n) }
						if n == 1 {
							run = func() { p.MatVec(y, m, x) }
						}
						run()
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						b.ReportAllocs()
						b.ResetTimer()
						cpu0 := threadCPUNanos()
						for b.Loop() {
							run()
						}
						sec := b.Elapsed().Seconds()
						if threads == 1 {
							sec = float64(threadCPUNanos()-cpu0) / 1e9
						}
						b.ReportMetric(float64(b.N)*float64(n)/sec, "tok/s")
						if n == 1 {
							b.ReportMetric(float64(b.N)*float64(len(m.Data))/sec/1e9, "GB/s")
						}
					})
				}
			}
		}
	}
}

// BenchmarkVNNIMatMul runs MatMul on one thread through the AVX-512 VNNI
// kernels with the vector counts of batched decoding (1 to 8: the
// one-vector kernels, the tiles of two, three, four and eight, and groups
// of four and one), on Q8_0 and NVFP4 (W4A8) matrices of 1024x1024 (in
// the core's L2: the kernels' compute cost) and 4096x1024, and reports
// vectors per second of the thread's CPU time ("tok/s").
// go test -run NONE -bench VNNIMatMul -benchtime 300ms ./engine/tensor/
func BenchmarkVNNIMatMul(b *testing.B) {
	if m := missingVNNI(); m != "" {
		b.Skipf("CPU lacks %s", m)
	}
	for _, typ := range []string{"Q8_0", "NVFP4"} {
		for _, shape := range []string{"1024x1024", "4096x1024"} {
			for _, n := range []int{1, 2, 3, 4, 5, 8} {
				b.Run(fmt.Sprintf("%s/%s/n=%d", typ, shape, n), func(b *testing.B) {
					m := gemmBenchMatrices()[typ+"/"+shape]
					p := NewPool(1)
					defer p.Close()
					x := randomRow(rand.New(rand.NewPCG(1, 1)), n*m.Cols, 1)
					y := make([]float32, n*m.Rows)
					p.MatMul(y, m, x, n)
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := threadCPUNanos()
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					sec := float64(threadCPUNanos()-cpu0) / 1e9
					b.ReportMetric(float64(b.N)*float64(n)/sec, "tok/s")
					b.ReportMetric(sec*1e6/float64(b.N), "cpu-us/op")
				})
			}
		}
	}
}

// BenchmarkVNNIKernels runs each AVX-512 VNNI kernel on 32 rows of 1024
// columns with its vectors, all in cache (the compute cost without memory
// traffic), and reports the thread's CPU picoseconds per multiply-add.
// go test -run NONE -bench VNNIKernels -benchtime 300ms ./engine/tensor/
func BenchmarkVNNIKernels(b *testing.B) {
	if m := missingVNNI(); m != "" {
		b.Skipf("CPU lacks %s", m)
	}
	const rows, cols = 32, 1024
	r := rand.New(rand.NewPCG(3, 3))
	q8m := quantizeMatrix(&testing.T{}, Q8_0, rows, cols, randomRow(r, rows*cols, 0.02))
	nvm := randNVFP4(r, rows, cols)
	nb := cols / q8Block
	dst := make([]float32, 8*rows)
	for _, c := range []struct {
		name   string
		n      int // vectors
		nibble bool
		tile   func(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
		vec    func(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)
	}{
		{"q8VnniVec4", 1, false, nil, q8VnniVec4},
		{"q8VnniTile2", 2, false, q8VnniTile2, nil},
		{"q8VnniTile3", 3, false, q8VnniTile3, nil},
		{"q8VnniTile4", 4, false, q8VnniTile4, nil},
		{"q8VnniTile8", 8, false, q8VnniTile8, nil},
		{"q8YmmTile2", 2, false, q8YmmTile2, nil},
		{"q8YmmTile3", 3, false, q8YmmTile3, nil},
		{"q8YmmTile4", 4, false, q8YmmTile4, nil},
		{"q8YmmTile8", 8, false, q8YmmTile8, nil},
		{"nvVnniVec4", 1, true, nil, nvVnniVec4},
		{"nvVnniTile2", 2, true, nvVnniTile2, nil},
		{"nvVnniTile3", 3, true, nvVnniTile3, nil},
		{"nvVnniTile4", 4, true, nvVnniTile4, nil},
		{"nvVnniTile8", 8, true, nvVnniTile8, nil},
		{"nvYmmTile2", 2, true, nvYmmTile2, nil},
		{"nvYmmTile3", 3, true, nvYmmTile3, nil},
		{"nvYmmTile4", 4, true, nvYmmTile4, nil},
		{"nvYmmTile8", 8, true, nvYmmTile8, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			if strings.Contains(c.name, "Ymm") && !cpu.X86.HasAVX512VBMI {
				b.Skip("CPU lacks AVX512VBMI")
			}
			m := q8m
			if c.nibble {
				m = nvm
			}
			rb := len(m.Data) / rows
			act := packAllVNNI(vnniActs(r, c.n, nb, 2), c.n, nb, c.nibble)
			run := func() {
				if c.vec != nil {
					c.vec(&m.Data[0], rb, rows/4*rb, rows/4, &act[0], rb/q8BlockBytes, &dst[0], 4*rows/4)
					return
				}
				c.tile(&m.Data[0], rb, rows/2*rb, rows/2, &act[0], rb/q8BlockBytes, &dst[0], 4*rows, 4*rows/2, c.n)
			}
			if c.nibble {
				run = func() {
					if c.vec != nil {
						c.vec(&m.Data[0], rb, rows/4*rb, rows/4, &act[0], rb/nvBlockBytes, &dst[0], 4*rows/4)
						return
					}
					c.tile(&m.Data[0], rb, rows/2*rb, rows/2, &act[0], rb/nvBlockBytes, &dst[0], 4*rows, 4*rows/2, c.n)
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPUNanos()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(threadCPUNanos()-cpu0)*1e3/float64(b.N)/float64(c.n*rows*cols), "cpu-ps/MAC")
		})
	}
}

// vnniStreamMatrices holds 80 Q8_0 and 80 NVFP4 matrices of the bench
// model's MLP shapes (3584x1024 and 1024x3584): 312 MB of Q8_0 and 165 MB
// of NVFP4, more than the caches hold, so that a pass over them streams
// the weights from memory as a decode step does. Each type's matrices are
// copies of two (the values change nothing in the kernels' speed).
var vnniStreamMatrices = sync.OnceValue(func() map[DType][]Matrix {
	r := rand.New(rand.NewPCG(9, 9))
	out := map[DType][]Matrix{}
	for _, typ := range []DType{Q8_0, NVFP4} {
		var shapes [2]Matrix
		for k, shape := range [2][2]int{{3584, 1024}, {1024, 3584}} {
			if typ == NVFP4 {
				shapes[k] = randNVFP4(r, shape[0], shape[1])
			} else {
				shapes[k] = quantizeMatrix(&testing.T{}, typ, shape[0], shape[1], randomRow(r, shape[0]*shape[1], 0.02))
			}
		}
		for i := 0; i < 80; i++ {
			m := shapes[min(i%3, 1)]
			m.Data = append([]byte(nil), m.Data...)
			out[typ] = append(out[typ], m)
		}
	}
	return out
})

// BenchmarkVNNIStream runs MatMul with 1 to 8 vectors over
// vnniStreamMatrices (weights from memory, not from the caches: a decode
// step's traffic) and reports the weight GB/s and ms per pass, of the
// thread's CPU time on one thread and of wall time on two.
// go test -run NONE -bench VNNIStream -benchtime 10x ./engine/tensor/
func BenchmarkVNNIStream(b *testing.B) {
	if m := missingVNNI(); m != "" {
		b.Skipf("CPU lacks %s", m)
	}
	for _, typ := range []DType{Q8_0, NVFP4} {
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 2, 3, 4, 8} {
				b.Run(fmt.Sprintf("%s/threads=%d/n=%d", typ, threads, n), func(b *testing.B) {
					ms := vnniStreamMatrices()[typ]
					total := 0
					for _, m := range ms {
						total += len(m.Data)
					}
					p := NewPool(threads)
					defer p.Close()
					x := randomRow(rand.New(rand.NewPCG(1, 1)), n*3584, 1)
					y := make([]float32, n*3584)
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.ResetTimer()
					cpu0 := threadCPUNanos()
					for b.Loop() {
						for _, m := range ms {
							p.MatMul(y[:n*m.Rows], m, x[:n*m.Cols], n)
						}
					}
					sec := b.Elapsed().Seconds()
					if threads == 1 {
						sec = float64(threadCPUNanos()-cpu0) / 1e9
					}
					b.ReportMetric(sec*1e3/float64(b.N), "ms/pass")
					b.ReportMetric(float64(total)*float64(b.N)/sec/1e9, "GB/s")
				})
			}
		}
	}
}
