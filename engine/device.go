package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/gpu"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Engines a model runs on (DeviceInfo.Engine).
const (
	EngineCPU    = "cpu"    // engine/model and engine/tensor: the reference
	EngineVulkan = "vulkan" // engine/gpu
)

// DeviceInfo says what an engine runs its forward passes on.
type DeviceInfo struct {
	Engine   string // EngineCPU or EngineVulkan
	Selector string // what was asked for: "cpu", "auto", "gpu" or "gpu:N"
	Name     string // the GPU as the driver names it, or the CPU's model name
	Kind     string // Vulkan only: "discrete GPU", "integrated GPU", "CPU" (lavapipe)…
	API      string // Vulkan only: the device's Vulkan version
	Driver   string // Vulkan only: driver name and version
	// MemoryTotalBytes is the device's largest device-local heap and
	// MemoryUsedBytes what edgellmd's buffers hold of it (Vulkan only).
	MemoryTotalBytes int64
	MemoryUsedBytes  int64
	// MaxBufferBytes is the largest tensor one binding may address
	// (maxStorageBufferRange; Vulkan only).
	MaxBufferBytes int64
	// Note says why `auto` runs on the CPU: no GPU ("" otherwise).
	Note string
	// MatMul is how the GPU multiplies passes of several rows: "scalar" or
	// "coopmat" (cooperative matrices: tensor cores), with MatMulTiles the
	// tile shapes of the latter ("" on the CPU). CoopMat says whether the
	// device has cooperative matrices at all.
	MatMul      string
	MatMulTiles string
	CoopMat     bool
	// WeightsInPlace: the weight matrices are the mapped file's pages,
	// imported into the device (integrated GPUs), not copies.
	WeightsInPlace bool
}

// DeviceError is a device that was asked for by name (gpu, gpu:N, or a
// selector that is not one) and cannot be used. It is never answered by
// running on the CPU instead.
type DeviceError struct {
	Selector string
	Model    string // the model file
	Err      error
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("device %s cannot be used (model %s): %v", e.Selector, e.Model, e.Err)
}

func (e *DeviceError) Unwrap() error { return e.Err }

// ParseDevice checks a device selector as config and flags take it:
// "auto", "cpu", "gpu" or "gpu:N".
func ParseDevice(s string) error { return gpu.ParseSelector(s) }

// ParseGPUMatMul checks a model.gpu_matmul value: auto, scalar or coopmat.
func ParseGPUMatMul(s string) error { return gpu.ParseMatMul(s) }

// placed is a model on its device: the CPU model itself, or its GPU twin
// with the device it lives on.
type placed struct {
	m    model.Model
	dev  *gpu.Device // nil on the CPU
	info DeviceInfo
}

// place resolves the selector. "" and "cpu" keep the CPU model; "auto"
// moves it to a real GPU when the Vulkan loader sees one (never lavapipe)
// and stays on the CPU, saying why in the log and in Note, when there is
// none; "gpu", "gpu:N", and "auto" with a GPU present, move it or fail with
// a DeviceError naming what is missing.
func place(sel, matmul string, f *gguf.File, cpu model.Model, act tensor.NVFP4Activations, log zerolog.Logger) (placed, error) {
	onCPU := placed{m: cpu, info: DeviceInfo{Engine: EngineCPU, Selector: "cpu", Name: cpuName()}}
	switch sel {
	case "", "cpu":
		return onCPU, nil
	case "auto":
		onCPU.info.Selector = "auto"
		infos, err := gpu.Devices()
		if err != nil {
			onCPU.info.Note = "no GPU: " + err.Error()
			log.Info().Str("device", "auto").Str("reason", onCPU.info.Note).Msg("running on the CPU")
			return onCPU, nil
		}
		anyGPU := false
		for _, in := range infos {
			anyGPU = anyGPU || in.Real()
		}
		if !anyGPU {
			onCPU.info.Note = fmt.Sprintf("no GPU among the %d Vulkan devices (auto never picks Vulkan on the CPU; ask for it with gpu:N)", len(infos))
			log.Info().Str("device", "auto").Str("reason", onCPU.info.Note).Msg("running on the CPU")
			return onCPU, nil
		}
		p, err := onGPU("gpu", matmul, f, cpu, act)
		if err != nil {
			// A GPU is there: running beside it on the CPU would be the
			// silent slow path the operator did not choose.
			return placed{}, &DeviceError{Selector: "auto", Err: fmt.Errorf("%w (a GPU is present, so auto takes it; set model.device: cpu to run on the CPU)", err)}
		}
		p.info.Selector = "auto"
		return p, nil
	}
	if err := gpu.ParseSelector(sel); err != nil {
		return placed{}, &DeviceError{Selector: sel, Err: err}
	}
	p, err := onGPU(sel, matmul, f, cpu, act)
	if err != nil {
		return placed{}, &DeviceError{Selector: sel, Err: err}
	}
	return p, nil
}

