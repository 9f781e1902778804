package engine

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// cacheNumerics versions the arithmetic behind cached KV rows and recurrent
// states: bump it when a kernel change alters what a forward pass writes,
// so that persisted snapshots of the old arithmetic are never restored.
const cacheNumerics = 1

// cacheFingerprint names what makes a persisted snapshot usable: the model
// file (its size, modification time and a SHA-256 of its header, metadata
// and tensor table, which a re-quantized or converted file changes), the KV
// cache type, the NVFP4 activation mode, the numerics version and the
// engine that computed it: the CPU, or a GPU named with its driver (shaders
// round differently from the CPU kernels, and a driver update may change a
// GPU's arithmetic), so a cache written by one is never restored by the
// other. Hashing the whole file would take seconds for a large model at
// every start.
func cacheFingerprint(path string, dataOffset int64, kv tensor.DType, act tensor.NVFP4Activations, dev DeviceInfo) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, dataOffset)); err != nil {
		return "", fmt.Errorf("%s: fingerprint: %w", path, err)
	}
	return fmt.Sprintf("edgellmd-prefix-cache numerics=%d model=%x size=%d mtime=%d kv=%s activations=%d %s",
		cacheNumerics, h.Sum(nil)[:16], st.Size(), st.ModTime().UnixNano(), kv, act, engineFingerprint(dev)), nil
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
