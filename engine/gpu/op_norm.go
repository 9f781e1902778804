package gpu

// RMSNorm records dst = x / sqrt(mean(x^2) + eps) * w on rows rows of dim
// values (tensor.RMSNorm; w.Buf nil: no weight), one workgroup a row. The
// sum of squares is kept to about float64's precision (shaders/rmsnorm.comp
// says how); the square root and division are the GPU's, within a few ulp
// of the CPU's. dst may be x.
func (r *Recorder) RMSNorm(dst, x, w Range, rows, dim int, eps float32) {
	n := int64(rows) * int64(dim)
	if n <= 0 || !r.ewCheck("RMSNorm", "dst", dst, 4*n) || !r.ewCheck("RMSNorm", "x", x, 4*n) {
		return
	}
	hasW, wb := uint32(0), x
	if w.Buf != nil {
		if !r.ewCheck("RMSNorm", "w", w, 4*int64(dim)) {
			return
		}
		hasW, wb = 1, w
	}
	r.Dispatch("rmsnorm", nil, Groups(rows), []uint32{uint32(rows), uint32(dim), ewWord(dst), ewWord(x), ewWord(wb), hasW, F32(eps)},
		dst.Buf.All(), x.Buf.All(), wb.Buf.All())
}
