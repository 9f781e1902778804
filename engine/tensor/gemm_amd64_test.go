package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// q8TileInputs makes rows Q8_0 weight rows of nb blocks and n activation
// vectors of nb blocks as quantizeActQ8_0 makes them (quants in -127..127);
// rep picks the flavour: any finite F16 scale, extreme quants (weights
// -128, activations ±127), zero scales, realistic values.
func q8TileInputs(r *rand.Rand, rows, nb, n, rep int) ([]byte, []q8Act) {
	data, _ := q8Inputs(r, rows, nb, rep)
	if rep%7 == 3 {
		for b := 0; b < rows*nb; b += 2 {
			data[b*q8BlockBytes], data[b*q8BlockBytes+1] = 0, 0x80 // -0
		}
	}
	act := make([]q8Act, n*nb)
	for i := range act {
		for k := range act[i].q {
			act[i].q[k] = int8(r.IntN(255) - 127)
			if rep%5 == 0 {
				act[i].q[k] = int8(127 - 254*r.IntN(2))
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
	return data, act
}

// The Q8_0 tile kernels against dotQ8, one product at a time.
func TestGemmQ8Tiles(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, nb := range []int{1, 2, 3, 8, 33} {
		for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 15, 19} {
			for rep := 0; rep < 15; rep++ {
				const rows = 5
				data, act := q8TileInputs(r, rows, nb, n, rep)
				rb := nb * q8BlockBytes
				packed := make([]byte, tileSlots(n)*nb*q8ActBytes)
				for v := 0; v < n; v++ {
					packQ8Tile(packed, act[v*nb:(v+1)*nb], v, n, nb)
				}
				got := make([]float32, n*rows)
				for v := 0; v < tileVectors(n); {
					_, s, used := tileGroup(v, n)
					gemmQ8Rows(got, data, rb, 1, rows, rows, packed[v*nb*q8ActBytes:], v, s, used)
					v += used
				}
				for v := 0; v < tileVectors(n); v++ {
					for i := 1; i < rows; i++ {
						want := dotQ8(data[i*rb:(i+1)*rb], act[v*nb:(v+1)*nb])
						sameBitsOrFail(t, fmt.Sprintf("Q8_0 %d blocks, %d vectors, vector %d row %d, rep %d", nb, n, v, i, rep), got[v*rows+i], want)
					}
				}
			}
		}
	}
}

// The F16 and BF16 3x4 tiles (through gemmHalfRows, with odd vector counts,
// row ranges not a multiple of three and column tails) against dotF16 and
// dotBF16 one product at a time. halfInputs draws any finite value, and
// for BF16 also products below 2^-126, where fusing would change bits.
func TestGemmHalfTiles(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, bf := range []bool{false, true} {
		twin := dotF16
		if bf {
			twin = dotBF16
		}
		for _, cols := range simdLengths {
			for _, shape := range [][3]int{{0, 3, 4}, {0, 4, 5}, {1, 10, 8}, {2, 7, 9}, {0, 9, 4}, {3, 3, 4}, {0, 6, 13}} {
				lo, hi, n := shape[0], shape[1], shape[2]
				rows := hi + 1
				w, _ := halfInputs(r, bf, rows, cols)
				x := make([]float32, n*cols)
				for v := 0; v < n; v++ {
					_, xv := halfInputs(r, bf, 0, cols)
					copy(x[v*cols:], xv)
				}
				got := make([]float32, n*rows)
				gemmHalfRows(got, w[lo*cols:hi*cols], x, lo, hi, cols, rows, n, bf)
				for v := 0; v < n; v++ {
					for row := lo; row < hi; row++ {
						want := twin(w[row*cols:(row+1)*cols], x[v*cols:(v+1)*cols])
						sameBitsOrFail(t, fmt.Sprintf("bf=%v cols=%d rows [%d,%d) n=%d: row %d vector %d", bf, cols, lo, hi, n, row, v), got[v*rows+row], want)
					}
				}
			}
		}
	}
}

// The NVFP4 tiles, W4A8 (packNVQ8Tile, groups of eight and four) and
// W4A4 (groups of four, overlapping), against dotNVFP4Q8 and dotNVFP4FP4
// one product at a time. Weights: random codes and scale bytes, the NaN
// scale code 0x7F and the sign bit included; activations as the
// quantizers make them, plus zero scales.
func TestGemmNVFP4Tiles(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(25, 26))
	for _, nbv := range []int{1, 2, 5, 16} {
		cols := nbv * nvBlock
		for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 11, 13, 15} {
			for rep := 0; rep < 6; rep++ {
				rows := 4 + 3*(rep&1) // from row 1: one pair and an odd row, or three pairs
				rb := nbv * nvBlockBytes
				data := make([]byte, rows*rb)
				for i := range data {
					data[i] = byte(r.IntN(256))
				}
				if rep == 1 {
					for b := 0; b < rows*nbv; b++ {
						copy(data[b*nvBlockBytes:], []byte{0x7F, 0xFF, 0, 0x80})
					}
				}
				x := make([]float32, n*cols)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
					if rep == 2 && i/32%3 == 0 {
						x[i] = 0 // zero Q8_0 and NVFP4 scales
					}
				}
				// W4A8
				q8 := make([]q8Act, n*cols/q8Block)
				packed := make([]byte, tileSlots(n)*cols/q8Block*q8ActBytes)
				for v := 0; v < n; v++ {
					a := q8[v*cols/q8Block : (v+1)*cols/q8Block]
					for b := range a {
						quantizeActQ8_0(&a[b], x[v*cols+b*q8Block:], actQ8Flavor)
					}
					packNVQ8Tile(packed, a, v, n, nbv)
				}
				got := make([]float32, n*rows)
				for v := 0; v < tileVectors(n); {
					_, s, used := tileGroup(v, n)
					gemmNVQ8Rows(got, data, rb, 1, rows, rows, packed[v*cols/q8Block*q8ActBytes:], v, s, used)
					v += used
				}
				for v := 0; v < tileVectors(n); v++ {
					for i := 1; i < rows; i++ {
						want := dotNVFP4Q8(data[i*rb:(i+1)*rb], q8[v*cols/q8Block:(v+1)*cols/q8Block])
						sameBitsOrFail(t, fmt.Sprintf("W4A8 %d blocks, %d vectors, vector %d row %d, rep %d", nbv, n, v, i, rep), got[v*rows+i], want)
					}
				}
				// W4A4
				f4 := make([]fp4Act, n*nbv)
				invG := make([]float32, n)
				for v := 0; v < n; v++ {
					invG[v] = quantizeActFP4(f4[v*nbv:(v+1)*nbv], x[v*cols:(v+1)*cols], 0)
				}
				if n < 4 {
					continue
				}
				gemmNVFP4Rows(got, data, rb, 1, rows, rows, f4, invG, n)
				for v := 0; v < n; v++ {
					for i := 1; i < rows; i++ {
						want := dotNVFP4FP4(data[i*rb:(i+1)*rb], f4[v*nbv:(v+1)*nbv]) * invG[v]
						sameBitsOrFail(t, fmt.Sprintf("W4A4 %d blocks, %d vectors, vector %d row %d, rep %d", nbv, n, v, i, rep), got[v*rows+i], want)
					}
				}
			}
		}
	}
}

