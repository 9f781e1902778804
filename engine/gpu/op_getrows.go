package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// getRowsType is shaders/getrows.comp's TYPE for each weight type it decodes.
var getRowsType = map[tensor.DType]uint32{tensor.F32: 0, tensor.F16: 1, tensor.BF16: 2, tensor.Q8_0: 3, tensor.NVFP4: 4}

// GetRows records dst[i*m.Cols:(i+1)*m.Cols] = row ids[i] of m dequantized
// to F32 (ids: n int32), the same bits as tensor.Matrix.RowTo, for every
// type the GPU engine runs (WeightTypes; the block types through
// getrows_kquant): an embedding lookup. An id outside [0, m.Rows) gives a
// row of zeros (the CPU panics; the ids come from the device, which cannot
// say so). Errors stick in the recorder.
func (r *Recorder) GetRows(dst Range, m *Matrix, ids Range, n int) {
	if r.err != nil {
		return
	}
	if err := r.getRows(dst, m, ids, n); err != nil {
		r.err = fmt.Errorf("GPU: GetRows: %w", err)
	}
}

func (r *Recorder) getRows(dst Range, m *Matrix, ids Range, n int) error {
	if m == nil || m.Buf == nil || m.Buf.b == nil {
		return fmt.Errorf("no matrix")
	}
	typ, ok := getRowsType[m.Type]
	shader := "getrows"
	if k, kq := kqTypes[m.Type]; kq {
		typ, ok, shader = k.getRows, true, "getrows_kquant"
	}
	if !ok {
		return fmt.Errorf("type %s is not supported (want %s)", m.Type, WeightTypes())
	}
	bad := func(format string, a ...any) error { // names the lookup; made on errors only
		return fmt.Errorf("%d rows of a %s matrix %dx%d: %s", n, m.Type, m.Rows, m.Cols, fmt.Sprintf(format, a...))
	}
	if rb, err := m.Type.RowBytes(int64(m.Cols)); err != nil || m.Rows < 0 || int64(m.RowBytes) != rb {
		return bad("bad shape (columns a multiple of %d, rows of %d bytes)", m.Type.BlockElems(), rb)
	}
	if m.Off+int64(m.Rows)*int64(m.RowBytes) > m.Buf.size {
		return bad("%d bytes of weights, the buffer has %d", int64(m.Rows)*int64(m.RowBytes), m.Buf.size)
	}
	if n < 0 || int64(n)*int64(m.Cols) > 1<<32-1 {
		return bad("bad row count")
	}
	if n == 0 || m.Cols == 0 {
		return nil
	}
	dBytes := 4 * int64(n) * int64(m.Cols)
	ioff, err := mmCheckRange("ids", ids, 4*int64(n))
	if err != nil {
		return bad("%v", err)
	}
	doff, err := mmCheckRange("dst", dst, dBytes)
	if err != nil {
		return bad("%v", err)
	}
	if mmOverlap(dst, ids, dBytes, 4*int64(n)) {
		return bad("dst and ids overlap")
	}
	vals := n * m.Cols
	r.Dispatch(shader, []uint32{mmConvWG, typ}, Groups((vals+mmConvWG-1)/mmConvWG),
		[]uint32{uint32(n), uint32(m.Cols), uint32(m.Rows), ioff, doff}, m.binding(), Range{Buf: ids.Buf}, Range{Buf: dst.Buf})
	return nil
}
