package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime/debug"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/gguf"
)

// systemFingerprint is the system_fingerprint of the API's answers. OpenAI
// defines it as the backend configuration the model runs with: with the
// same seed, two answers may differ only if it does. It hashes what decides
// the arithmetic: the model file's content (gguf.Fingerprint, the same
// identity the prefix cache uses: size and hashes, not the path or the
// modification time, which a copy changes), edgellmd's version and the
// commit it was built from, the engine (the CPU, whose kernels give the same
// bits everywhere, or a GPU with its driver), the KV cache type and the NVFP4
// activations. Written as OpenAI writes its own: "fp_" and hex digits. desc
// is the text hashed, for the log.
func systemFingerprint(path, version string, dev engine.DeviceInfo, kvType, activations string) (fp, desc string, err error) {
	model, err := gguf.Fingerprint(path)
	if err != nil {
		return "", "", fmt.Errorf("system fingerprint: %w", err)
	}
	eng := "cpu"
	if dev.Engine != "" && dev.Engine != engine.EngineCPU {
		eng = fmt.Sprintf("%s device=%q driver=%q", dev.Engine, dev.Name, dev.Driver)
	}
	desc = fmt.Sprintf("%s edgellmd=%s%s engine=%s kv=%s activations=%s",
		model, version, buildRevision(), eng, kvType, activations)
	sum := sha256.Sum256([]byte(desc))
	return "fp_" + hex.EncodeToString(sum[:8]), desc, nil
}

// buildRevision is the VCS commit the binary was built from (" rev=…",
// "+dirty" when the tree had changes), "" when the build did not record
// one (go test, go run): a "dev" build says which code it is.
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return " rev=" + rev + dirty
}
