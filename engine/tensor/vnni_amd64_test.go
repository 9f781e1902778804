package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
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

func TestVNNIQ8(t *testing.T) {
	requireVNNI(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, nb := range []int{1, 2, 3, 8, 33} {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 19} {
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
	r := rand.New(rand.NewPCG(33, 34))
	for _, nb := range []int{1, 2, 3, 7, 17} {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 19} {
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
