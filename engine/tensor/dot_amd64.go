package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useSIMD selects the AVX2 kernels of dot_amd64.s. They need AVX2, FMA3
// and F16C (every x86 CPU since Haswell and Zen has all three); elsewhere
// the plain-Go twins in kernels.go run, with the same results.
var useSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// useNEON selects the arm64 kernels (dot_arm64.s); none here.
const useNEON = false

// dotQ8Lanes reads q8Act blocks as 32 quants then the F32 scale.
var (
	_ [unsafe.Sizeof(q8Act{}) - 36]byte
	_ [36 - unsafe.Sizeof(q8Act{})]byte
	_ [unsafe.Offsetof(q8Act{}.d) - 32]byte
	_ [32 - unsafe.Offsetof(q8Act{}.d)]byte
)

// The kernels of dot_amd64.s: nblk blocks of eight columns (of 32 for
// dotQ8Lanes), lane accumulators out.

//go:noescape
func ggmlDotF32Blocks(w, x *float32, nblk int, acc *[32]float32)

// ggmlDotF32Sum is ggmlReduce32 of ggmlDotF32Blocks's lanes, in the
// kernel. nblk > 0.
//
//go:noescape
func ggmlDotF32Sum(w, x *float32, nblk int) float32

// ggmlDotF32Sum2 is ggmlDotF32Sum of one row against two vectors. nblk > 0.
//
//go:noescape
func ggmlDotF32Sum2(w, x0, x1 *float32, nblk int, sums *[2]float32)

//go:noescape
func dotF16Lanes(w *uint16, x *float32, nblk int, lanes *[8]float32)

//go:noescape
func dotF16Lanes4(w *uint16, stride int, x *float32, nblk int, lanes *[32]float32)

//go:noescape
func dotBF16Lanes(w *uint16, x *float32, nblk int, lanes *[8]float32)

//go:noescape
func dotBF16Lanes4(w *uint16, stride int, x *float32, nblk int, lanes *[32]float32)

//go:noescape
func dotF16Lanes4x2(w *uint16, stride int, x0, x1 *float32, nblk int, lanes *[64]float32)

//go:noescape
func dotBF16Lanes4x2(w *uint16, stride int, x0, x1 *float32, nblk int, lanes *[64]float32)

//go:noescape
func dotQ8Lanes(row *byte, act *q8Act, nblk int, lanes *[8]float32)

//go:noescape
func dotQ8Lanes4(row *byte, stride int, act *q8Act, nblk int, lanes *[32]float32)

// exactTail finishes a dotExact-ordered product from its lanes after the
// whole blocks: the tail's products go to lanes 0.., then every lane gets
// its (possibly zero) tail term, as in dotF16 and dotBF16.
func exactTail(l *[8]float32, t *[8]float32) float32 {
	return hsum8(l[0]+t[0], l[1]+t[1], l[2]+t[2], l[3]+t[3], l[4]+t[4], l[5]+t[5], l[6]+t[6], l[7]+t[7])
}

func f16TailTerms(t *[8]float32, w []uint16, x []float32) {
	x = x[:len(w)]
	for k := range w {
		t[k] = float32(f16Table[w[k]] * x[k])
	}
}

func bf16TailTerms(t *[8]float32, w []uint16, x []float32) {
	x = x[:len(w)]
	for k := range w {
		t[k] = float32(bf16(w[k]) * x[k])
	}
}

// dotF16SIMD is dotF16 with the whole blocks in dotF16Lanes.
func dotF16SIMD(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var l, t [8]float32
	nb := len(w) / 8
	if nb > 0 {
		dotF16Lanes(&w[0], &x[0], nb, &l)
	}
	f16TailTerms(&t, w[8*nb:], x[8*nb:])
	return exactTail(&l, &t)
}

// dotBF16SIMD is dotBF16 with the whole blocks in dotBF16Lanes.
func dotBF16SIMD(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var l, t [8]float32
	nb := len(w) / 8
	if nb > 0 {
		dotBF16Lanes(&w[0], &x[0], nb, &l)
	}
	bf16TailTerms(&t, w[8*nb:], x[8*nb:])
	return exactTail(&l, &t)
}

// dotHalfRowsSIMD sets dst[r] to the dotF16 (bf false) or dotBF16 (bf
// true) product of row r of w (cols values each) with x, four rows at a
// time, which keeps four independent chains of adds in flight. The four
// rows are a quarter of the range apart (streamQuarter).
func dotHalfRowsSIMD(dst []float32, w []uint16, cols int, x []float32, bf bool) {
	x = x[:cols]
	nb := cols / 8
	q := streamQuarter(len(dst))
	if nb == 0 {
		q = 0
	}
	var l [32]float32
	for r := 0; r < q; r++ {
		w4 := w[r*cols : (3*q+r+1)*cols]
		if bf {
			dotBF16Lanes4(&w4[0], 2*q*cols, &x[0], nb, &l)
		} else {
			dotF16Lanes4(&w4[0], 2*q*cols, &x[0], nb, &l)
		}
		for i := 0; i < 4; i++ {
			var t [8]float32
			tail := w4[i*q*cols+8*nb : (i*q+1)*cols]
			if bf {
				bf16TailTerms(&t, tail, x[8*nb:])
			} else {
				f16TailTerms(&t, tail, x[8*nb:])
			}
			dst[r+i*q] = exactTail((*[8]float32)(l[8*i:8*i+8]), &t)
		}
	}
	for r := 4 * q; r < len(dst); r++ {
		if bf {
			dst[r] = dotBF16SIMD(w[r*cols:(r+1)*cols], x)
		} else {
			dst[r] = dotF16SIMD(w[r*cols:(r+1)*cols], x)
		}
	}
}

