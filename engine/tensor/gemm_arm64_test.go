package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The NEON tile kernels of gemm_arm64.s against the plain-Go twins
// (dotQ8, dotNVFP4Q8), one (row, vector) product at a time, and MatMul
// with them against MatMul without them and MatVec. Cross-compile and
// run with
//
//	GOARCH=arm64 CGO_ENABLED=0 go test -c -o tensor.arm64 ./engine/tensor/
//	qemu-aarch64-static -cpu max ./tensor.arm64 -test.run 'NEON|TestMatMul'

func requireNEONDot(t *testing.T) {
	t.Helper()
	if !useNEONDot {
		t.Skip("CPU lacks the dot-product extension: the NEON tile kernels are off")
	}
}

func sameBitsNEON(t *testing.T, what string, got, want float32) {
	t.Helper()
	if math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("%s: NEON %g (%#08x), Go %g (%#08x)", what, got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// tileSentinel marks the outputs a tile call must not write.
const tileSentinel = 0x7fc0dead

// checkTileOutputs checks got, the outputs of the tile groups of n
// vectors over rows [lo,hi) of rows, against want(v, r), and that
// nothing else was written.
func checkTileOutputs(t *testing.T, what string, got []float32, n, rows, lo, hi int, want func(v, r int) float32) {
	t.Helper()
	for v := 0; v < n; v++ {
		for r := 0; r < rows; r++ {
			g := got[v*rows+r]
			if v >= tileVectors(n) || r < lo || r >= hi {
				if math.Float32bits(g) != tileSentinel {
					t.Fatalf("%s: vector %d row %d written (%g) outside the tiles", what, v, r, g)
				}
				continue
			}
			sameBitsNEON(t, fmt.Sprintf("%s, vector %d row %d", what, v, r), g, want(v, r))
		}
	}
}

// tileRowRanges are row ranges [lo,hi) of 7 rows for the tile tests.
var tileRowRanges = [][2]int{{0, 7}, {1, 6}, {3, 4}, {2, 2}}

// The Q8_0 tiles against dotQ8: every group size and vector count up to
// 19 (odd ones and padded groups included), rows of edge-case blocks
// (q8EdgeRow: any F16 scale, quants of -128, extremes, F32 ties) and
// activations with quants of -128 too, which SDOT multiplies exactly.
func TestGemmQ8TilesNEON(t *testing.T) {
	requireNEONDot(t)
	r := rand.New(rand.NewPCG(51, 52))
	const rows = 7
	for _, nb := range []int{1, 2, 3, 7, 8, 33} {
		rb := nb * q8BlockBytes
		for n := 2; n <= 19; n++ {
			for rep := 0; rep < 6; rep++ {
				data := make([]byte, 0, rows*rb)
				for i := 0; i < rows; i++ {
					data = append(data, q8EdgeRow(r, nb, rep+i)...)
				}
				act := q8ActEdge(r, n*nb, rep)
				packed := make([]byte, tileSlots(n)*nb*q8ActBytes)
				for v := 0; v < n; v++ {
					packQ8Tile(packed, act[v*nb:(v+1)*nb], v, n, nb)
				}
				rr := tileRowRanges[(n+rep)%len(tileRowRanges)]
				got := make([]float32, n*rows)
				for i := range got {
					got[i] = math.Float32frombits(tileSentinel)
				}
				for v := 0; v < tileVectors(n); {
					_, s, used := tileGroup(v, n)
					gemmQ8Rows(got, data, rb, rr[0], rr[1], rows, packed[v*nb*q8ActBytes:], v, s, used)
					v += used
				}
				what := fmt.Sprintf("Q8_0 %d blocks, %d vectors, rep %d", nb, n, rep)
				checkTileOutputs(t, what, got, n, rows, rr[0], rr[1], func(v, i int) float32 {
					return dotQ8(data[i*rb:(i+1)*rb], act[v*nb:(v+1)*nb])
				})
			}
		}
	}
}

// The W4A8 tiles against dotNVFP4Q8: nvfp4EdgeRow's scale and code edge
// cases, activations with any finite F16 scale (q8EdgeAct) or quants of
// -128 (q8ActEdge).
func TestGemmNVFP4TilesNEON(t *testing.T) {
	requireNEONDot(t)
	r := rand.New(rand.NewPCG(53, 54))
	const rows = 7
	for _, nbv := range []int{1, 2, 3, 5, 16} {
		rb := nbv * nvBlockBytes
		nq := 2 * nbv // Q8_0 blocks per vector
		for n := 2; n <= 19; n++ {
			for rep := 0; rep < 5; rep++ {
				data := make([]byte, 0, rows*rb)
				for i := 0; i < rows; i++ {
					data = append(data, nvfp4EdgeRow(r, nbv, rep+i)...)
				}
				var act []q8Act
				if rep%2 == 0 {
					act = q8EdgeAct(r, n*nbv, rep)
				} else {
					act = q8ActEdge(r, n*nq, rep)
				}
				packed := make([]byte, tileSlots(n)*nq*q8ActBytes)
				for v := 0; v < n; v++ {
					packNVQ8Tile(packed, act[v*nq:(v+1)*nq], v, n, nbv)
				}
				rr := tileRowRanges[(n+rep)%len(tileRowRanges)]
				got := make([]float32, n*rows)
				for i := range got {
					got[i] = math.Float32frombits(tileSentinel)
				}
				for v := 0; v < tileVectors(n); {
					_, s, used := tileGroup(v, n)
					gemmNVQ8Rows(got, data, rb, rr[0], rr[1], rows, packed[v*nq*q8ActBytes:], v, s, used)
					v += used
				}
				what := fmt.Sprintf("W4A8 %d blocks, %d vectors, rep %d", nbv, n, rep)
				checkTileOutputs(t, what, got, n, rows, rr[0], rr[1], func(v, i int) float32 {
					return dotNVFP4Q8(data[i*rb:(i+1)*rb], act[v*nq:(v+1)*nq])
				})
			}
		}
	}
}

// MatMul with the NEON tiles equals MatMul without them and MatVec, bit
// for bit, for every type and NVFP4 arithmetic (the types without tiles
// must be unaffected), vector counts around the group sizes, row counts
// that are not a multiple of the chunk, one and two threads, and also
// with SDOT off (the twins); it does not allocate once its scratch has
// grown.
func TestMatMulTilesNEON(t *testing.T) {
	requireNEONDot(t)
	defer func() { useTiles, useNEONDot = true, true }()
	r := rand.New(rand.NewPCG(55, 56))
	type kind struct {
		typ DType
		act NVFP4Activations
	}
	kinds := []kind{{F32, 0}, {F16, 0}, {BF16, 0}, {Q8_0, 0}, {NVFP4, NVFP4ActQ8}, {NVFP4, NVFP4ActFP4}, {NVFP4, NVFP4ActF32}}
	for _, k := range kinds {
		for _, shape := range [][2]int{{1, 64}, {7, 128}, {37, 192}, {301, 576}} {
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
					want, got, twin := make([]float32, n*rows), make([]float32, n*rows), make([]float32, n*rows)
					useTiles = false
					p.MatMul(want, m, x, n)
					useNEONDot = false
					p.MatMul(twin, m, x, n)
					useTiles, useNEONDot = true, true
					p.MatMul(got, m, x, n)
					one := make([]float32, rows)
					for v := 0; v < n; v++ {
						p.MatVec(one, m, x[v*cols:(v+1)*cols])
						for i := range one {
							what := fmt.Sprintf("%s (act %d) %dx%d, n=%d, %d threads: vector %d row %d", k.typ, k.act, rows, cols, n, threads, v, i)
							sameBitsNEON(t, what+" (untiled MatMul)", got[v*rows+i], want[v*rows+i])
							sameBitsNEON(t, what+" (MatMul without SDOT)", got[v*rows+i], twin[v*rows+i])
							sameBitsNEON(t, what+" (MatVec)", got[v*rows+i], one[i])
						}
					}
					if n == 9 {
						if a := testing.AllocsPerRun(3, func() { p.MatMul(got, m, x, n) }); a != 0 {
							t.Errorf("%s (act %d) %dx%d, n=%d, %d threads: MatMul allocates %g times per call", k.typ, k.act, rows, cols, n, threads, a)
						}
					}
				}
				p.Close()
			}
		}
	}
}

