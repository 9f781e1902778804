package gpu

import (
	"fmt"
	"unsafe"

	"github.com/edgellmd/edgellmd/engine/gpu/internal/vk"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// On a device whose memory is the host's (a Jetson, an integrated GPU, or
// Vulkan on the CPU) the weights need not be copied: the pages of the
// mapped model file are imported once as device memory
// (VK_EXT_external_memory_host) and every matrix gets a buffer bound
// inside them at its own offset. A file's tensors are aligned (32 bytes by
// default), which storage buffers accept on the drivers seen so far; a
// tensor whose offset the driver does not accept, or a driver that
// refuses the import, is copied as on a discrete GPU.

// hostSpan is the imported span of a mapped file.
type hostSpan struct {
	dev  *Device
	base uintptr // page-aligned start
	mem  *vk.HostMemory
}

// sharesHostMemory reports whether weights may be used in place.
func (d *Device) sharesHostMemory() bool {
	return d.info.HostImport && (d.info.Kind == KindIntegrated || d.info.Kind == KindCPU)
}

// importSpan imports the pages holding every matrix of ms (slices of one
// mapped file).
func (d *Device) importSpan(ms []tensor.Matrix) (*hostSpan, error) {
	lo, hi := ^uintptr(0), uintptr(0)
	var first unsafe.Pointer // the lowest matrix's data
	for _, m := range ms {
		if len(m.Data) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(&m.Data[0]))
		if p < lo {
			lo, first = p, unsafe.Pointer(&m.Data[0])
		}
		hi = max(hi, p+uintptr(len(m.Data)))
	}
	if hi == 0 {
		return nil, fmt.Errorf("GPU: no weights to import")
	}
	align := uintptr(max(d.d.HostImportAlign, 4096))
	base := lo &^ (align - 1)
	end := (hi + align - 1) &^ (align - 1)
	// base is inside the mapping (which starts on a page at file offset
	// 0) and end within its last page, which the kernel maps whole.
	mem, err := d.d.ImportMemory(unsafe.Add(first, -int(lo-base)), uint64(end-base))
	if err != nil {
		return nil, fmt.Errorf("GPU %s: importing %d MiB of the mapped model file: %w", d.info.Name, (end-base)>>20, err)
	}
	return &hostSpan{dev: d, base: base, mem: mem}, nil
}

// matrix makes m's buffer inside the span.
func (sp *hostSpan) matrix(m tensor.Matrix) (*Matrix, error) {
	d := sp.dev
	rb, err := m.Type.RowBytes(int64(m.Cols))
	if err != nil || len(m.Data) == 0 {
		return nil, fmt.Errorf("GPU: matrix of %d bytes", len(m.Data))
	}
	if uint64(len(m.Data)) > d.info.MaxBuffer {
		return nil, fmt.Errorf("GPU %s: a matrix of %d MiB, more than one binding can address (maxStorageBufferRange %d MiB)", d.info.Name, len(m.Data)>>20, d.info.MaxBuffer>>20)
	}
	// The buffer starts at the memory's alignment below the tensor; the
	// binding starts at the tensor, which needs the (smaller) binding
	// alignment.
	p := unsafe.Pointer(&m.Data[0])
	off := uint64(uintptr(p) - sp.base)
	align := max(sp.mem.Align, 1)
	lead := off % align
	if bind := max(d.d.Props.Limits.MinStorageBufferOffsetAlignment, 4); lead%bind != 0 {
		return nil, fmt.Errorf("GPU: a tensor at %d bytes past an alignment of %d, not a multiple of the binding alignment %d", lead, align, bind)
	}
	b, err := d.d.BufferAt(sp.mem, off-lead, lead+uint64(len(m.Data)), unsafe.Add(p, -int(lead)))
	if err != nil {
		return nil, err
	}
	return &Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, RowBytes: int(rb), InputScale: m.InputScale,
		Buf: &Buffer{dev: d, b: b, size: int64(lead) + int64(len(m.Data))}, Off: int64(lead)}, nil
}

// Free releases the imported memory (after the matrices' buffers).
func (sp *hostSpan) Free() {
	if sp != nil {
		sp.dev.d.FreeHostMemory(sp.mem)
	}
}
