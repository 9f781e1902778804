package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// BundledModel is the file name of the small model shipped with edgellmd, the
// one served when no model path is configured.
const BundledModel = "stories260K.gguf"

// BundledModelPaths are the places looked at, in order, for the bundled
// model when model.path is empty: the .deb's /usr/share/edgellmd/models/, the
// share/ folder beside a relocated install (<dir of the executable>/../share/
// edgellmd/models/), and testdata/models/ under the working directory (a
// source checkout). exe is the running executable's path ("" skips that one).
func BundledModelPaths(exe string) []string {
	paths := []string{filepath.Join("/usr/share/edgellmd/models", BundledModel)}
	if exe != "" {
		paths = append(paths, filepath.Join(filepath.Dir(exe), "..", "share", "edgellmd", "models", BundledModel))
	}
	return append(paths, filepath.Join("testdata", "models", BundledModel))
}

// findModel returns the model file to load: path when set, else the first
// bundled model that exists.
func findModel(path string, candidates []string) (string, error) {
	if path != "" {
		return path, nil
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("model.path: looking for the bundled model: %w", err)
		}
	}
	return "", fmt.Errorf("model.path: not set, and the bundled model is not at %s; set model.path in the config file or pass --model FILE.gguf",
		strings.Join(candidates, ", "))
}

// servedName is the model id clients see: model.name, or the file name
// without its .gguf extension.
func servedName(name, path string) string {
	if name != "" {
		return name
	}
	base := filepath.Base(path)
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".gguf") {
		base = base[:len(base)-len(ext)]
	}
	return base
}