// A NaN among the activations can make quantizeActQ8_0 give a quant of
// -128; MatMul then runs the one-vector kernels for the call (gemm.go's
// packers report it), and the results must be theirs.
func TestMatMulTilesNaNNEON(t *testing.T) {
	requireNEONDot(t)
	defer func() { useTiles = true }()
	r := rand.New(rand.NewPCG(57, 58))
	const rows, cols, n = 19, 128, 9
	for _, typ := range []DType{Q8_0, NVFP4} {
		var m Matrix
		if typ == NVFP4 {
			m = randNVFP4(r, rows, cols)
		} else {
			m = quantizeMatrix(t, typ, rows, cols, randomRow(r, rows*cols, 0.02))
		}
		x := randomRow(r, n*cols, 1)
		// The block of vector 5 at 64: amax becomes 126.5 after the NaN,
		// and -127.49 then rounds to -128.
		blk := x[5*cols+64 : 5*cols+96]
		blk[3], blk[30], blk[31] = -127.49, float32(math.NaN()), 126.5
		var a q8Act
		quantizeActQ8_0(&a, blk, actQ8Flavor)
		if a.q[3] != -128 {
			t.Fatalf("the test block quantizes to %d, not -128", a.q[3])
		}
		p := NewPool(2)
		want, got := make([]float32, n*rows), make([]float32, n*rows)
		useTiles = false
		p.MatMul(want, m, x, n)
		useTiles = true
		p.MatMul(got, m, x, n)
		p.Close()
		for i := range got {
			sameBitsNEON(t, fmt.Sprintf("%s, NaN input, output %d", typ, i), got[i], want[i])
		}
	}
}