func onGPU(sel, matmul string, f *gguf.File, cpu model.Model, act tensor.NVFP4Activations) (placed, error) {
	if matmul == "" {
		matmul = gpu.MatMulAuto
	}
	if err := model.CheckTypes(f, "the GPU engine", gpuRuns, gpu.WeightTypes()+" for matrices (vectors of any type the CPU engine reads)"); err != nil {
		return placed{}, err
	}
	dev, err := gpu.Open(sel)
	if err != nil {
		return placed{}, err
	}
	if err := dev.SetMatMul(matmul); err != nil {
		dev.Close()
		return placed{}, err
	}
	m, err := gpu.Load(dev, cpu, act)
	if err != nil {
		dev.Close()
		return placed{}, err
	}
	in := dev.Info()
	info := DeviceInfo{Engine: EngineVulkan, Selector: sel, Name: in.Name, Kind: string(in.Kind),
		API: in.API, Driver: in.Driver, MemoryTotalBytes: int64(in.MemoryBytes), MaxBufferBytes: int64(in.MaxBuffer),
		MatMul: dev.MatMulPath(), MatMulTiles: dev.CoopMatTiles(), CoopMat: in.CoopMat}
	if w, ok := m.(interface{ WeightsInPlace() (int, int) }); ok {
		imported, copied := w.WeightsInPlace()
		info.WeightsInPlace = imported > 0 && copied == 0
	}
	return placed{m: m, dev: dev, info: info}, nil
}

// gpuRuns says whether the GPU engine runs tensor t: vectors (norms,
// biases, scales) are read by the CPU engine and uploaded as F32, matrices
// must be of a type the shaders multiply with.
func gpuRuns(t *gguf.TensorInfo) bool {
	dims := 0
	for _, d := range t.Shape {
		if d > 1 {
			dims++
		}
	}
	if dims < 2 {
		return tensor.CPUSupports(t.Type)
	}
	return gpu.SupportsWeight(t.Type)
}

// close releases the GPU model and its device.
func (p *placed) close() {
	if p.dev == nil {
		return
	}
	if c, ok := p.m.(interface{ Close() }); ok {
		c.Close()
	}
	p.dev.Close()
	p.dev = nil
}

// MatMulMACs is the multiply-adds of the GPU's matrix products since the
// engine started, on cooperative matrices (tensor cores) and on the scalar
// shaders; zeros on the CPU.
func (e *Engine) MatMulMACs() (coopMat, scalar int64) {
	if e.placed.dev == nil {
		return 0, 0
	}
	m := e.placed.dev.MatMulMACs()
	return m.CoopMat, m.Scalar
}

// Device says what the engine runs on, with the device memory in use now.
// Any goroutine may call it.
func (e *Engine) Device() DeviceInfo {
	info := e.placed.info
	if e.placed.dev != nil {
		info.MemoryUsedBytes = e.placed.dev.MemoryUsed()
	}
	return info
}

// cpuName is the CPU's model name from /proc/cpuinfo ("model name" on x86,
// absent on most arm64 kernels), else the architecture.
func cpuName() string {
	name := runtime.GOARCH + " CPU"
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return name
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return name
}

// IsDeviceError reports whether err is a device that was asked for and
// cannot be used.
func IsDeviceError(err error) bool {
	var de *DeviceError
	return errors.As(err, &de)
}

// cacheNumerics versions the arithmetic behind cached KV rows and recurrent
// states: bump it when a kernel change alters what a forward pass writes,
// so that persisted snapshots of the old arithmetic are never restored.
const cacheNumerics = 2 // 2: F16 rows not a multiple of 8 in ggml_vec_dot_f16's order (8321322); attention_cm's split F16 operands

// Fingerprint names what decides the bits a model file gives when run so:
// the file's content (gguf.Fingerprint: its size and hashes of its header
// and of sampled tensor data, not its path or modification time, so a
// copied or restored file keeps it), the KV cache type, the NVFP4
// activation mode and the engine that computes: the CPU (whose kernels
// give the same bits on every architecture), or a GPU named with its
// driver (shaders round differently from the CPU kernels, and a driver
// update may change a GPU's arithmetic). It is the one identity of a
// model's arithmetic: the prefix cache heads its segment files with it
// (and its numerics version), so a cache written by one engine is never
// restored by another, and the daemon's system_fingerprint hashes it with
// edgellmd's version. Engine.Fingerprint is the loaded engine's.
func Fingerprint(path string, kv tensor.DType, act tensor.NVFP4Activations, dev DeviceInfo) (string, error) {
	model, err := gguf.Fingerprint(path)
	if err != nil {
		return "", err
	}
	return fingerprint(model, kv, act, dev), nil
}

// fingerprint is Fingerprint of a model file whose gguf.Fingerprint is model.
func fingerprint(model string, kv tensor.DType, act tensor.NVFP4Activations, dev DeviceInfo) string {
	eng := "engine=cpu"
	if dev.Engine != "" && dev.Engine != EngineCPU {
		eng = fmt.Sprintf("engine=%s device=%q driver=%q", dev.Engine, dev.Name, dev.Driver)
	}
	return fmt.Sprintf("%s kv=%s activations=%d %s", model, kv, act, eng)
}

// Fingerprint is the engine's Fingerprint, computed at Load.
func (e *Engine) Fingerprint() string { return e.fingerprint }

// cacheFingerprint heads the prefix cache's segment files.
func cacheFingerprint(fp string) string {
	return fmt.Sprintf("edgellmd-prefix-cache numerics=%d %s", cacheNumerics, fp)
}
