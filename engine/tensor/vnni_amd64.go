package tensor

import (
	"encoding/binary"
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useVNNI selects the VNNI kernels for the Q8_0 and NVFP4 W4A8 products,
// one vector and several alike, with the activations packed by packVNNI:
// the AVX-512 kernels of vnni_amd64.s on CPUs with AVX-512 F, BW, VL and
// VNNI (Intel since Ice Lake and Cascade Lake, AMD since Zen 4), else the
// 256-bit ones of avxvnni_amd64.s (useAVXVNNI) on CPUs with AVX-VNNI
// (Intel's client cores since Alder Lake, which lack AVX-512); x/sys/cpu
// reports either only where the OS saves the registers. Elsewhere the
// AVX2 kernels run, or the plain-Go twins, with the same results. Tests
// and benchmarks turn it off to compare.
var useVNNI = useSIMD && (hasAVX512VNNI || cpu.X86.HasAVXVNNI)

// hasAVX512VNNI reports the AVX-512 set the kernels of vnni_amd64.s need.
var hasAVX512VNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// vnniActBytes is the size of one packed activation block of one vector
// (one Q8_0 block): 32 quants, their eight corrections of four bytes and
// the scale (packVNNI).
const vnniActBytes = 68

//go:noescape
func q8VnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8VnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8VnniTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8VnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8VnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)

//go:noescape
func nvVnniTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvVnniTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvVnniTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvVnniTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvVnniVec4(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int)

// vnniGroup returns the group of vector v among n vectors for the VNNI
// kernels: tileGroup's groups of eight, four and two, and a group of one
// for a single vector left over.
func vnniGroup(v, n int) (v0, size, used int) {
	if v0, s, u := tileGroup(v, n); s > 0 {
		return v0, s, u
	}
	return v, 1, 1
}

// vnniSlots returns how many vector slots the groups of n vectors take,
// padding included.
func vnniSlots(n int) int {
	if n == 0 {
		return 0
	}
	v0, s, _ := vnniGroup(n-1, n)
	return v0 + s
}

// packVNNI copies the Q8_0 activation blocks of vector v (one of n) into
// its group's layout in dst (vnni_amd64.s): a group of s vectors at v0
// starts at v0*len(act)*vnniActBytes and holds, block after block, the s
// vectors' 32 quants as they are (the signed side of the kernels'
// VPDPBUSD), then their corrections (eight dwords each: -128 times the sum
// of each four quants, which undoes the offset of the unsigned weights),
// then their s scales. nibble (W4A8) stores each block's quants in the
// NVFP4 weights' nibble order (quadwords 0, 2, 1, 3, as packNVQ8Tile), the
// corrections of the quants in that order, and the scale times 128
// (exact). The last vector of a group clears the padding after it.
func packVNNI(dst []byte, act []q8Act, v, n int, nibble bool) {
	v0, s, used := vnniGroup(v, n)
	k := v - v0
	base := v0 * len(act) * vnniActBytes
	for b := range act {
		a := &act[b]
		blk := dst[base+b*s*vnniActBytes : base+(b+1)*s*vnniActBytes]
		q := (*[32]byte)(blk[32*k : 32*k+32])
		src := (*[32]byte)(int8Bytes(a.q[:]))
		if nibble {
			for i := 0; i < 8; i++ {
				q[i], q[8+i], q[16+i], q[24+i] = src[i], src[16+i], src[8+i], src[24+i]
			}
		} else {
			*q = *src
		}
		c := (*[32]byte)(blk[32*s+32*k : 32*s+32*k+32])
		for j := 0; j < 8; j++ {
			sum := int32(int8(q[4*j])) + int32(int8(q[4*j+1])) + int32(int8(q[4*j+2])) + int32(int8(q[4*j+3]))
			binary.LittleEndian.PutUint32(c[4*j:], uint32(-128*sum))
		}
		d := a.d
		if nibble {
			d *= 128
		}
		binary.LittleEndian.PutUint32(blk[64*s+4*k:], math.Float32bits(d))
		if k == used-1 {
			clear(blk[32*used : 32*s])
			clear(blk[32*s+32*used : 64*s])
			clear(blk[64*s+4*used:])
		}
	}
}

// int8Bytes views int8 quants as bytes.
func int8Bytes(q []int8) []byte {
	if len(q) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), len(q))
}

// gemmQ8VnniRows sets dst[v*rows+r] = dotQ8(row r, vector v) for the rows
// [lo,hi) of data (rows of rb bytes, at least one block) and all n
// vectors, packed in act by packVNNI.
func gemmQ8VnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	if useAVXVNNI {
		gemmQ8AvxVnniRows(dst, data, rb, lo, hi, rows, act, n)
		return
	}
	nb := rb / q8BlockBytes
	tiles := pickTiles(&q8Tiles)
	for v := 0; v < n; {
		v0, s, used := vnniGroup(v, n)
		a := act[v0*nb*vnniActBytes : (v0+s)*nb*vnniActBytes]
		if s == 1 {
			vnniVecRows(q8VnniVec4, dst[v0*rows+lo:v0*rows+hi], data[lo*rb:hi*rb], rb, a, nb)
		} else {
			vnniTileRows(tiles.pick(s, used), dst, data, rb, lo, hi, rows, a, nb, v0, used)
		}
		v += used
	}
}

