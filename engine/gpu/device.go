package gpu

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/edgellmd/edgellmd/engine/gpu/internal/vk"
)

// Kind is what a Vulkan physical device is (VkPhysicalDeviceType).
type Kind string

const (
	KindDiscrete   Kind = "discrete GPU"
	KindIntegrated Kind = "integrated GPU"
	KindVirtual    Kind = "virtual GPU"
	KindCPU        Kind = "CPU" // lavapipe (llvmpipe): Vulkan run on the CPU
	KindOther      Kind = "other"
)

// Info describes one device as the loader reports it.
type Info struct {
	Index       int    // position in Devices(); gpu:N names it
	Name        string // e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
	Kind        Kind
	API         string // Vulkan version the device supports
	Driver      string // driver name and info, when the driver reports them
	MemoryBytes uint64 // the largest device-local heap
	// Opened devices only: the features the engine uses.
	HostImport   bool // VK_EXT_external_memory_host (weights imported from the mapped file)
	IntDot       bool // shaderIntegerDotProduct
	Float64      bool // shaderFloat64: F16-cache attention rounds as llama.cpp's
	SubgroupSize int
	MaxBuffer    uint64 // maxStorageBufferRange: the largest tensor one binding may hold
	// CoopMat: VK_KHR_cooperative_matrix enabled, with vulkanMemoryModel
	// (the memory model glslang's cooperative-matrix SPIR-V declares), so
	// the tensor-core shaders can run. CoopMat2: VK_NV_cooperative_matrix2
	// with flexible dimensions. MatrixShapes lists both extensions' tiles.
	CoopMat, CoopMat2 bool
	MatrixShapes      []MatrixShape
}

// Real reports whether the device is a GPU rather than Vulkan on the CPU:
// `auto` only ever picks a real one.
func (i Info) Real() bool {
	return i.Kind == KindDiscrete || i.Kind == KindIntegrated || i.Kind == KindVirtual
}

func (i Info) String() string {
	s := fmt.Sprintf("gpu:%d %s (%s, Vulkan %s", i.Index, i.Name, i.Kind, i.API)
	if i.Driver != "" {
		s += ", " + i.Driver
	}
	return s + fmt.Sprintf(", %d MiB)", i.MemoryBytes>>20)
}

var kinds = []Kind{KindOther, KindIntegrated, KindDiscrete, KindVirtual, KindCPU}

func describe(in *vk.Instance, i int) Info {
	p := in.Properties(i)
	m := in.Memory(i)
	info := Info{Index: i, Name: vk.GoString(p.DeviceName[:]), API: vk.APIVersionString(p.APIVersion), Kind: KindOther}
	if int(p.DeviceType) < len(kinds) {
		info.Kind = kinds[p.DeviceType]
	}
	for h := uint32(0); h < m.MemoryHeapCount; h++ {
		if m.MemoryHeaps[h].Flags&1 != 0 && m.MemoryHeaps[h].Size > info.MemoryBytes { // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
			info.MemoryBytes = m.MemoryHeaps[h].Size
		}
	}
	return info
}

// Devices lists the Vulkan devices the loader sees. The error says what is
// missing: no loader (install libvulkan1), or no driver.
func Devices() ([]Info, error) {
	in, err := vk.NewInstance()
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out := make([]Info, len(in.Devices))
	for i := range in.Devices {
		out[i] = describe(in, i)
	}
	return out, nil
}

// Device is one opened Vulkan device with its compute queue. Its methods
// are called from one goroutine at a time (the engine worker), except
// Info, which any goroutine may call.
type Device struct {
	in   *vk.Instance
	d    *vk.Device
	info Info

	mu      sync.Mutex
	kernels map[kernelKey]*Kernel
	rec     *Recorder // the one recorder, reused
	stage   *Buffer   // staging for uploads to and downloads from device-local memory
	used    int64     // bytes of device memory in buffers made by this device
	macs    MACs      // multiply-adds of the matrix products, by path

	matmul string    // MatMulScalar or MatMulCoopMat (SetMatMul)
	tiles  coopTiles // the cooperative-matrix path's tiles
	// coopMin is the fewest vectors a product takes the cooperative-matrix
	// path with (mmCoopMinVectors; tests lower it to run every row count).
	coopMin int
	// skinnyMin is the fewest vectors a product takes the skinny
	// cooperative-matrix shaders with, below coopMin (mmSkinnyMinVectors,
	// which leaves them off; the tests and BenchmarkModel27B's
	// coopmat_skinny lower it to 1).
	skinnyMin int
	// skinnyGroups is mmSkinnyMinGroups (tests: 0 keeps every matrix at
	// mmSkinnyRows rows a workgroup).
	skinnyGroups int
	// attCoopMin is the fewest tokens an attention call over an F16 or
	// E4M3 cache takes cooperative matrices with on the cooperative-matrix
	// path (attention_cm.comp), 0 for none: attCoopMinTokens, prefill
	// chunks, where the CPU engine's own attention is its tiled F32 path;
	// decode steps and verify trees keep attention_f16 (the CPU's one-row
	// F16 path, roundings and all) and attention.comp (tests and
	// BenchmarkModel27B's coopmat_fa lower it to 1).
	attCoopMin int
	// attSplit is attention_cm's SPLIT: which F32 operands its f16 tiles
	// take as high and low F16 parts (attSplitQ, attSplitP), attSplitAll
	// (the tests and TestModelAgreement's EDGELLMD_AGREE_ATTENTION change
	// it to measure what each rounding costs).
	attSplit uint32
}

