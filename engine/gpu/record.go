package gpu

import (
	"embed"
	"fmt"
	"runtime"

	"github.com/edgellmd/edgellmd/engine/gpu/internal/vk"
)

// The committed SPIR-V of every shader (shaders/README.md says how it is made).
//
//go:generate sh shaders/build.sh
//go:embed shaders/*.spv
var spirvFS embed.FS

// pushBytes is the push-constant block every pipeline layout declares:
// 128 bytes is what Vulkan guarantees (maxPushConstantsSize).
const pushBytes = 128

// maxSpec bounds the specialization constants of one pipeline.
const maxSpec = 8

// kernelKey names a pipeline: a comparable value, so that finding one for
// a dispatch does not allocate.
type kernelKey struct {
	name     string
	bindings int
	nspec    int
	spec     [maxSpec]uint32
}

// Kernel is a compute pipeline made from one shader with one set of
// specialization constants.
type Kernel struct {
	name string
	p    *vk.Pipeline
}

// kernel returns the pipeline of shader name with bindings storage buffers
// and specialization constants spec, making it on first use.
func (d *Device) kernel(name string, bindings int, spec []uint32) (*Kernel, error) {
	if len(spec) > maxSpec {
		return nil, fmt.Errorf("GPU: shader %s: %d specialization constants (at most %d)", name, len(spec), maxSpec)
	}
	key := kernelKey{name: name, bindings: bindings, nspec: len(spec)}
	copy(key.spec[:], spec)
	if k, ok := d.kernels[key]; ok {
		return k, nil
	}
	code, err := spirvFS.ReadFile("shaders/" + name + ".spv")
	if err != nil {
		return nil, fmt.Errorf("GPU: shader %s: %w", name, err)
	}
	if len(code)%4 != 0 || len(code) == 0 {
		return nil, fmt.Errorf("GPU: shader %s: %d bytes is not SPIR-V", name, len(code))
	}
	words := make([]uint32, len(code)/4)
	for i := range words {
		words[i] = uint32(code[4*i]) | uint32(code[4*i+1])<<8 | uint32(code[4*i+2])<<16 | uint32(code[4*i+3])<<24
	}
	p, err := d.d.NewPipeline(words, bindings, pushBytes, spec)
	if err != nil {
		return nil, fmt.Errorf("GPU: shader %s: %w", name, err)
	}
	k := &Kernel{name: name, p: p}
	d.kernels[key] = k
	return k, nil
}

// Recorder records one command buffer: dispatches, copies and barriers,
// submitted together (one per forward pass). An error while recording
// (a shader that fails to build, a bad range) sticks and Submit returns it.
type Recorder struct {
	dev    *Device
	ds     *vk.Dispatcher
	pin    runtime.Pinner
	cb     uintptr
	open   bool
	err    error
	ranges [16]vk.Range
	// Dispatches counts the dispatches recorded since Begin.
	Dispatches int
}

func newRecorder(d *Device) *Recorder {
	r := &Recorder{dev: d, ds: new(vk.Dispatcher)}
	// The dispatcher's descriptor writes point into itself: Vulkan reads
	// them through C pointers, so it must not move.
	r.pin.Pin(r.ds)
	return r
}

func (r *Recorder) close() { r.pin.Unpin() }

func (r *Recorder) idle(what string) error {
	if r.open {
		return fmt.Errorf("GPU: %s while a command buffer is being recorded", what)
	}
	return nil
}

// Begin starts recording the device's command buffer and returns its
// recorder; Submit ends it. One recording at a time.
func (d *Device) Begin() *Recorder {
	r := d.rec
	r.err, r.Dispatches = nil, 0
	if r.open {
		r.err = fmt.Errorf("GPU: Begin while a command buffer is being recorded")
		return r
	}
	cb, err := d.d.Begin()
	if err != nil {
		r.err = fmt.Errorf("GPU: %w", err)
		return r
	}
	r.cb, r.open = cb, true
	return r
}

// Groups spreads n workgroups over a grid whose dimensions stay within
// Vulkan's guaranteed 65535; shaders take the linear index as
// gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x and check it
// against n.
func Groups(n int) [3]uint32 {
	x, y := uint32(max(n, 1)), uint32(1)
	for x > 65535 {
		x, y = (x+1)/2, y*2
	}
	return [3]uint32{x, y, 1}
}

