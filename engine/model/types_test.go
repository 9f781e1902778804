package model

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// withType rewrites the GGUF file at src into dir with tensor name's data
// replaced by zeros of type t (same shape), and returns the new path.
func withType(tb testing.TB, src, name string, t tensor.DType) string {
	tb.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key == "general.alignment" {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			tb.Fatal(err)
		}
	}
	found := false
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		typ, data := ti.Type, f.TensorData(ti)
		if ti.Name == name {
			found = true
			n, err := t.RowBytes(ti.Elems())
			if err != nil {
				tb.Fatal(err)
			}
			typ, data = t, make([]byte, n)
		}
		if err := w.AddTensor(ti.Name, typ, ti.Shape, data); err != nil {
			tb.Fatal(err)
		}
	}
	if !found {
		tb.Fatalf("%s has no tensor %q", src, name)
	}
	out := filepath.Join(tb.TempDir(), "rewritten.gguf")
	if err := w.WriteFile(out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestUnsupportedTypeRefused: a file with one tensor of a type the CPU
// engine cannot run (Q8_1, an activation type ggml never multiplies
// weights in) is refused at load with its name, its type and the types
// that would do, not at the first request.
func TestUnsupportedTypeRefused(t *testing.T) {
	path := withType(t, "../../testdata/models/stories260K.gguf", "blk.1.ffn_up.weight", tensor.Q8_1)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Load(f, Options{KVType: tensor.F16, Pool: tensor.NewPool(1)})
	if err == nil {
		t.Fatal("Load accepted a Q8_1 weight")
	}
	for _, want := range []string{`tensor "blk.1.ffn_up.weight" has type Q8_1`, "the CPU engine cannot run", "supported types: F32, F16, BF16"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
