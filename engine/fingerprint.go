package engine

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// cacheNumerics versions the arithmetic behind cached KV rows and recurrent
// states: bump it when a kernel change alters what a forward pass writes,
// so that persisted snapshots of the old arithmetic are never restored.
const cacheNumerics = 1

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
	eng := "engine=cpu"
	if dev.Engine != "" && dev.Engine != EngineCPU {
		eng = fmt.Sprintf("engine=%s device=%q driver=%q", dev.Engine, dev.Name, dev.Driver)
	}
	return fmt.Sprintf("%s kv=%s activations=%d %s", model, kv, act, eng), nil
}

// Fingerprint is the engine's Fingerprint, computed at Load.
func (e *Engine) Fingerprint() string { return e.fingerprint }

// cacheFingerprint heads the prefix cache's segment files.
func cacheFingerprint(fp string) string {
	return fmt.Sprintf("edgellmd-prefix-cache numerics=%d %s", cacheNumerics, fp)
}
