package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/gpu/internal/vk"
)

// Buffer is a storage buffer in device memory (device-local; on a device
// whose memory is the host's, such as lavapipe or a Jetson, that memory is
// also host-visible and Bytes maps it).
type Buffer struct {
	dev  *Device
	b    *vk.Buffer
	size int64
}

// Range is a byte range of a buffer, as a shader binding sees it.
type Range struct {
	Buf       *Buffer
	Off, Size int64
}

// minBuffer is the size of an empty buffer: Vulkan has no zero-size ones.
const minBuffer = 16

// NewBuffer makes a device-local buffer of size bytes.
func (d *Device) NewBuffer(size int64) (*Buffer, error) { return d.newBuffer(size, false) }

// NewHostBuffer makes a host-visible, coherent buffer of size bytes, which
// Bytes maps (parameters written each step, results read back).
func (d *Device) NewHostBuffer(size int64) (*Buffer, error) { return d.newBuffer(size, true) }

func (d *Device) newBuffer(size int64, host bool) (*Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("GPU: buffer of %d bytes", size)
	}
	alloc := max(size, minBuffer)
	alloc = (alloc + 15) &^ 15
	b, err := d.d.NewBuffer(uint64(alloc), host)
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %d MiB buffer: %w (device memory %d MiB, %d MiB in use by edgellmd)",
			d.info.Name, alloc>>20, err, d.info.MemoryBytes>>20, d.MemoryUsed()>>20)
	}
	d.mu.Lock()
	d.used += alloc
	d.mu.Unlock()
	return &Buffer{dev: d, b: b, size: size}, nil
}

// Size is the buffer's size in bytes, as asked for.
func (b *Buffer) Size() int64 { return b.size }

// Bytes views a host-visible buffer; nil when the memory is not mapped.
func (b *Buffer) Bytes() []byte {
	if v := b.b.Bytes(); v != nil {
		return v[:b.size]
	}
	return nil
}

// All is the whole buffer as a range.
func (b *Buffer) All() Range { return Range{Buf: b, Size: b.size} }

// Slice is size bytes of the buffer from off.
func (b *Buffer) Slice(off, size int64) Range { return Range{Buf: b, Off: off, Size: size} }

// Free releases the buffer.
func (b *Buffer) Free() {
	if b == nil || b.b == nil {
		return
	}
	d := b.dev
	d.d.Free(b.b)
	if !b.b.Shared { // imported file pages are not device allocations
		d.mu.Lock()
		d.used -= int64(b.b.Size)
		d.mu.Unlock()
	}
	b.b = nil
}

func (r Range) vk() vk.Range {
	return vk.Range{B: r.Buf.b, Offset: uint64(r.Off), Size: uint64(r.Size)}
}

// stagingBytes bounds one staging copy: uploads of larger tensors go in
// pieces.
const stagingBytes = 32 << 20

// Upload copies data into dst (len(data) bytes from dst.Off): directly when
// the buffer is mapped, else through a staging buffer.
func (d *Device) Upload(dst Range, data []byte) error {
	if err := d.rec.idle("Upload"); err != nil {
		return err
	}
	if int64(len(data)) > dst.Buf.size-dst.Off {
		return fmt.Errorf("GPU: upload of %d bytes at %d overruns a buffer of %d", len(data), dst.Off, dst.Buf.size)
	}
	if m := dst.Buf.Bytes(); m != nil {
		copy(m[dst.Off:], data)
		return nil
	}
	st, err := d.staging(min(int64(len(data)), stagingBytes))
	if err != nil {
		return err
	}
	for off := int64(0); off < int64(len(data)); off += stagingBytes {
		n := min(int64(len(data))-off, stagingBytes)
		copy(st.Bytes(), data[off:off+n])
		if _, err := d.d.Run(func(cb uintptr) {
			d.d.F.CmdCopyBuffer(cb, st.b.Buf, dst.Buf.b.Buf, 1, &vk.BufferCopy{SrcOffset: 0, DstOffset: uint64(dst.Off + off), Size: uint64(n)})
		}); err != nil {
			return fmt.Errorf("GPU upload: %w", err)
		}
	}
	return nil
}

// Download copies len(out) bytes of src (from src.Off) into out.
func (d *Device) Download(src Range, out []byte) error {
	if err := d.rec.idle("Download"); err != nil {
		return err
	}
	if int64(len(out)) > src.Buf.size-src.Off {
		return fmt.Errorf("GPU: download of %d bytes at %d overruns a buffer of %d", len(out), src.Off, src.Buf.size)
	}
	if m := src.Buf.Bytes(); m != nil {
		copy(out, m[src.Off:])
		return nil
	}
	st, err := d.staging(min(int64(len(out)), stagingBytes))
	if err != nil {
		return err
	}
	for off := int64(0); off < int64(len(out)); off += stagingBytes {
		n := min(int64(len(out))-off, stagingBytes)
		if _, err := d.d.Run(func(cb uintptr) {
			d.d.F.CmdCopyBuffer(cb, src.Buf.b.Buf, st.b.Buf, 1, &vk.BufferCopy{SrcOffset: uint64(src.Off + off), Size: uint64(n)})
			d.d.Barrier(cb, vk.PipelineStageTransfer, vk.PipelineStageHost, vk.AccessTransferWrite, vk.AccessHostRead)
		}); err != nil {
			return fmt.Errorf("GPU download: %w", err)
		}
		copy(out[off:off+n], st.Bytes())
	}
	return nil
}

// staging returns the device's staging buffer, grown to at least n bytes.
func (d *Device) staging(n int64) (*Buffer, error) {
	if d.stage != nil && d.stage.size >= n {
		return d.stage, nil
	}
	d.stage.Free()
	d.stage = nil
	b, err := d.NewHostBuffer(n)
	if err != nil {
		return nil, err
	}
	d.stage = b
	return b, nil
}
