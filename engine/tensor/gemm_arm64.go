package tensor

// The tile kernels of gemm_arm64.s: MatMul with several vectors runs the
// Q8_0 and NVFP4 W4A8 products one weight row against a tile group of
// eight, four or two vectors (tileGroup, packQ8Tile and packNVQ8Tile in
// gemm.go), on CPUs with SDOT (useNEONDot). Each (row, vector) pair keeps
// its one-vector kernel's lanes and order (q8neon_arm64.s), so the bits
// are the twins' (gemm_arm64_test.go). F16, BF16 and W4A4 have no tiles
// on arm64: their MatMul runs the one-vector paths.
//
// Why no SMMLA (I8MM, hasI8MM), although it does twice SDOT's multiplies
// per instruction: SMMLA multiplies a 2x8 by an 8x2 int8 matrix into a
// 2x2 int32 one, so each output is a sum of eight products, while each
// lane of the twins (ggml's AVX2 order) sums four, the products of quants
// 4l..4l+3 of one block, before its fused multiply-add with that block's
// scale. The integer sums are exact, so eight products could give the
// twins' bits only if they all belonged to one lane of one block, one row
// and one vector; a block has four quants per lane, and any two rows,
// vectors, lanes or blocks are scaled and rounded apart. So four of the
// eight byte slots of each SMMLA output must be zero: then its four
// outputs are four lane sums (two lanes of two vectors), which is what
// one SDOT gives, at the cost of masking the weights into zero-padded
// halves (a ZIP and an AND per eight quants), of interleaving two
// vectors' activations per eight quants, and of a scale vector per
// vector pair where SDOT's lanes take FMLA by element. (Splitting a
// merged sum of two lanes instead takes a second product for one of them
// and a subtraction: three instructions for what two SDOTs do.) Bit-exact
// SMMLA thus runs as many multiply instructions as SDOT plus shuffles,
// and is no faster; TestSMMLALanes (mmla_arm64_test.go) runs both layouts.
//
// Why no BFMMLA or BFDOT (BF16, hasBF16) for BF16 tiles: they sum four
// (BFMMLA) or two (BFDOT) BF16 products per output, while a dotBF16 lane
// adds one product at a time, rounded to nearest even; and with FPCR.EBF
// clear (the reset value, and Go never sets it) their additions round to
// odd and flush subnormals to zero (the Arm ARM's BFDotAdd), so even one
// product per output comes out differently: 1 + 2^-24 is 1 rounded to
// nearest even, 1+2^-23 rounded to odd (TestBFMMLARoundsToOdd). With
// FEAT_EBF16 and FPCR.EBF set, one product per output could match, but
// that is four useful products per instruction, one FMLA's worth, and
// FPCR is per-thread state that Go neither saves nor expects changed.

//go:noescape
func gemmQ8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)

//go:noescape
func gemmQ8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)

//go:noescape
func gemmQ8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)

//go:noescape
func gemmNVFP4Q8Lanes1x8(row *byte, act *byte, nblk int, lanes *[64]float32)

//go:noescape
func gemmNVFP4Q8Lanes1x4(row *byte, act *byte, nblk int, lanes *[32]float32)

//go:noescape
func gemmNVFP4Q8Lanes1x2(row *byte, act *byte, nblk int, lanes *[16]float32)

// gemmQ8Rows sets dst[v*rows+r] = dotQ8(row r, vector v) for the rows
// [lo,hi) of data (rows of rb bytes) and the used vectors of the tile
// group of size s at v0, packed in act (packQ8Tile's layout, the group's
// part).
func gemmQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, used int) {
	nb := rb / q8BlockBytes
	act = act[:s*nb*q8ActBytes]
	if nb == 0 {
		for k := 0; k < used; k++ {
			clear(dst[(v0+k)*rows+lo : (v0+k)*rows+hi])
		}
		return
	}
	var l [64]float32
	for r := lo; r < hi; r++ {
		row := data[r*rb : (r+1)*rb]
		switch s {
		case 8:
			gemmQ8Lanes1x8(&row[0], &act[0], nb, &l)
		case 4:
			gemmQ8Lanes1x4(&row[0], &act[0], nb, (*[32]float32)(l[:32]))
		default:
			gemmQ8Lanes1x2(&row[0], &act[0], nb, (*[16]float32)(l[:16]))
		}
		for k := 0; k < used; k++ {
			t := (*[8]float32)(l[8*k : 8*k+8])
			dst[(v0+k)*rows+r] = hsum8(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7])
		}
	}
}

// gemmNVQ8Rows sets dst[v*rows+r] = dotNVFP4Q8(row r, vector v) (W4A8) for
// the rows [lo,hi) of data (rows of rb bytes) and the used vectors of the
// tile group of size s at v0, packed in act (packNVQ8Tile's layout, the
// group's part).
func gemmNVQ8Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []byte, v0, s, used int) {
	nb := rb / nvBlockBytes
	act = act[:s*nb*2*q8ActBytes]
	if nb == 0 {
		for k := 0; k < used; k++ {
			clear(dst[(v0+k)*rows+lo : (v0+k)*rows+hi])
		}
		return
	}
	var l [64]float32
	for r := lo; r < hi; r++ {
		row := data[r*rb : (r+1)*rb]
		switch s {
		case 8:
			gemmNVFP4Q8Lanes1x8(&row[0], &act[0], nb, &l)
		case 4:
			gemmNVFP4Q8Lanes1x4(&row[0], &act[0], nb, (*[32]float32)(l[:32]))
		default:
			gemmNVFP4Q8Lanes1x2(&row[0], &act[0], nb, (*[16]float32)(l[:16]))
		}
		for k := 0; k < used; k++ {
			t := (*[8]float32)(l[8*k : 8*k+8])
			dst[(v0+k)*rows+r] = hsum8(t[0], t[1], t[4], t[5], t[2], t[3], t[6], t[7])
		}
	}
}

func gemmHalfRows(dst []float32, w []uint16, x []float32, lo, hi, cols, rows, n int, bf bool) {
	panic("tensor: no F16/BF16 tile kernels on arm64")
}

func gemmNVFP4Rows(dst []float32, data []byte, rb, lo, hi, rows int, act []fp4Act, invG []float32, n int) {
	panic("tensor: no W4A4 tile kernels on arm64")
}

// quantizeQ8Vector quantizes the len(dst) blocks of src for the Q8_0 and
// W4A8 products with quantizeActQ8_0.
func quantizeQ8Vector(dst []q8Act, src []float32) {
	src = src[:len(dst)*q8Block]
	for b := range dst {
		quantizeActQ8_0(&dst[b], src[b*q8Block:(b+1)*q8Block], actQ8Flavor)
	}
}