// MatMul with the tile kernels equals MatMul with the one-vector kernels
// and MatVec, bit for bit, for every type and NVFP4 arithmetic, vector
// counts around the tile sizes, row counts that are not a multiple of the
// chunk or the tile, one and two threads; and it does not allocate once
// its scratch has grown.
func TestMatMulTiles(t *testing.T) {
	requireSIMD(t)
	for _, wide := range wideModes() {
		t.Run("avx512="+fmt.Sprint(wide), func(t *testing.T) { testMatMulTiles(t, wide) })
	}
}

// wideModes lists the settings of the AVX-512 kernels (useVNNI,
// useHalf512) a MatMul test runs under: off, and on where the CPU has them.
func wideModes() []bool {
	if missingVNNI() != "" {
		return []bool{false}
	}
	return []bool{false, true}
}

// setWide turns the AVX-512 kernels on or off and returns a function that
// restores their settings.
func setWide(on bool) (restore func()) {
	v, h := useVNNI, useHalf512
	useVNNI, useHalf512 = on, on
	return func() { useVNNI, useHalf512 = v, h }
}

func testMatMulTiles(t *testing.T, wide bool) {
	defer setWide(wide)()
	defer func() { useTiles = useSIMD }()
	r := rand.New(rand.NewPCG(27, 28))
	type kind struct {
		typ DType
		act NVFP4Activations
	}
	kinds := []kind{{F32, 0}, {F16, 0}, {BF16, 0}, {Q8_0, 0}, {NVFP4, NVFP4ActQ8}, {NVFP4, NVFP4ActFP4}, {NVFP4, NVFP4ActF32}}
	for _, k := range kinds {
		for _, shape := range [][2]int{{1, 64}, {7, 128}, {37, 192}, {301, 576}, {1000, 64}} {
			rows, cols := shape[0], shape[1]
			if k.typ != Q8_0 && k.typ != NVFP4 {
				cols += 3 // a tail for the float kernels
			}
			var m Matrix
			if k.typ == NVFP4 {
				m = randNVFP4(r, rows, cols)
			} else {
				m = quantizeMatrix(t, k.typ, rows, cols, randomRow(r, rows*cols, 0.02))
			}
			for _, threads := range []int{1, 2} {
				p := NewPool(threads)
				p.SetNVFP4Activations(k.act)
				for _, n := range []int{2, 3, 4, 5, 7, 9, 14, 17} {
					x := randomRow(r, n*cols, 1)
					want, got := make([]float32, n*rows), make([]float32, n*rows)
					useTiles = false
					p.MatMul(want, m, x, n)
					useTiles = true
					p.MatMul(got, m, x, n)
					one, oneRef := make([]float32, rows), make([]float32, rows)
					for v := 0; v < n; v++ {
						p.MatVec(one, m, x[v*cols:(v+1)*cols])
						useTiles = false
						p.MatVec(oneRef, m, x[v*cols:(v+1)*cols]) // the one-vector kernels
						useTiles = true
						for i := range one {
							what := fmt.Sprintf("%s (act %d) %dx%d, n=%d, %d threads: vector %d row %d", k.typ, k.act, rows, cols, n, threads, v, i)
							sameBitsOrFail(t, what+" (untiled MatMul)", got[v*rows+i], want[v*rows+i])
							sameBitsOrFail(t, what+" (MatVec)", got[v*rows+i], one[i])
							sameBitsOrFail(t, what+" (one-vector MatVec)", one[i], oneRef[i])
						}
					}
					if n == 9 {
						xv := x[:cols]
						if a := testing.AllocsPerRun(3, func() { p.MatVec(one, m, xv) }); a != 0 {
							t.Errorf("%s (act %d) %dx%d, %d threads: MatVec allocates %g times per call", k.typ, k.act, rows, cols, threads, a)
						}
					}
					if n != 9 {
						continue
					}
					if a := testing.AllocsPerRun(3, func() { p.MatMul(got, m, x, n) }); a != 0 {
						t.Errorf("%s (act %d) %dx%d, n=%d, %d threads: MatMul allocates %g times per call", k.typ, k.act, rows, cols, n, threads, a)
					}
				}
				p.Close()
			}
		}
	}
}

