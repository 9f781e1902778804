package update

import (
	"archive/tar"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// PackOptions say what goes into a bundle's manifest besides its files.
type PackOptions struct {
	Name    string
	Version string
	// Model is the model file's path inside dir; "" picks the only *.gguf.
	Model         string
	Compatibility Compatibility
	HealthCheck   HealthCheck
}

// Pack writes a signed bundle of every regular file under dir to w and
// returns its manifest. Symbolic links and other special files under dir
// are an error, not silently left out.
func Pack(w io.Writer, dir string, opt PackOptions, key ed25519.PrivateKey) (*Manifest, error) {
	files, err := scanDir(dir)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Format: FormatVersion, Name: opt.Name, Version: strings.TrimPrefix(opt.Version, "v"),
		Model: opt.Model, Files: files, Compatibility: opt.Compatibility, HealthCheck: opt.HealthCheck}
	if m.Model == "" {
		m.Model, err = FindModel(dir)
		if err != nil {
			return nil, err
		}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	sig := ed25519.Sign(key, data)

	tw := tar.NewWriter(w)
	hdr := func(name string, size int64) *tar.Header {
		// Fixed owner and time: the same inputs give the same bundle.
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	}
	for _, e := range []struct {
		name string
		data []byte
	}{{ManifestName, data}, {SignatureName, sig}} {
		if err := tw.WriteHeader(hdr(e.name, int64(len(e.data)))); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	for _, f := range m.Files {
		if err := tw.WriteHeader(hdr(f.Path, f.Size)); err != nil {
			return nil, err
		}
		if err := copyChecked(tw, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return m, nil
}

// copyChecked copies a file into the bundle and checks it is still what
// the manifest says (it was hashed in a first pass).
func copyChecked(w io.Writer, path string, f File) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(in, f.Size))
	if err != nil {
		return fmt.Errorf("pack %s: %w", path, err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("pack %s: the file changed while it was packed", path)
	}
	return nil
}

// scanDir lists and hashes the regular files under dir, sorted by path.
func scanDir(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("pack %s: not a regular file (%s); bundles hold regular files only", p, d.Type())
		}
		f, err := hashFile(p)
		if err != nil {
			return err
		}
		f.Path = filepath.ToSlash(rel)
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("pack %s: %w", p, err)
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("pack %s: no files", dir)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func hashFile(path string) (File, error) {
	in, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return File{}, fmt.Errorf("hash %s: %w", path, err)
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// FindModel returns the only *.gguf file directly in dir.
func FindModel(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil {
		return "", err
	}
	if len(matches) != 1 {
		return "", fmt.Errorf("%s holds %d .gguf files: name the model file", dir, len(matches))
	}
	return filepath.Base(matches[0]), nil
}
