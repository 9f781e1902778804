package update

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSemverOrder(t *testing.T) {
	// The ordered list from semver.org §11, plus build metadata.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"}
	for i := range order {
		for j := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareVersions(order[i], order[j]); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if compareVersions("1.0.0+a", "1.0.0+b") != 0 {
		t.Error("build metadata changed the order")
	}
	for _, bad := range []string{"", "1", "1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "1.0.0-a..b", "1.0.0/x", "../1.0.0", "1.0.0-ü"} {
		if _, err := parseSemver(bad); err == nil {
			t.Errorf("parseSemver(%q) accepted", bad)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"model.gguf", true}, {"docs/README.txt", true}, {"a/b/c.bin", true}, {".hidden", true},
		{"", false}, {"/abs", false}, {"../x", false}, {"a/../../x", false}, {"a/./b", false}, {"a//b", false},
		{"a/", false}, {".", false}, {"..", false}, {`a\b`, false}, {"a\x00b", false},
		{ManifestName, false}, {SignatureName, false}, {".staging-x/y", false},
	} {
		if err := checkPath(tc.path); (err == nil) != tc.ok {
			t.Errorf("checkPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
}

func TestManifestValidate(t *testing.T) {
	good := func() *Manifest {
		return &Manifest{Format: 1, Name: "m", Version: "1.0.0", Model: "m.gguf",
			Files:       []File{{Path: "m.gguf", Size: 1, SHA256: strings.Repeat("ab", 32)}},
			HealthCheck: HealthCheck{Prompt: "p", Tokens: []int32{1}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Manifest)
		msg  string
	}{
		{"format", func(m *Manifest) { m.Format = 2 }, "format"},
		{"name", func(m *Manifest) { m.Name = " " }, "name"},
		{"version", func(m *Manifest) { m.Version = "1.0" }, "version"},
		{"no files", func(m *Manifest) { m.Files = nil }, "files"},
		{"dup", func(m *Manifest) { m.Files = append(m.Files, m.Files[0]) }, "twice"},
		{"negative", func(m *Manifest) { m.Files[0].Size = -1 }, "negative"},
		{"hash", func(m *Manifest) { m.Files[0].SHA256 = strings.Repeat("AB", 32) }, "sha256"},
		{"file and folder", func(m *Manifest) {
			m.Files = append(m.Files, File{Path: "m.gguf/x", SHA256: strings.Repeat("ab", 32)})
		}, "folder"},
		{"model", func(m *Manifest) { m.Model = "x" }, "model"},
		{"min version", func(m *Manifest) { m.Compatibility.MinVersion = "new" }, "min_edgellmd_version"},
		{"health", func(m *Manifest) { m.HealthCheck.Tokens = nil }, "health_check"},
	} {
		m := good()
		tc.edit(m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.msg)
		}
	}
	if _, err := ParseManifest([]byte(`{"format":1,"extra":true}`)); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestCompatible(t *testing.T) {
	m := &Manifest{Version: "1.0.0", Compatibility: Compatibility{Arch: []string{"arm64"}, MinVersion: "0.4.0", DeviceFamily: []string{"Orin", "Thor"}}}
	for _, tc := range []struct {
		p  Platform
		ok bool
	}{
		{Platform{"arm64", "0.4.0", "Orin"}, true},
		{Platform{"arm64", "v0.5.1", "thor"}, true},
		{Platform{"arm64", "dev", "Orin"}, true},              // development builds skip the version check
		{Platform{"arm64", "0.4.0-12-gabcdef", "Orin"}, true}, // git describe past 0.4.0
		{Platform{"arm64", "0.3.9", "Orin"}, false},
		{Platform{"amd64", "0.4.0", "Orin"}, false},
		{Platform{"arm64", "0.4.0", ""}, false},
		{Platform{"arm64", "0.4.0", "Xavier"}, false},
	} {
		if err := m.Compatible(tc.p); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "k")
	pub, err := GenerateKeyFiles(base)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(base + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi.Mode(), err)
	}
	if _, err := GenerateKeyFiles(base); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second keygen: %v", err)
	}
	priv, err := LoadPrivateKey(base + ".key")
	if err != nil || !priv.Public().(ed25519.PublicKey).Equal(pub) {
		t.Fatalf("private key round trip: %v", err)
	}
	tk, err := LoadPublicKey(base + ".pub")
	if err != nil || !tk.Key.Equal(pub) {
		t.Fatalf("public key round trip: %v", err)
	}
	// Base64 forms: raw public key, seed, 64-byte private key.
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tk, err := LoadPublicKey(write("b64.pub", pub)); err != nil || !tk.Key.Equal(pub) {
		t.Fatalf("base64 public key: %v", err)
	}
	for _, raw := range [][]byte{priv.Seed(), priv} {
		if k, err := LoadPrivateKey(write("b64.key", raw)); err != nil || !k.Equal(priv) {
			t.Fatalf("base64 private key of %d bytes: %v", len(raw), err)
		}
	}
	if _, err := LoadPublicKey(write("short.pub", pub[:31])); err == nil {
		t.Fatal("31-byte public key accepted")
	}
	if _, err := LoadPublicKey(base + ".key"); err == nil {
		t.Fatal("private key accepted as a public key")
	}
	// A trusted folder reads *.pub only, in order.
	tdir := filepath.Join(dir, "trusted.d")
	os.Mkdir(tdir, 0o755)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	os.WriteFile(filepath.Join(tdir, "b.pub"), []byte(base64.StdEncoding.EncodeToString(other)), 0o644)
	data, _ := os.ReadFile(base + ".pub")
	os.WriteFile(filepath.Join(tdir, "a.pub"), data, 0o644)
	os.WriteFile(filepath.Join(tdir, "notes.txt"), []byte("not a key"), 0o644)
	keys, err := LoadTrustedDir(tdir)
	if err != nil || len(keys) != 2 || !keys[0].Key.Equal(pub) || !keys[1].Key.Equal(other) {
		t.Fatalf("trusted dir: %v %v", keys, err)
	}
	if keys, err := LoadTrustedDir(filepath.Join(dir, "absent")); err != nil || len(keys) != 0 {
		t.Fatalf("absent trusted dir: %v %v", keys, err)
	}
}

// FuzzParseManifest: outside input never panics, and what is accepted
// validates again after a round trip.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":1,"name":"m","version":"1.0.0","model":"m.gguf","files":[{"path":"m.gguf","size":1,"sha256":"` +
		strings.Repeat("ab", 32) + `"}],"compatibility":{},"health_check":{"prompt":"p","tokens":[1]}}`))
	f.Add([]byte(`{"format":1,"files":[{"path":"../x"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		for _, file := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(file.Path)) || checkPath(file.Path) != nil {
				t.Fatalf("accepted path %q", file.Path)
			}
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
