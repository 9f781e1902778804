package gpu

// Element-wise operations of the forward pass (shaders add, swiglu,
// scale_bias, sigmoid_mul, split_gated, gather_rows), and the checks the
// ops of this package share. Every shader binds whole buffers and takes
// element offsets in push constants (shaders/README.md).

import "fmt"

// ewGroupSize is the workgroup size of the element-wise shaders: one
// invocation a value.
const ewGroupSize = 256

// ewGroups is the grid over n invocations of ewGroupSize.
func ewGroups(n int) [3]uint32 { return Groups((n + ewGroupSize - 1) / ewGroupSize) }

// ewWord is a range's offset in 32-bit words.
func ewWord(x Range) uint32 { return uint32(x.Off / 4) }

// ewCheck records an error unless x is a 4-aligned range of a live buffer
// that holds need bytes from its offset (within Size, when Size is set).
func (r *Recorder) ewCheck(op, name string, x Range, need int64) bool {
	if r.err != nil || !r.open {
		return false
	}
	switch {
	case x.Buf == nil || x.Buf.b == nil:
		r.err = fmt.Errorf("GPU: %s: %s has no buffer", op, name)
	case x.Off < 0 || x.Off%4 != 0:
		r.err = fmt.Errorf("GPU: %s: %s offset %d is not a multiple of 4", op, name, x.Off)
	case x.Off+need > x.Buf.size || (x.Size > 0 && need > x.Size):
		r.err = fmt.Errorf("GPU: %s: %s needs %d bytes at offset %d; the range has %d, its buffer %d", op, name, need, x.Off, x.Size, x.Buf.size)
	default:
		return true
	}
	return false
}

// ewFail records an error made of format and args, unless one is recorded.
func (r *Recorder) ewFail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("GPU: "+format, args...)
	}
}

// Add records dst[i] += x[i] for i < n (tensor.Add, the same bits).
func (r *Recorder) Add(dst, x Range, n int) {
	if n <= 0 || !r.ewCheck("Add", "dst", dst, 4*int64(n)) || !r.ewCheck("Add", "x", x, 4*int64(n)) {
		return
	}
	r.Dispatch("add", nil, ewGroups(n), []uint32{uint32(n), ewWord(dst), ewWord(x)}, dst.Buf.All(), x.Buf.All())
}

// SwiGLU records dst[i] = silu(gate[i]) * up[i] for i < n (the feed-forward
// activation: tensor.SiLU with ggml's polynomial exp, then tensor.Mul).
// dst may be gate.
func (r *Recorder) SwiGLU(dst, gate, up Range, n int) {
	if n <= 0 || !r.ewCheck("SwiGLU", "dst", dst, 4*int64(n)) || !r.ewCheck("SwiGLU", "gate", gate, 4*int64(n)) ||
		!r.ewCheck("SwiGLU", "up", up, 4*int64(n)) {
		return
	}
	r.Dispatch("swiglu", nil, ewGroups(n), []uint32{uint32(n), ewWord(dst), ewWord(gate), ewWord(up)},
		dst.Buf.All(), gate.Buf.All(), up.Buf.All())
}

// ScaleBias records, on rows rows of cols values, x = x*scale (skipped
// when scale is 0), then x += bias per row (skipped when bias.Buf is nil):
// a model.Linear's Scale and Bias, the CPU's bits.
func (r *Recorder) ScaleBias(x Range, rows, cols int, scale float32, bias Range) {
	n := rows * cols
	if n <= 0 || (scale == 0 && bias.Buf == nil) || !r.ewCheck("ScaleBias", "x", x, 4*int64(n)) {
		return
	}
	hasBias, b := uint32(0), x
	if bias.Buf != nil {
		if !r.ewCheck("ScaleBias", "bias", bias, 4*int64(cols)) {
			return
		}
		hasBias, b = 1, bias
	}
	r.Dispatch("scale_bias", nil, ewGroups(n), []uint32{uint32(n), uint32(cols), ewWord(x), ewWord(b), hasBias, F32(scale)},
		x.Buf.All(), b.Buf.All())
}

// SigmoidMul records x[i] *= sigmoid(gate[i]) for i < n (qwen35's gated
// attention output).
func (r *Recorder) SigmoidMul(x, gate Range, n int) {
	if n <= 0 || !r.ewCheck("SigmoidMul", "x", x, 4*int64(n)) || !r.ewCheck("SigmoidMul", "gate", gate, 4*int64(n)) {
		return
	}
	r.Dispatch("sigmoid_mul", nil, ewGroups(n), []uint32{uint32(n), ewWord(x), ewWord(gate)}, x.Buf.All(), gate.Buf.All())
}

// SplitGated records the split of qwen35's gated query projection qf,
// which holds per token and head [query (headDim) | gate (headDim)], into
// q and gate (tokens*heads*headDim values each), bits copied.
func (r *Recorder) SplitGated(q, gate, qf Range, tokens, heads, headDim int) {
	n := tokens * heads * headDim
	if n <= 0 || !r.ewCheck("SplitGated", "q", q, 4*int64(n)) || !r.ewCheck("SplitGated", "gate", gate, 4*int64(n)) ||
		!r.ewCheck("SplitGated", "qf", qf, 8*int64(n)) {
		return
	}
	r.Dispatch("split_gated", nil, ewGroups(n), []uint32{uint32(n), uint32(headDim), ewWord(q), ewWord(gate), ewWord(qf)},
		q.Buf.All(), gate.Buf.All(), qf.Buf.All())
}

// GatherRows records dst row i = src row idx[i] for i < n (idx: int32s),
// rows of dim float32 values, bits copied. The indices are not checked
// against src.
func (r *Recorder) GatherRows(dst, src Range, idx Range, n, dim int) {
	total := n * dim
	if total <= 0 || !r.ewCheck("GatherRows", "dst", dst, 4*int64(total)) || !r.ewCheck("GatherRows", "src", src, 4*int64(dim)) ||
		!r.ewCheck("GatherRows", "idx", idx, 4*int64(n)) {
		return
	}
	r.Dispatch("gather_rows", nil, ewGroups(total), []uint32{uint32(total), uint32(dim), ewWord(dst), ewWord(src), ewWord(idx)},
		dst.Buf.All(), src.Buf.All(), idx.Buf.All())
}
