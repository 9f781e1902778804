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

// cacheFingerprint names what makes a persisted snapshot usable: the model
// file's content (gguf.Fingerprint: its size and hashes of its header and of
// sampled tensor data, not its path or modification time, so a copied or
// restored file keeps its cache), the KV cache type, the NVFP4 activation
// mode, the numerics version and the engine that computed it: the CPU, or a
// GPU named with its driver (shaders round differently from the CPU kernels,
// and a driver update may change a GPU's arithmetic), so a cache written by
// one is never restored by the other.
func cacheFingerprint(path string, kv tensor.DType, act tensor.NVFP4Activations, dev DeviceInfo) (string, error) {
	model, err := gguf.Fingerprint(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("edgellmd-prefix-cache numerics=%d %s kv=%s activations=%d %s",
		cacheNumerics, model, kv, act, engineFingerprint(dev)), nil
}

// engineFingerprint is the engine part of the fingerprint: "engine=cpu"
// (the CPU kernels of every architecture give the same bits), or
// "engine=vulkan device=… driver=…".
func engineFingerprint(dev DeviceInfo) string {
	if dev.Engine == "" || dev.Engine == EngineCPU {
		return "engine=cpu"
	}
	return fmt.Sprintf("engine=%s device=%q driver=%q", dev.Engine, dev.Name, dev.Driver)
}
