package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// A prefix cache persisted for a model file is restored for a copy of that
// file at another path with another modification time (a model copied to a
// new disk, or restored from a backup), and refused for a file whose tensor
// data differs in one byte.
func TestCacheFollowsTheModelFilesContent(t *testing.T) {
	path, dir := qwen35Tiny(t), t.TempDir()
	open := func(model string) *Engine {
		t.Helper()
		e, err := Load(model, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, CacheMaxBytes: 1 << 30,
			CacheDir: dir, CacheMaxDiskBytes: 1 << 30, Device: "cpu", Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.cache.WaitRestored(ctx); err != nil {
			e.Close()
			t.Fatal(err)
		}
		return e
	}
	prompt := randPrompt(rand.New(rand.NewPCG(9, 10)), 120, 250)
	turn := func(e *Engine) int { return greedyRun(t, e, prompt, []int{100}, 2).CachedTokens }

	e := open(path)
	if n := turn(e); n != 0 {
		t.Fatalf("empty cache restored %d tokens", n)
	}
	e.Close()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "restored.gguf")
	if err := os.WriteFile(copied, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2021, 6, 7, 8, 9, 10, 0, time.UTC)
	if err := os.Chtimes(copied, old, old); err != nil {
		t.Fatal(err)
	}
	e = open(copied)
	if n := turn(e); n != 100 {
		t.Errorf("a copy of the model file restored %d tokens of its cache, want 100", n)
	}
	e.Close()

	data[len(data)-1] ^= 0x01
	other := filepath.Join(t.TempDir(), "retrained.gguf")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e = open(other)
	defer e.Close()
	if st, _ := e.CacheStats(); st.RestoredEntries != 0 {
		t.Errorf("a model with other tensor data took the cache: %+v", st)
	}
}

// A loaded engine's fingerprint is Fingerprint of its file and settings
// (Load hashes the file it has open, not the path again).
func TestLoadedFingerprint(t *testing.T) {
	e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, Activations: tensor.NVFP4ActF32, Device: "cpu", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want, err := Fingerprint(stories, tensor.F16, tensor.NVFP4ActF32, e.Device())
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Fingerprint(); got != want || !strings.Contains(got, "kv=F16") || !strings.HasSuffix(got, "engine=cpu") {
		t.Fatalf("loaded %q, Fingerprint %q", got, want)
	}
}