// ParseSelector checks a device selector as config and flags take it:
// "auto", "cpu", "gpu" or "gpu:N".
func ParseSelector(s string) error {
	switch {
	case s == "auto" || s == "cpu" || s == "gpu":
		return nil
	case strings.HasPrefix(s, "gpu:"):
		if n, err := strconv.Atoi(s[4:]); err == nil && n >= 0 {
			return nil
		}
	}
	return fmt.Errorf("device %q: want auto, cpu, gpu or gpu:N (N counts from 0 over the devices `edgellmd devices` lists)", s)
}

// Open opens the device a selector names: "gpu" is the first real GPU
// (discrete before integrated; never Vulkan on the CPU), "gpu:N" the Nth
// device the loader lists, whatever its kind (tests ask for lavapipe so).
// Every failure names what is missing.
func Open(sel string) (*Device, error) {
	if err := ParseSelector(sel); err != nil {
		return nil, err
	}
	if sel == "auto" || sel == "cpu" {
		return nil, fmt.Errorf("device %q is not a GPU selector (the engine resolves it)", sel)
	}
	in, err := vk.NewInstance()
	if err != nil {
		return nil, fmt.Errorf("GPU: %w (install libvulkan1 and the GPU's Vulkan driver)", err)
	}
	infos := make([]Info, len(in.Devices))
	for i := range in.Devices {
		infos[i] = describe(in, i)
	}
	idx := -1
	if sel == "gpu" {
		idx = bestGPU(infos)
		if idx < 0 {
			in.Close()
			return nil, fmt.Errorf("GPU: no GPU among the %d Vulkan devices the loader sees (%s); name one by index with gpu:N", len(infos), listNames(infos))
		}
	} else {
		idx, _ = strconv.Atoi(sel[4:])
		if idx >= len(infos) {
			in.Close()
			return nil, fmt.Errorf("GPU: device %s does not exist: the loader sees %d (%s)", sel, len(infos), listNames(infos))
		}
	}
	d, err := in.Open(idx)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("GPU %s: %w", infos[idx].Name, err)
	}
	for _, need := range []struct {
		ok   bool
		what string
	}{{d.Storage16, "storageBuffer16BitAccess"}, {d.Storage8, "storageBuffer8BitAccess"}, {d.Int8, "shaderInt8"}, {d.Int16, "shaderInt16"}} {
		if !need.ok {
			d.Close()
			in.Close()
			return nil, fmt.Errorf("GPU %s: the driver lacks %s, which the shaders need", infos[idx].Name, need.what)
		}
	}
	info := infos[idx]
	if d.DriverName != "" {
		info.Driver = strings.TrimSpace(d.DriverName + " " + d.DriverInfo)
	}
	info.HostImport, info.IntDot, info.Float64 = d.HostImport, d.IntDot, d.Float64
	info.SubgroupSize = int(d.Subgroup.SubgroupSize)
	info.MaxBuffer = uint64(d.Props.Limits.MaxStorageBufferRange)
	info.CoopMat = d.CoopMat.KHR && d.CoopMat.MemoryModel
	info.CoopMat2 = info.CoopMat && d.CoopMat.NV2 && d.CoopMat.NV2Features[1] != 0
	info.MatrixShapes = matrixShapes(d)
	dev := &Device{in: in, d: d, info: info, kernels: map[kernelKey]*Kernel{}, coopMin: mmCoopMinVectors, skinnyMin: mmSkinnyMinVectors, skinnyGroups: mmSkinnyMinGroups, attCoopMin: attCoopMinTokens, attSplit: attSplitAll}
	dev.rec = newRecorder(dev)
	if err := dev.SetMatMul(MatMulAuto); err != nil { // auto never fails
		dev.Close()
		return nil, err
	}
	return dev, nil
}

func bestGPU(infos []Info) int {
	rank := map[Kind]int{KindDiscrete: 3, KindIntegrated: 2, KindVirtual: 1}
	best, bestRank := -1, 0
	for i, in := range infos {
		if r := rank[in.Kind]; r > bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

func listNames(infos []Info) string {
	if len(infos) == 0 {
		return "none"
	}
	var s []string
	for _, in := range infos {
		s = append(s, fmt.Sprintf("gpu:%d %s, %s", in.Index, in.Name, in.Kind))
	}
	return strings.Join(s, "; ")
}

// HasGPU reports whether the loader sees a real GPU (what `auto` asks).
func HasGPU() bool {
	infos, err := Devices()
	return err == nil && bestGPU(infos) >= 0
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// MemoryUsed is the device memory held by this device's buffers.
func (d *Device) MemoryUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Close waits for the device and releases everything made on it.
func (d *Device) Close() {
	if d.d == nil {
		return
	}
	d.rec.close()
	d.stage.Free()
	for _, k := range d.kernels {
		d.d.Destroy(k.p)
	}
	d.d.Close()
	d.in.Close()
	d.d = nil
	runtime.KeepAlive(d)
}