// A NaN among the activations can make quantizeActQ8_0 give a quant of
// -128, which the Q8_0 and W4A8 tile kernels cannot take: MatMul must then
// fall back to the one-vector kernels and give their bits.
func TestMatMulTilesNaN(t *testing.T) {
	requireSIMD(t)
	defer func() { useTiles = useSIMD }()
	r := rand.New(rand.NewPCG(31, 32))
	const rows, cols, n = 19, 128, 9
	for _, typ := range []DType{Q8_0, NVFP4} {
		for _, wide := range wideModes() {
			testMatMulTilesNaN(t, r, typ, rows, cols, n, wide)
		}
	}
}

func testMatMulTilesNaN(t *testing.T, r *rand.Rand, typ DType, rows, cols, n int, wide bool) {
	var m Matrix
	if typ == NVFP4 {
		m = randNVFP4(r, rows, cols)
	} else {
		m = quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.02))
	}
	x := randomRow(r, n*cols, 1)
	// The block of vector 5 at 64: amax becomes 126.5 after the NaN, and
	// -127.49 then rounds to -128.
	blk := x[5*cols+64 : 5*cols+96]
	blk[3], blk[30], blk[31] = -127.49, float32(math.NaN()), 126.5
	var a q8Act
	quantizeActQ8_0(&a, blk, actQ8Flavor)
	if a.q[3] != -128 {
		t.Fatalf("the test block quantizes to %d, not -128", a.q[3])
	}
	p := NewPool(2)
	defer p.Close()
	want, got := make([]float32, n*rows), make([]float32, n*rows)
	// Against the AVX2 one-vector kernels; the AVX-512 kernels against
	// the plain-Go twins, which they match on -128 too, where the AVX2
	// W4A8 kernel's VPSIGNB (as ggml's) wraps: the product of -128 and a
	// negative weight comes out negated.
	restore := setWide(false)
	useTiles = false
	useSIMD = !wide
	p.MatMul(want, m, x, n)
	useSIMD = true
	restore()
	defer setWide(wide)()
	useTiles = true
	p.MatMul(got, m, x, n)
	for i := range got {
		sameBitsOrFail(t, fmt.Sprintf("%s, NaN input, AVX-512 %v, output %d", typ, wide, i), got[i], want[i])
	}
}

