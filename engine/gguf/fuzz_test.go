package gguf

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic; an error
// must name the file; a file it accepts must have every tensor's data inside
// it, and writing it back and parsing that again must reproduce the same bytes.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 2s ./engine/gguf/
//
// (the default minimize time of 60 s per new input stalls progress reports on
// the multi-kilobyte seeds).
func FuzzParse(f *testing.F) {
	// Real header: stories260K up to its data section (the tensors then
	// point past the end, which exercises the data checks), plus the first
	// tensor's data so a mutation can make the file valid again.
	if b, err := os.ReadFile(storiesPath); err == nil {
		if sf, err := Parse("s", b); err == nil {
			f.Add(b[:sf.DataOffset])
			small := NewWriter()
			for _, kv := range sf.KVs {
				small.AddKV(kv.Key, kv.Value)
			}
			ti := &sf.Tensors[0]
			small.AddTensor(ti.Name, ti.Type, ti.Shape, sf.TensorData(ti))
			f.Add(writeBytes(f, small))
		}
	}
	f.Add(smallFile(f))
	w := NewWriter()
	w.AddKV(alignmentKey, uint32(8))
	w.AddKV("aa", []any{[]any{[]int8{1}}, []string{"x", "y"}})
	w.AddTensor("q", tensor.Q8_0, []int64{32}, make([]byte, 34))
	w.AddTensor("b", tensor.BF16, []int64{1, 3}, make([]byte, 6))
	f.Add(writeBytes(f, w))
	f.Add(newRaw(2, 0, 1).kvU32("k", 1).Bytes())
	f.Add(newRaw(3, 2, 0).tensor("a", []uint64{8}, uint32(tensor.F32), 0).tensor("b", []uint64{8}, uint32(tensor.F32), 32).pad(32).zeros(64).Bytes())

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gguf", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf fuzz.gguf: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if d := file.TensorData(ti); int64(len(d)) != ti.Size || ti.Size <= 0 {
				t.Fatalf("tensor %q: %d bytes of data, size %d", ti.Name, len(d), ti.Size)
			}
		}
		if file.Alignment > 1<<12 && len(file.Tensors) == 0 {
			return // legal, but the rewrite would pad the header to the alignment: gigabytes
		}
		w, err := rewrite(file)
		if err != nil {
			if strings.Contains(err.Error(), "longer than llama.cpp's limit") {
				return // the reader is more lenient than llama.cpp here; the writer is not
			}
			t.Fatalf("Writer refuses what Parse accepted: %v", err)
		}
		out := writeBytes(t, w)
		again, err := Parse("rewritten.gguf", out)
		if err != nil {
			t.Fatalf("Parse of the rewritten file: %v", err)
		}
		w2, err := rewrite(again)
		if err != nil {
			t.Fatal(err)
		}
		if out2 := writeBytes(t, w2); !bytes.Equal(out, out2) {
			t.Fatal("rewriting a rewritten file changed it")
		}
	})
}
