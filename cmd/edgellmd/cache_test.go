package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/state"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// TestCacheCommand: stats reads a real cache directory (written by
// engine/state from stories260K snapshots) through the config's cache.dir;
// clear refuses while the directory is held and empties it afterwards.
func TestCacheCommand(t *testing.T) {
	f, err := gguf.Open(stories)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := tensor.NewPool(1)
	defer pool.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	c, err := state.Open(state.Options{MaxBytes: 1 << 30, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: "stories-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	lg := make([]float32, m.Hyper().Vocab)
	for _, n := range []int{70, 150} {
		toks := make([]int32, n)
		for i := range toks {
			toks[i] = int32(1 + i%300)
		}
		st := m.NewState(256)
		if err := m.Forward(st, model.ChainBatch(toks, 0, false), lg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(toks, st); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()

	cfg := filepath.Join(t.TempDir(), "edgellmd.yaml")
	if err := os.WriteFile(cfg, []byte("cache:\n  dir: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := cmdCache([]string{"stats", "-c", cfg, "--json"}, &out, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		state.DirInfo
		Fingerprints []fingerprintSum `json:"fingerprints"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// Both prompts share their first page (the same tokens): 2 pages.
	if len(got.Fingerprints) != 1 || got.Fingerprints[0].Fingerprint != "stories-test" ||
		got.Fingerprints[0].Snapshots != 2 || got.Fingerprints[0].Pages != 2 || got.Fingerprints[0].Tokens != 220 || got.InUse {
		t.Errorf("stats: %s", out.String())
	}

	held, err := state.Open(state.Options{MaxBytes: 1 << 20, Dir: dir, MaxDiskBytes: 1 << 30, Fingerprint: "stories-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	held.WaitRestored(context.Background())
	out.Reset()
	if err := cmdCache([]string{"stats", "--dir", dir}, &out, zerolog.Nop()); err != nil || !strings.Contains(out.String(), "in use") {
		t.Errorf("stats while held: %v\n%s", err, out.String())
	}
	err = cmdCache([]string{"clear", "--dir", dir}, &out, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("clear while held: %v", err)
	}
	held.Close()
	out.Reset()
	if err := cmdCache([]string{"clear", "--dir", dir}, &out, zerolog.Nop()); err != nil || !strings.Contains(out.String(), "removed 1 segment") {
		t.Errorf("clear: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := cmdCache([]string{"stats", "--dir", dir}, &out, zerolog.Nop()); err != nil || !strings.Contains(out.String(), "0 segment files") {
		t.Errorf("stats after clear: %v\n%s", err, out.String())
	}
	if err := cmdCache([]string{"purge"}, &out, zerolog.Nop()); err == nil {
		t.Error("unknown subcommand accepted")
	}
}