// gemmQuantQ8 against quantizeActQ8_0 (x86 flavour), block for block: any
// finite value, extremes, subnormals, infinities, zero blocks, halves; a
// NaN must be reported.
func TestGemmQuantQ8(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(33, 34))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 127, -127,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		1e-38, 3e-37, -3e-37, 65504 * 127, 65520 * 127, float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, nb := range []int{1, 2, 3, 8, 33} {
		for rep := 0; rep < 400; rep++ {
			src := make([]float32, nb*q8Block)
			scale := math.Pow(2, float64(r.IntN(300)-150))
			for i := range src {
				switch {
				case rep%4 == 0: // any finite value
					src[i] = math.Float32frombits(uint32(r.IntN(2))<<31 | uint32(r.IntN(255))<<23 | uint32(r.IntN(1<<23)))
				case rep%4 == 1 && r.IntN(3) == 0:
					src[i] = specials[r.IntN(len(specials))]
				case rep%4 == 2: // products v*id near halves
					src[i] = float32(r.IntN(255)-127) * 0.25
				default:
					src[i] = float32(r.NormFloat64() * scale)
				}
			}
			if rep%9 == 0 {
				clear(src[q8Block*(nb-1):]) // a zero block
			}
			got, want := make([]q8Act, nb), make([]q8Act, nb)
			for b := range want {
				quantizeActQ8_0(&want[b], src[b*q8Block:], q8FlavorX86)
			}
			if !gemmQuantQ8(&src[0], nb, &got[0]) {
				t.Fatalf("%d blocks, rep %d: a NaN reported in %v", nb, rep, src)
			}
			for b := range want {
				if got[b].q != want[b].q || math.Float32bits(got[b].d) != math.Float32bits(want[b].d) {
					t.Fatalf("%d blocks, rep %d, block %d of %v:\ngot  %v %g\nwant %v %g", nb, rep, b, src[b*q8Block:(b+1)*q8Block], got[b].q, got[b].d, want[b].q, want[b].d)
				}
			}
			src[r.IntN(len(src))] = float32(math.NaN())
			if gemmQuantQ8(&src[0], nb, &got[0]) {
				t.Fatalf("%d blocks, rep %d: NaN not reported", nb, rep)
			}
		}
	}
}
