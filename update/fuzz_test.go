package update

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzApplyBundle mutates a good bundle: whatever the bytes, Apply either
// refuses and leaves no bundle, staging folder or current link behind, or
// commits a bundle whose every file matches the signed manifest.
func FuzzApplyBundle(f *testing.F) {
	kp := newKeysF(f)
	src := f.TempDir()
	os.WriteFile(filepath.Join(src, "model.gguf"), bytes.Repeat([]byte("weights "), 300), 0o644)
	os.WriteFile(filepath.Join(src, "notes.txt"), []byte("notes"), 0o644)
	var buf bytes.Buffer
	if _, err := Pack(&buf, src, PackOptions{Name: "m", Version: "1.0.0", HealthCheck: stubHealth}, kp.priv); err != nil {
		f.Fatal(err)
	}
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(append(bytes.Clone(good[:1536]), good[2048:]...))
	f.Fuzz(func(t *testing.T, bundle []byte) {
		state := t.TempDir()
		opt := testOptions(state, kp)
		res, err := Apply(context.Background(), bytes.NewReader(bundle), opt)
		if err != nil {
			if res.Committed {
				t.Fatalf("committed and failed: %v", err)
			}
			ents, _ := os.ReadDir(filepath.Join(state, bundlesName))
			if len(ents) != 0 {
				t.Fatalf("refused (%v) but left %v", err, ents)
			}
			if _, lerr := os.Lstat(filepath.Join(state, currentName)); !os.IsNotExist(lerr) {
				t.Fatalf("refused (%v) but current exists", err)
			}
			return
		}
		m, err := checkBundle(state, res.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range m.Files {
			data, err := os.ReadFile(filepath.Join(state, currentName, filepath.FromSlash(file.Path)))
			if err != nil || sha(data) != file.SHA256 {
				t.Fatalf("committed %s does not match its manifest: %v", file.Path, err)
			}
		}
	})
}

// newKeysF is newKeys for a fuzz target.
func newKeysF(f *testing.F) keyPair {
	base := filepath.Join(f.TempDir(), "signer")
	if _, err := GenerateKeyFiles(base); err != nil {
		f.Fatal(err)
	}
	priv, err := LoadPrivateKey(base + ".key")
	if err != nil {
		f.Fatal(err)
	}
	pub, err := LoadPublicKey(base + ".pub")
	if err != nil {
		f.Fatal(err)
	}
	return keyPair{priv, pub, base + ".pub"}
}
