package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// `draft fit` writes a stories260K with an MTP head that loads, and
// reports its acceptance; bad invocations are usage errors.
func TestDraftFit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stories-mtp.gguf")
	var stdout bytes.Buffer
	err := cmdDraft([]string{"fit", "-m", stories, "-o", out, "--tokens", "2048", "--eval-tokens", "16", "--threads", "2"}, &stdout, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(stdout.String())
	for _, want := range []string{"MTP head fitted on 2048 generated tokens", "linear 3", "tree 8/2/16", "target steps per token"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	f, err := gguf.Open(out)
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
	if m.MTP() == nil {
		t.Fatal("the written file has no MTP head")
	}
	// a second fit on the output is refused: it has a head
	err = cmdDraft([]string{"fit", "-m", out, "-o", out + ".2"}, &stdout, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "already has an MTP head") {
		t.Errorf("fitting a file with a head: %v", err)
	}
	for _, args := range [][]string{nil, {"train"}, {"fit", "-m", stories}, {"fit", "-o", out}, {"fit", "-m", stories, "-o", out, "extra"}} {
		if err := cmdDraft(args, &stdout, zerolog.Nop()); !errors.Is(err, errUsage) {
			t.Errorf("draft %v: %v, want a usage error", args, err)
		}
	}
}