// gemmNVVnniRows sets dst[v*rows+r] = dotNVFP4Q8(row r, vector v) (W4A8)
// for the rows [lo,hi) of data (NVFP4 rows of rb bytes, at least one
// block) and all n vectors, packed in act by packVNNI with nibble set.
func gemmNVVnniRows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, n int) {
	if useAVXVNNI {
		gemmNVAvxVnniRows(dst, data, rb, lo, hi, rows, act, n)
		return
	}
	nb := rb / nvBlockBytes
	per := 2 * nb * vnniActBytes // one vector's packed blocks
	tiles := pickTiles(&nvTiles)
	for v := 0; v < n; {
		v0, s, used := vnniGroup(v, n)
		a := act[v0*per : (v0+s)*per]
		if s == 1 {
			vnniVecRows(nvVnniVec4, dst[v0*rows+lo:v0*rows+hi], data[lo*rb:hi*rb], rb, a, nb)
		} else {
			vnniTileRows(tiles.pick(s, used), dst, data, rb, lo, hi, rows, a, nb, v0, used)
		}
		v += used
	}
}

// vnniTile is the signature of the tile kernels.
type vnniTile = func(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

// vnniTiles are the tiles of one weight type for two, three (of a group
// of four), four and eight vectors.
type vnniTiles struct{ t2, t3, t4, t8 vnniTile }

// pick returns the tile for a group of s vectors, used of them computed
// (vnniGroup).
func (t *vnniTiles) pick(s, used int) vnniTile {
	switch {
	case s == 2:
		return t.t2
	case s == 4 && used == 3:
		return t.t3
	case s == 4:
		return t.t4
	}
	return t.t8
}

// q8Tiles and nvTiles hold the Q8_0 and NVFP4 W4A8 tiles: vnni_amd64.s's,
// then vnniymm_amd64.s's (useVnniYmm, pickTiles).
var (
	q8Tiles = [2]vnniTiles{
		{q8VnniTile2, q8VnniTile3, q8VnniTile4, q8VnniTile8},
		{q8YmmTile2, q8YmmTile3, q8YmmTile4, q8YmmTile8},
	}
	nvTiles = [2]vnniTiles{
		{nvVnniTile2, nvVnniTile3, nvVnniTile4, nvVnniTile8},
		{nvYmmTile2, nvYmmTile3, nvYmmTile4, nvYmmTile8},
	}
)

// pickTiles returns the set of tiles this CPU runs.
func pickTiles(sets *[2]vnniTiles) *vnniTiles {
	if useVnniYmm {
		return &sets[1]
	}
	return &sets[0]
}

// vnniTileRows runs a tile kernel over the rows [lo,hi) in pairs: row r
// with row r+h, h = (hi-lo)/2, so that each pair reads two long streams
// (see streamQuarter); an odd last row goes as a pair with itself (the
// same bits twice, into the same place).
func vnniTileRows(kernel vnniTile,
	dst []float32, data []byte, rb, lo, hi, rows int, act []byte, nb, v0, used int) {
	if hi <= lo {
		return
	}
	_ = dst[(v0+used-1)*rows+hi-1]
	_ = data[hi*rb-1]
	_ = act[len(act)-1]
	if h := (hi - lo) / 2; h > 0 {
		kernel(&data[lo*rb], rb, h*rb, h, &act[0], nb, &dst[v0*rows+lo], 4*rows, 4*h, used)
	}
	if (hi-lo)%2 == 1 {
		r := hi - 1
		kernel(&data[r*rb], rb, 0, 1, &act[0], nb, &dst[v0*rows+r], 4*rows, 0, used)
	}
}

// vnniVecRows runs a one-vector kernel over all rows of data (len(dst)
// rows of rb bytes): four streams a quarter of the rows apart
// (streamQuarter), then the last four rows again, adjacent, for the one
// to three left over (the same bits twice), or each of them four times
// over when there are fewer than four rows.
func vnniVecRows(kernel func(row *byte, rb, qstride, nrows int, act *byte, nblk int, dst *float32, dq int),
	dst []float32, data []byte, rb int, act []byte, nb int) {
	rows := len(dst)
	_ = data[rows*rb-1]
	_ = act[len(act)-1]
	q := streamQuarter(rows)
	if q > 0 {
		kernel(&data[0], rb, q*rb, q, &act[0], nb, &dst[0], 4*q)
	}
	switch {
	case rows == 4*q:
	case rows >= 4:
		kernel(&data[(rows-4)*rb], rb, rb, 1, &act[0], nb, &dst[rows-4], 4)
	default:
		for r := 0; r < rows; r++ {
			kernel(&data[r*rb], rb, 0, 1, &act[0], nb, &dst[r], 0)
		}
	}
}
