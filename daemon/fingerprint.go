package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime/debug"
)

// systemFingerprint is the system_fingerprint of the API's answers. OpenAI
// defines it as the backend configuration the model runs with: with the
// same seed, two answers may differ only if it does. It hashes the
// engine's fingerprint (engine.Fingerprint: the model file's content, not
// its path or modification time, the engine and its driver, the KV cache
// type and the NVFP4 activations; the prefix cache's identity too) with
// edgellmd's version and the commit it was built from. Written as OpenAI
// writes its own: "fp_" and hex digits. desc is the text hashed, for the
// log.
func systemFingerprint(engineFingerprint, version string) (fp, desc string) {
	desc = fmt.Sprintf("%s edgellmd=%s%s", engineFingerprint, version, buildRevision())
	sum := sha256.Sum256([]byte(desc))
	return "fp_" + hex.EncodeToString(sum[:8]), desc
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
