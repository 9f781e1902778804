package tensor

import "fmt"

// Matrix is a weight matrix of Rows rows of Cols values of type Type, in
// ggml's layout: ne[0] = Cols is the contiguous dimension, each row takes
// Type.RowBytes(Cols) bytes, rows follow one another. Data is usually a slice
// of a memory-mapped GGUF file and is never written.
type Matrix struct {
	Type       DType
	Rows, Cols int
	Data       []byte
	// InputScale is the activation scale of an NVFP4 weight (the file's
	// `<name>.input_scale`, calibrated amax/(6*448)) that W4A4 products
	// quantize activations with; 0 means none: each vector then gets its
	// own (see nvfp4a4.go).
	InputScale float32
}

// NewMatrix checks that data holds exactly rows rows of cols values of type t.
func NewMatrix(t DType, rows, cols int, data []byte) (Matrix, error) {
	if rows < 0 || cols < 0 {
		return Matrix{}, fmt.Errorf("matrix %s %dx%d: negative shape", t, rows, cols)
	}
	rb, err := t.RowBytes(int64(cols))
	if err != nil {
		return Matrix{}, fmt.Errorf("matrix %s %dx%d: %w", t, rows, cols, err)
	}
	if want := int64(rows) * rb; int64(len(data)) != want {
		return Matrix{}, fmt.Errorf("matrix %s %dx%d: need %d bytes, have %d", t, rows, cols, want, len(data))
	}
	return Matrix{Type: t, Rows: rows, Cols: cols, Data: data}, nil
}

// rowBytes is the size of one row; the type is known to be valid.
func (m Matrix) rowBytes() int {
	return m.Cols / m.Type.BlockElems() * m.Type.BlockBytes()
}

// Row returns the raw bytes of row r.
func (m Matrix) row(r int) []byte {
	rb := m.rowBytes()
	return m.Data[r*rb : (r+1)*rb : (r+1)*rb]
}

// RowTo dequantizes row r into dst[:m.Cols] (an embedding lookup). It panics
// when r is out of range, dst is too short or the type has no decoder.
func (m Matrix) RowTo(dst []float32, r int) {
	if r < 0 || r >= m.Rows {
		panic(fmt.Sprintf("tensor: RowTo: row %d out of range [0,%d)", r, m.Rows))
	}
	if len(dst) < m.Cols {
		panic(fmt.Sprintf("tensor: RowTo: dst has %d values, row has %d", len(dst), m.Cols))
	}
	if err := DequantizeRow(m.Type, dst[:m.Cols], m.row(r)); err != nil {
		panic("tensor: RowTo: " + err.Error())
	}
}
