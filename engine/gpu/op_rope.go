package gpu

// Rope records the rotary embedding, in place, of tokens rows of heads
// vectors of headDim values: the first ropeDims values of each rotate by
// pairs (k, k+ropeDims/2) when neox, else (2k, 2k+1), by the angles in cs,
// ropeDims floats a token (cos and sin of pair 0, then pair 1, ...) as
// model.Rope.Table writes them on the host. The rotation is engine/model's
// rope.apply: y0 = x0*cos - x1*sin, y1 = x0*sin + x1*cos, each a fused
// multiply-add of the first product.
func (r *Recorder) Rope(x, cs Range, tokens, heads, headDim, ropeDims int, neox bool) {
	n := tokens * heads * (ropeDims / 2)
	if n <= 0 {
		return
	}
	if ropeDims%2 != 0 || ropeDims > headDim {
		r.ewFail("Rope: %d rotated dimensions in heads of %d (want an even number, at most the head)", ropeDims, headDim)
		return
	}
	if !r.ewCheck("Rope", "x", x, 4*int64(tokens*heads*headDim)) || !r.ewCheck("Rope", "cs", cs, 4*int64(tokens*ropeDims)) {
		return
	}
	nx := uint32(0)
	if neox {
		nx = 1
	}
	r.Dispatch("rope", nil, ewGroups(n), []uint32{uint32(n), uint32(heads), uint32(headDim), uint32(ropeDims), nx, ewWord(x), ewWord(cs)},
		x.Buf.All(), cs.Buf.All())
}
