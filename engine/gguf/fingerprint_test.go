package gguf

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The fingerprint follows the file's content and nothing else: a copy at
// another path with another modification time keeps it; a changed byte in
// the metadata, in the first, a middle or the last block of the tensor
// data, or a longer file changes it.
func TestFingerprintFollowsContent(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "models", "stories260K.gguf")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	header := g.DataOffset
	g.Close()
	dir := t.TempDir()
	fp := func(name string, b []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Fingerprint(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base, err := Fingerprint(src)
	if err != nil {
		t.Fatal(err)
	}
	copied := fp("copy.gguf", data)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "copy.gguf"), old, old); err != nil {
		t.Fatal(err)
	}
	touched, err := Fingerprint(filepath.Join(dir, "copy.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if copied != base || touched != base {
		t.Fatalf("a copy, or its modification time, changed the fingerprint: %q, %q, want %q", copied, touched, base)
	}
	flip := func(off int64) []byte {
		b := slices.Clone(data)
		b[off] ^= 0x01
		return b
	}
	size := int64(len(data))
	for name, b := range map[string][]byte{
		"metadata":        flip(24 + 8),
		"first data byte": flip(header),
		"a middle block":  flip(header + (size-header-fingerprintBlockBytes)*8/(fingerprintBlocks-1)),
		"last data byte":  flip(size - 1),
		"a longer file":   append(slices.Clone(data), make([]byte, 32)...),
	} {
		if got := fp(name+".gguf", b); got == base {
			t.Errorf("%s changed: the same fingerprint %q", name, got)
		}
	}
	if _, err := Fingerprint(filepath.Join(dir, "missing.gguf")); err == nil {
		t.Error("no error for a missing file")
	}
}
