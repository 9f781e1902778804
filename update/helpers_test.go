package update

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// testModel is the project's real test model.
const testModel = "../testdata/models/stories260K.gguf"

type keyPair struct {
	priv    ed25519.PrivateKey
	pub     TrustedKey
	pubPath string
}

// newKeys writes a key pair with GenerateKeyFiles and reads it back.
func newKeys(t *testing.T) keyPair {
	t.Helper()
	base := filepath.Join(t.TempDir(), "signer")
	if _, err := GenerateKeyFiles(base); err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(base + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(base + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{priv, pub, base + ".pub"}
}

// bundleDir writes a bundle's source folder: a model file (a copy of the
// real one, or given bytes) and a README.
func bundleDir(t *testing.T, model []byte) string {
	t.Helper()
	dir := t.TempDir()
	if model == nil {
		var err error
		if model, err = os.ReadFile(testModel); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "model.gguf"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "README.txt"), []byte("bundle notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stubHealth is a health check that passes for tokens {1, 2, 3}: tests
// that are not about the model use it, so they need no engine.
var stubHealth = HealthCheck{Prompt: "stub", Tokens: []int32{1, 2, 3}}

func stubCheck(_ context.Context, modelPath string, hc HealthCheck) error {
	if _, err := os.Stat(modelPath); err != nil {
		return err
	}
	if len(hc.Tokens) != 3 || hc.Tokens[0] != 1 {
		return errors.New("stub check: unexpected tokens")
	}
	return nil
}

// pack packs dir as version with the stub health check unless hc is given.
func pack(t *testing.T, kp keyPair, dir, version string, hc *HealthCheck) []byte {
	t.Helper()
	opt := PackOptions{Name: "test-model", Version: version, HealthCheck: stubHealth}
	if hc != nil {
		opt.HealthCheck = *hc
	}
	var buf bytes.Buffer
	if _, err := Pack(&buf, dir, opt, kp.priv); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testOptions(stateDir string, kp keyPair) Options {
	return Options{StateDir: stateDir, TrustedKeys: []TrustedKey{kp.pub}, Check: stubCheck,
		Platform: Platform{Arch: runtime.GOARCH, Version: "1.0.0"}, ReserveBytes: -1, Log: zerolog.Nop()}
}

func mustApply(t *testing.T, bundle []byte, opt Options) Result {
	t.Helper()
	res, err := Apply(context.Background(), bytes.NewReader(bundle), opt)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if !res.Committed {
		t.Fatalf("apply: not committed: %+v", res)
	}
	return res
}

// entry is one tar entry of a hand-made bundle.
type entry struct {
	name     string
	data     []byte
	typeflag byte
	link     string
	size     int64 // header size when it should differ from len(data); -1 = len(data)
}

func writeTar(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typeflag, Linkname: e.link, Mode: 0o644, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTar splits a bundle into entries (regular files only).
func readTar(t *testing.T, bundle []byte) []entry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(bundle))
	var out []entry
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var b bytes.Buffer
		b.ReadFrom(tr)
		out = append(out, entry{name: h.Name, data: b.Bytes()})
	}
	return out
}

// signed returns manifest bytes and their signature.
func signed(t *testing.T, kp keyPair, m *Manifest) ([]byte, []byte) {
	t.Helper()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data, ed25519.Sign(kp.priv, data)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// snapshotTree lists every path under dir with its type, size, hash or
// link target: "nothing changed on disk" compares two of them. The lock
// file is left out (it is created by the first Apply and never changes).
func snapshotTree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == lockName {
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, rel+" -> "+target)
		case d.IsDir():
			lines = append(lines, rel+"/")
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, rel+" "+sha(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// wantCurrent checks that Recover leaves version current and that its
// model file is intact (hash as the manifest says).
func wantCurrent(t *testing.T, stateDir, version string) {
	t.Helper()
	model, err := Recover(stateDir, zerolog.Nop())
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	link, err := readCurrent(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if link != version {
		t.Fatalf("current -> %q, want %q", link, version)
	}
	if version == "" {
		if model != "" {
			t.Fatalf("recover returned %q with no bundle installed", model)
		}
		return
	}
	want := filepath.Join(stateDir, bundlesName, version, "model.gguf")
	if model != want {
		t.Fatalf("recover returned %q, want %q", model, want)
	}
	m, err := checkBundle(stateDir, version)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(stateDir, currentName, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if sha(data) != f.SHA256 {
			t.Fatalf("%s of bundle %s: hash differs from its manifest", f.Path, version)
		}
	}
	st, _, err := readState(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Trial != nil || st.Current != version {
		t.Fatalf("state after recover: %+v", st)
	}
}
