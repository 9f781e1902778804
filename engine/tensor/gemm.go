package tensor

import (
	"encoding/binary"
	"math"
)

// Tiled products for MatMul with several vectors (gemm_amd64.s): a tile
// kernel runs one weight row (three for F16 and BF16) against a group of
// vectors, so that each weight block is loaded and unpacked once for the
// group. Q8_0 and W4A8 take the vectors in groups of eight, four and two
// (tileGroup), their activations repacked once per call so that the
// kernel finds a group's blocks side by side; F16, BF16 and W4A4 take
// groups of four in place. Every (row, vector) result is computed in the
// order of its one-vector kernel, so it equals MatVec's bit for bit.

// useTiles selects the tile kernels, and gemmQuantQ8, where useSIMD is
// set (amd64) or the CPU has SDOT (arm64, gemm_arm64.s); tests and
// benchmarks turn it off to compare with the one-vector kernels they
// replace.
var useTiles = useSIMD || useNEONDot

// tileGroup returns the tile group of vector v among n vectors: its first
// vector, its size (8, 4 or 2 vectors, the kernel's) and how many of its
// vectors are used. The groups are: as many of eight as fit, then one of
// four if four vectors remain, then the rest: three are padded to a group
// of four, two make a group of two, and a single vector is left over
// (size 0) for the one-vector kernels.
func tileGroup(v, n int) (v0, size, used int) {
	full := n &^ 7
	if v < full {
		return v &^ 7, 8, 8
	}
	v0, rem := full, n-full
	if rem >= 4 {
		if v < full+4 {
			return full, 4, 4
		}
		v0, rem = full+4, rem-4
	}
	switch rem {
	case 3:
		return v0, 4, 3
	case 2:
		return v0, 2, 2
	}
	return v, 0, 0
}

// tileVectors returns how many of n vectors go through tile kernels (all
// but a single one left over).
func tileVectors(n int) int {
	if _, s, _ := tileGroup(n-1, n); s == 0 {
		return n - 1
	}
	return n
}

// tileSlots returns how many vector slots the tile groups of n vectors
// take, padding included.
func tileSlots(n int) int {
	if n == 0 {
		return 0
	}
	v0, s, _ := tileGroup(n-1, n)
	if s == 0 {
		return n - 1
	}
	return v0 + s
}

// packQ8Tile copies the nb activation blocks of vector v (one of n) into
// its tile group's layout in dst, which holds the groups one after the
// other, nb*q8ActBytes bytes per vector slot (tileSlots): a group of size
// s at vector v0 starts at v0*nb*q8ActBytes and holds, block after block, the s vectors'
// 32 quants then their s F32 scales. It reports whether a quant is -128,
// which the tile kernels cannot take (quantizeActQ8_0 gives one only for a
// block holding a NaN, see TestQ8ActNeverMinus128); MatMul then runs the
// one-vector kernels for the whole call.
func packQ8Tile(dst []byte, act []q8Act, v, n, nb int) (minus128 bool) {
	v0, s, used := tileGroup(v, n)
	if s == 0 {
		return false
	}
	k := v - v0
	base := v0 * nb * q8ActBytes
	for b := range act[:nb] {
		blk := dst[base+b*s*q8ActBytes : base+(b+1)*s*q8ActBytes]
		q := blk[32*k : 32*k+32]
		for i, x := range act[b].q {
			q[i] = byte(x)
			minus128 = minus128 || x == -128
		}
		binary.LittleEndian.PutUint32(blk[32*s+4*k:], math.Float32bits(act[b].d))
		if k == used-1 { // the last used vector clears the padding
			clear(blk[32*used : 32*s])
			clear(blk[32*s+4*used:])
		}
	}
	return minus128
}

// q8ActBytes is the size of one packed Q8_0 activation block.
const q8ActBytes = 36

// packNVQ8Tile is packQ8Tile for W4A8 products with NVFP4 weights: act
// holds the vector's 2*nbv Q8_0 blocks (nbv NVFP4 blocks). A group of size
// s holds, per NVFP4 block, each vector's 64 quants (each Q8_0 block's 32
// in the nibble order of the weight codes: quadwords 0, 2, 1, 3), then the
// s factors d*128 of the first Q8_0 block and the s of the second (exact:
// a power-of-two multiple). It reports a quant of -128 as packQ8Tile.
func packNVQ8Tile(dst []byte, act []q8Act, v, n, nbv int) (minus128 bool) {
	v0, s, used := tileGroup(v, n)
	if s == 0 {
		return false
	}
	k := v - v0
	base := v0 * 2 * nbv * q8ActBytes
	for b := 0; b < nbv; b++ {
		blk := dst[base+b*s*2*q8ActBytes : base+(b+1)*s*2*q8ActBytes]
		for h := 0; h < 2; h++ {
			a := &act[2*b+h]
			q := blk[64*k+32*h : 64*k+32*h+32]
			for i := 0; i < 32; i++ {
				// quadword i/8 of the destination is quadword
				// [0 2 1 3][i/8] of the source.
				src := i%8 + 8*[4]int{0, 2, 1, 3}[i/8]
				q[i] = byte(a.q[src])
				minus128 = minus128 || q[i] == 0x80
			}
			binary.LittleEndian.PutUint32(blk[64*s+4*s*h+4*k:], math.Float32bits(a.d*128))
			if k == used-1 { // the last used vector clears the padding
				clear(blk[64*s+4*s*h+4*used : 64*s+4*s*h+4*s])
			}
		}
		if k == used-1 {
			clear(blk[64*used : 64*s])
		}
	}
	return minus128
}