// Dispatch records shader name (shaders/<name>.spv) over a grid of
// workgroups with push constants push (at most 32 words) and storage
// buffers bufs (binding i = bufs[i]).
func (r *Recorder) Dispatch(name string, spec []uint32, grid [3]uint32, push []uint32, bufs ...Range) {
	if r.err != nil {
		return
	}
	if !r.open {
		r.err = fmt.Errorf("GPU: Dispatch %s outside Begin/Submit", name)
		return
	}
	if len(push) > pushBytes/4 || len(bufs) > len(r.ranges) {
		r.err = fmt.Errorf("GPU: Dispatch %s: %d push words, %d buffers (at most %d and %d)", name, len(push), len(bufs), pushBytes/4, len(r.ranges))
		return
	}
	k, err := r.dev.kernel(name, len(bufs), spec)
	if err != nil {
		r.err = err
		return
	}
	for i, b := range bufs {
		if b.Buf == nil || b.Buf.b == nil {
			r.err = fmt.Errorf("GPU: Dispatch %s: binding %d has no buffer", name, i)
			return
		}
		if b.Off < 0 || b.Size < 0 || b.Off+b.Size > b.Buf.size || b.Off%4 != 0 {
			r.err = fmt.Errorf("GPU: Dispatch %s: binding %d range [%d,+%d) outside a buffer of %d bytes (or unaligned)", name, i, b.Off, b.Size, b.Buf.size)
			return
		}
		if uint64(b.Size) > r.dev.info.MaxBuffer || (b.Size == 0 && uint64(b.Buf.size-b.Off) > r.dev.info.MaxBuffer) {
			r.err = fmt.Errorf("GPU: Dispatch %s: binding %d of %d MiB exceeds the device's maxStorageBufferRange (%d MiB)", name, i, b.Size>>20, r.dev.info.MaxBuffer>>20)
			return
		}
		r.ranges[i] = b.vk()
		if b.Size == 0 {
			r.ranges[i].Size = uint64(max(b.Buf.size-b.Off, 4))
		}
	}
	r.dev.d.Dispatch(r.cb, r.ds, k.p, push, r.ranges[:len(bufs)], grid[0], grid[1], grid[2])
	r.Dispatches++
}

// Barrier makes every write recorded so far visible to what follows
// (shaders and transfers).
func (r *Recorder) Barrier() {
	if r.err != nil || !r.open {
		return
	}
	const stages = vk.PipelineStageComputeShader | vk.PipelineStageTransfer
	r.dev.d.BarrierWith(r.cb, r.ds, stages, stages,
		vk.AccessShaderWrite|vk.AccessTransferWrite, vk.AccessShaderRead|vk.AccessShaderWrite|vk.AccessTransferRead|vk.AccessTransferWrite)
}

// Copy records a copy of n bytes from src to dst.
func (r *Recorder) Copy(dst, src Range, n int64) {
	if r.err != nil || !r.open || n == 0 {
		return
	}
	if src.Off+n > src.Buf.size || dst.Off+n > dst.Buf.size {
		r.err = fmt.Errorf("GPU: copy of %d bytes overruns a buffer", n)
		return
	}
	r.dev.d.CopyWith(r.cb, r.ds, src.Buf.b.Buf, dst.Buf.b.Buf, uint64(src.Off), uint64(dst.Off), uint64(n))
}

// Fill records setting the words of dst (Size a multiple of 4) to v.
func (r *Recorder) Fill(dst Range, v uint32) {
	if r.err != nil || !r.open || dst.Size == 0 {
		return
	}
	r.dev.d.Fill(r.cb, dst.Buf.b.Buf, uint64(dst.Off), uint64(dst.Size), v)
}

// Submit ends the recording, runs it and waits; it returns the GPU time the
// command buffer took, in seconds, or the first error of the recording.
func (r *Recorder) Submit() (float64, error) {
	if !r.open {
		if r.err != nil {
			return 0, r.err
		}
		return 0, fmt.Errorf("GPU: Submit without Begin")
	}
	r.open = false
	if r.err != nil {
		// End the buffer so that the next Begin can reset it, but do not run it.
		r.dev.d.F.EndCommandBuffer(r.cb)
		return 0, r.err
	}
	// Host reads of host-visible results after the fence need the writes
	// made available to the host.
	r.dev.d.BarrierWith(r.cb, r.ds, vk.PipelineStageComputeShader|vk.PipelineStageTransfer, vk.PipelineStageHost,
		vk.AccessShaderWrite|vk.AccessTransferWrite, vk.AccessHostRead)
	ns, err := r.dev.d.End()
	if err != nil {
		return 0, fmt.Errorf("GPU %s: %w", r.dev.info.Name, err)
	}
	return ns * 1e-9, nil
}