// streamQuarter returns q = rows/4 for the one-vector kernels that take
// four rows at a time: they read rows r, r+q, r+2q and r+3q together, and
// the rows 4q.. that are left one at a time. Four adjacent rows would
// make four streams of one row each, every one ending in a jump, which
// the hardware prefetchers follow badly: on a Zen 5 core (a VM whose
// bandwidth varied) an F16 matrix far larger than the caches streams at
// 6-11 GB/s four adjacent rows at a time and at 11-34 GB/s, mostly 16-23,
// four rows a quarter of a chunk apart; one row at a time, bound by its
// one chain of adds, at 14-26 (BenchmarkRowStreams). Which rows go
// together changes no result.
func streamQuarter(rows int) int { return rows / 4 }

// dotQ8SIMD is dotQ8 with the blocks in dotQ8Lanes, whose register lanes
// hold the twin's lanes 0 1 4 5 2 3 6 7.
func dotQ8SIMD(row []byte, act []q8Act) float32 {
	nb := len(row) / q8BlockBytes
	act = act[:nb]
	var l [8]float32
	if nb > 0 {
		dotQ8Lanes(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0], l[1], l[4], l[5], l[2], l[3], l[6], l[7])
}

// dotHalfMatSIMD computes rows [lo,hi) of an F16 (bf false) or BF16 matrix,
// whose rows lo..hi-1 are w, for the n vectors of x (cols values each,
// rounded to the weight type, in natural order): dst[v*rows+r] is
// dotF16 or dotBF16 of row r and vector v. Four rows and two vectors go
// through the kernel at once; each vector pair streams over the rows, which
// the caller keeps to a cache-sized chunk.
func dotHalfMatSIMD(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	nb := cols / 8
	var l [64]float32
	for v := 0; v < n; v += 2 {
		v1 := min(v+1, n-1) // an odd last vector is paired with itself
		x0, x1 := x[v*cols:(v+1)*cols], x[v1*cols:(v1+1)*cols]
		r := lo
		if nb > 0 {
			for ; r+4 <= hi; r += 4 {
				w4 := w[(r-lo)*cols : (r-lo+4)*cols]
				if bf {
					dotBF16Lanes4x2(&w4[0], 2*cols, &x0[0], &x1[0], nb, &l)
				} else {
					dotF16Lanes4x2(&w4[0], 2*cols, &x0[0], &x1[0], nb, &l)
				}
				for i := 0; i < 4; i++ {
					var t0, t1 [8]float32
					tail := w4[i*cols+8*nb : (i+1)*cols]
					if bf {
						bf16TailTerms(&t0, tail, x0[8*nb:])
						bf16TailTerms(&t1, tail, x1[8*nb:])
					} else {
						f16TailTerms(&t0, tail, x0[8*nb:])
						f16TailTerms(&t1, tail, x1[8*nb:])
					}
					dst[v*rows+r+i] = exactTail((*[8]float32)(l[16*i:16*i+8]), &t0)
					dst[v1*rows+r+i] = exactTail((*[8]float32)(l[16*i+8:16*i+16]), &t1)
				}
			}
		}
		for ; r < hi; r++ {
			wr := w[(r-lo)*cols : (r-lo+1)*cols]
			if bf {
				dst[v*rows+r], dst[v1*rows+r] = dotBF16SIMD(wr, x0), dotBF16SIMD(wr, x1)
			} else {
				dst[v*rows+r], dst[v1*rows+r] = dotF16SIMD(wr, x0), dotF16SIMD(wr, x1)
			}
		}
	}
}

// dotQ8RowsSIMD sets dst[r] = dotQ8(row r of data, act), rows of rowBytes
// bytes, four rows at a time (a quarter of the range apart, streamQuarter)
// through dotQ8Lanes4.
func dotQ8RowsSIMD(dst []float32, data []byte, rowBytes int, act []q8Act) {
	nb := rowBytes / q8BlockBytes
	act = act[:nb]
	q := streamQuarter(len(dst))
	if nb == 0 {
		q = 0
	}
	var l [32]float32
	for r := 0; r < q; r++ {
		rows4 := data[r*rowBytes : (3*q+r+1)*rowBytes]
		dotQ8Lanes4(&rows4[0], q*rowBytes, &act[0], nb, &l)
		for i := 0; i < 4; i++ {
			k := l[8*i : 8*i+8]
			dst[r+i*q] = hsum8(k[0], k[1], k[4], k[5], k[2], k[3], k[6], k[7])
		}
	}
	for r := 4 * q; r < len(dst); r++ {
		dst[r] = dotQ8SIMD(data[r*rowBytes:(r+1)*rowBytes], act)
	}
}

// f32Sum is ggmlReduce32 of ggmlDotF32Blocks's lanes (nblk > 0).
func f32Sum(w, x *float32, nblk int) float32 { return ggmlDotF32Sum(w, x, nblk) }

// f32Sum2 is f32Sum of the row w against x0 and x1.
func f32Sum2(w, x0, x1 *float32, nblk int, sums *[2]float32) { ggmlDotF32Sum2(w, x0, x1, nblk, sums) }
