package tensor

import "golang.org/x/sys/cpu"

// useAVXVNNI picks, where useVNNI is set, the 256-bit AVX-VNNI kernels of
// avxvnni_amd64.s over the AVX-512 ones of vnni_amd64.s: on CPUs with
// AVX-VNNI (the VEX-encoded VPDPBUSD: Intel since Alder Lake, whose
// client cores lack AVX-512; AMD since Zen 5) but without the AVX-512 set
// the 512-bit kernels need. x/sys/cpu reports AVX-VNNI only where the OS
// saves the ymm registers. Both take the activations as packVNNI packs
// them and give the same bits. Tests and benchmarks turn it on to run
// these kernels on CPUs that have both.
var useAVXVNNI = useSIMD && cpu.X86.HasAVXVNNI && !hasAVX512VNNI

// The kernels of avxvnni_amd64.s. The tiles take nrows rows of rb bytes,
// one after the other, against a group of s vectors packed by packVNNI
// and store the sums of its first `used` vectors to dst[k*dstride/4 + r];
// the one-vector kernels have vnni_amd64.s's signature (four streams of
// rows, see vnniVecRows).

//go:noescape
func q8AvxVnniTile8(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func q8AvxVnniTile4(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func q8AvxVnniTile2(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func q8AvxVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)

//go:noescape
func nvAvxVnniTile8(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func nvAvxVnniTile4(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func nvAvxVnniTile2(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int)

//go:noescape
func nvAvxVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)

// gemmQ8AvxVnniRows is gemmQ8VnniRows with the AVX-VNNI kernels.
func gemmQ8AvxVnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	nb := rb / q8BlockBytes
	for v := 0; v < n; {
		v0, s, used := vnniGroup(v, n)
		a := act[v0*nb*vnniActBytes : (v0+s)*nb*vnniActBytes]
		switch s {
		case 1:
			vnniVecRows(q8AvxVnniVec4, dst[v0*rows+lo:v0*rows+hi], data[lo*rb:hi*rb], rb, a, nb)
		case 2:
			avxVnniTileRows(q8AvxVnniTile2, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		case 4:
			avxVnniTileRows(q8AvxVnniTile4, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		default:
			avxVnniTileRows(q8AvxVnniTile8, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		}
		v += used
	}
}

// gemmNVAvxVnniRows is gemmNVVnniRows (W4A8) with the AVX-VNNI kernels.
func gemmNVAvxVnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	nb := rb / nvBlockBytes
	per := 2 * nb * vnniActBytes // one vector's packed blocks
	for v := 0; v < n; {
		v0, s, used := vnniGroup(v, n)
		a := act[v0*per : (v0+s)*per]
		switch s {
		case 1:
			vnniVecRows(nvAvxVnniVec4, dst[v0*rows+lo:v0*rows+hi], data[lo*rb:hi*rb], rb, a, nb)
		case 2:
			avxVnniTileRows(nvAvxVnniTile2, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		case 4:
			avxVnniTileRows(nvAvxVnniTile4, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		default:
			avxVnniTileRows(nvAvxVnniTile8, dst, data, rb, lo, hi, rows, a, nb, v0, used)
		}
		v += used
	}
}

// avxVnniTileRows runs a tile kernel over the rows [lo,hi), one after the
// other (a tile holds one row, so the rows are one stream already).
func avxVnniTileRows(kernel func(row *byte, rb, nrows int, act *byte, nblk int, dst *float32, dstride, used int),
	dst []float32, data []byte, rb, lo, hi, rows int, act []byte, nb, v0, used int) {
	if hi <= lo {
		return
	}
	_ = dst[(v0+used-1)*rows+hi-1]
	_ = data[hi*rb-1]
	_ = act[len(act)-1]
	kernel(&data[lo*rb], rb, hi-lo, &act[0], nb, &dst[v0*rows+lo], 4*rows, used)
}
