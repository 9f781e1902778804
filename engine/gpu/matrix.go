package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Matrix is a weight matrix resident on the device, in ggml's layout
// exactly as the file stores it (rows of Cols values of Type, each row
// RowBytes bytes, rows one after the other), so that shaders read the same
// bytes the CPU kernels read.
type Matrix struct {
	Type       tensor.DType
	Rows, Cols int
	RowBytes   int
	InputScale float32 // NVFP4 activation scale (tensor.Matrix.InputScale); 0: per vector
	Buf        *Buffer // the matrix, from byte Off
	// Off is where the matrix starts in Buf: 0 for a copy; for weights
	// used in place, the tensor's offset past the buffer's alignment, a
	// multiple of the device's minStorageBufferOffsetAlignment.
	Off int64
}

// binding is the matrix as a shader binding: its bytes alone, so that a
// shader indexes the matrix from 0.
func (m *Matrix) binding() Range {
	return Range{Buf: m.Buf, Off: m.Off, Size: int64(m.Rows) * int64(m.RowBytes)}
}

// UploadMatrix copies m's bytes (usually a slice of the mapped model file)
// into a device buffer of its own. A matrix larger than one binding may
// address (maxStorageBufferRange: 128 MiB on lavapipe, 4 GiB on NVIDIA) is
// an error naming it.
func (d *Device) UploadMatrix(name string, m tensor.Matrix) (*Matrix, error) {
	rb, err := m.Type.RowBytes(int64(m.Cols))
	if err != nil {
		return nil, fmt.Errorf("GPU: matrix %s: %w", name, err)
	}
	size := int64(len(m.Data))
	if size != int64(m.Rows)*rb {
		return nil, fmt.Errorf("GPU: matrix %s: %d bytes for %d rows of %d", name, size, m.Rows, rb)
	}
	if uint64(size) > d.info.MaxBuffer {
		return nil, fmt.Errorf("GPU %s: matrix %s is %d MiB, more than one binding can address (maxStorageBufferRange %d MiB)",
			d.info.Name, name, size>>20, d.info.MaxBuffer>>20)
	}
	b, err := d.NewBuffer(size)
	if err != nil {
		return nil, fmt.Errorf("matrix %s: %w", name, err)
	}
	if err := d.Upload(b.All(), m.Data); err != nil {
		b.Free()
		return nil, fmt.Errorf("matrix %s: %w", name, err)
	}
	return &Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, RowBytes: int(rb), InputScale: m.InputScale, Buf: b}, nil
}

// Free releases the matrix's buffer.
func (m *Matrix) Free() {
	if m != nil {
		m.Buf.Free()
	}
}

// UploadF32 copies a float32 vector into a new device buffer (norm
// weights, biases, conv taps).
func (d *Device) UploadF32(v []float32) (*Buffer, error) {
	b, err := d.NewBuffer(int64(4 * len(v)))
	if err != nil {
		return nil, err
	}
	if err := d.Upload(b.All(), f32Bytes(v)); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// F32 is the bits of a float32, for push constants.
func F32(x float32) uint32 { return mathFloat32bits(x) }
