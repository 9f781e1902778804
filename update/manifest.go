package update

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// Names of the bundle's first two tar entries; no bundle file may use them.
const (
	ManifestName  = "manifest.json"
	SignatureName = "manifest.sig"
)

// maxManifestBytes bounds manifest.json: it is read before it is trusted.
const maxManifestBytes = 1 << 20

// Manifest describes a bundle. It is signed as the exact bytes of
// manifest.json.
type Manifest struct {
	Format  int    `json:"format"`
	Name    string `json:"name"`
	Version string `json:"version"` // SemVer 2.0.0, no leading "v"; also the bundle's folder name
	// Model is the GGUF file among Files that the daemon loads.
	Model         string        `json:"model"`
	Files         []File        `json:"files"`
	Compatibility Compatibility `json:"compatibility"`
	HealthCheck   HealthCheck   `json:"health_check"`
}

// File is one file of a bundle, by its slash-separated path inside the
// bundle.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// Compatibility says where a bundle may be installed. Empty lists mean any.
type Compatibility struct {
	Arch []string `json:"arch,omitempty"` // Go GOARCH names: "arm64", "amd64"
	// MinVersion is the oldest edgellmd release that can serve the bundle.
	MinVersion string `json:"min_edgellmd_version,omitempty"`
	// DeviceFamily lists Jetson product lines ("Orin", "Thor"; power.Board.Family),
	// compared without regard to case. A machine that is not a Jetson has family "".
	DeviceFamily []string `json:"device_family,omitempty"`
}

// HealthCheck is the bundle's self test: greedy decoding of Prompt (BOS
// added where the model wants it, special tokens read as plain text) must
// give exactly Tokens, end-of-generation tokens included.
type HealthCheck struct {
	Prompt string  `json:"prompt"`
	Tokens []int32 `json:"tokens"`
}

// ParseManifest decodes and validates manifest.json. Unknown fields are an
// error: a manifest is signed, so what it says must mean something here.
func ParseManifest(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: data after the JSON object", ManifestName)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the fields a bundle needs and that every path is a plain
// relative path that stays inside the bundle.
func (m *Manifest) Validate() error {
	if m.Format != FormatVersion {
		return fmt.Errorf("%s: format %d is not supported (want %d)", ManifestName, m.Format, FormatVersion)
	}
	if strings.TrimSpace(m.Name) == "" {
		return fmt.Errorf("%s: name is empty", ManifestName)
	}
	if _, err := parseSemver(m.Version); err != nil {
		return fmt.Errorf("%s: version: %w", ManifestName, err)
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("%s: files is empty", ManifestName)
	}
	seen := map[string]bool{}
	for i, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("%s: files[%d].path: %w", ManifestName, i, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("%s: files[%d].path %q is listed twice", ManifestName, i, f.Path)
		}
		seen[f.Path] = true
		if f.Size < 0 {
			return fmt.Errorf("%s: files[%d] (%s): size %d is negative", ManifestName, i, f.Path, f.Size)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || strings.ToLower(f.SHA256) != f.SHA256 {
			return fmt.Errorf("%s: files[%d] (%s): sha256 %q is not 64 lowercase hex digits", ManifestName, i, f.Path, f.SHA256)
		}
	}
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("%s: %q is both a file and the folder of %q", ManifestName, d, p)
			}
		}
	}
	if !seen[m.Model] {
		return fmt.Errorf("%s: model %q is not one of the files", ManifestName, m.Model)
	}
	if c := m.Compatibility.MinVersion; c != "" {
		if _, err := parseSemver(c); err != nil {
			return fmt.Errorf("%s: compatibility.min_edgellmd_version: %w", ManifestName, err)
		}
	}
	if m.HealthCheck.Prompt == "" || len(m.HealthCheck.Tokens) == 0 {
		return fmt.Errorf("%s: health_check needs a prompt and its expected tokens", ManifestName)
	}
	return nil
}

// totalBytes is the sum of the file sizes.
func (m *Manifest) totalBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// checkPath accepts a clean, relative, slash-separated path with no "." or
// ".." element, no backslash or NUL, and not one of the reserved names.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > 1024:
		return fmt.Errorf("path of %d bytes is too long", len(p))
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("%q contains a backslash or NUL", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not a clean path (want %q)", p, path.Clean(p))
	case !filepath.IsLocal(filepath.FromSlash(p)):
		return fmt.Errorf("%q leaves the bundle", p)
	case p == ManifestName || p == SignatureName:
		return fmt.Errorf("%q is a reserved name", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "." || el == ".." || strings.HasPrefix(el, ".staging-") {
			return fmt.Errorf("%q has a %q element", p, el)
		}
	}
	return nil
}

// Compatible reports whether the bundle may be installed on p.
func (m *Manifest) Compatible(p Platform) error {
	c := m.Compatibility
	if len(c.Arch) > 0 && !slices.Contains(c.Arch, p.Arch) {
		return fmt.Errorf("%w: bundle %s is for %s, this machine is %s", ErrIncompatible, m.Version, strings.Join(c.Arch, ", "), p.Arch)
	}
	if len(c.DeviceFamily) > 0 && !slices.ContainsFunc(c.DeviceFamily, func(f string) bool { return strings.EqualFold(f, p.DeviceFamily) }) {
		fam := p.DeviceFamily
		if fam == "" {
			fam = "not a Jetson"
		}
		return fmt.Errorf("%w: bundle %s is for device family %s, this machine is %s", ErrIncompatible, m.Version, strings.Join(c.DeviceFamily, ", "), fam)
	}
	if c.MinVersion != "" && p.Version != "" {
		have, err := parseSemver(strings.TrimPrefix(p.Version, "v"))
		if err != nil {
			return nil // a development build ("dev"): no release to compare with
		}
		want, _ := parseSemver(c.MinVersion)
		// Compare releases only: 0.4.0-3-gabc (git describe) is past 0.4.0.
		have.pre, want.pre = nil, nil
		if have.compare(want) < 0 {
			return fmt.Errorf("%w: bundle %s needs edgellmd %s or newer, this is %s", ErrIncompatible, m.Version, c.MinVersion, p.Version)
		}
	}
	return nil
}

// Platform is what a bundle's compatibility is checked against.
type Platform struct {
	Arch         string // runtime.GOARCH
	Version      string // edgellmd's version; "" or a non-SemVer one ("dev") skips the check
	DeviceFamily string // power.Board.Family; "" when not a Jetson
}
