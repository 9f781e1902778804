package vk

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// rawCmds are the function pointers of the hot vkCmd* calls.
type rawCmds struct {
	bindPipeline, pushDescriptorSet, pushConstants, dispatch uintptr
	pipelineBarrier, copyBuffer, fillBuffer                  uintptr
}

// The pointers passed here point into pinned memory (the Dispatcher) or
// are handles: the C side may read them during the call.

func (f *Funcs) cmdBindPipeline(cb uintptr, bp uint32, p uint64) {
	purego.SyscallN(f.raw.bindPipeline, cb, uintptr(bp), uintptr(p))
}

func (f *Funcs) cmdPushDescriptorSet(cb uintptr, bp uint32, layout uint64, set, n uint32, w *WriteDescriptorSet) {
	purego.SyscallN(f.raw.pushDescriptorSet, cb, uintptr(bp), uintptr(layout), uintptr(set), uintptr(n), uintptr(unsafe.Pointer(w)))
}

func (f *Funcs) cmdPushConstants(cb uintptr, layout uint64, stages, off, size uint32, p unsafe.Pointer) {
	purego.SyscallN(f.raw.pushConstants, cb, uintptr(layout), uintptr(stages), uintptr(off), uintptr(size), uintptr(p))
}

func (f *Funcs) cmdDispatch(cb uintptr, x, y, z uint32) {
	purego.SyscallN(f.raw.dispatch, cb, uintptr(x), uintptr(y), uintptr(z))
}

func (f *Funcs) cmdPipelineBarrier(cb uintptr, src, dst uint32, mb *MemoryBarrier) {
	purego.SyscallN(f.raw.pipelineBarrier, cb, uintptr(src), uintptr(dst), 0, 1, uintptr(unsafe.Pointer(mb)), 0, 0, 0, 0)
}

func (f *Funcs) cmdCopyBuffer(cb uintptr, src, dst uint64, r *BufferCopy) {
	purego.SyscallN(f.raw.copyBuffer, cb, uintptr(src), uintptr(dst), 1, uintptr(unsafe.Pointer(r)))
}

func (f *Funcs) cmdFillBuffer(cb uintptr, dst, off, size uint64, data uint32) {
	purego.SyscallN(f.raw.fillBuffer, cb, uintptr(dst), uintptr(off), uintptr(size), uintptr(data))
}
