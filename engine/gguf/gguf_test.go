package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

func TestRoundTripAllValueTypes(t *testing.T) {
	for _, alignment := range []uint32{0, 1, 64, 4096} { // 0: default
		w := NewWriter()
		want := allTypesKVs()
		if alignment != 0 {
			want = append([]KV{{alignmentKey, TypeUint32, alignment}}, want...)
		}
		for _, kv := range want {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range smallTensors() {
			if err := w.AddTensor(tt.name, tt.typ, tt.shape, tt.data); err != nil {
				t.Fatal(err)
			}
		}
		data := writeBytes(t, w)
		f, err := Parse("rt.gguf", data)
		if err != nil {
			t.Fatalf("alignment %d: %v", alignment, err)
		}
		wantAlign := int64(alignment)
		if alignment == 0 {
			wantAlign = 32
		}
		if f.Version != 3 || f.Alignment != wantAlign || f.DataOffset%wantAlign != 0 {
			t.Errorf("alignment %d: version %d alignment %d data offset %d", alignment, f.Version, f.Alignment, f.DataOffset)
		}
		if !reflect.DeepEqual(f.KVs, want) {
			t.Errorf("alignment %d: KVs differ:\n got %#v\nwant %#v", alignment, f.KVs, want)
		}
		for _, kv := range want {
			got, ok := f.Lookup(kv.Key)
			if !ok || !reflect.DeepEqual(got, kv) {
				t.Errorf("Lookup(%q) = %#v, %v", kv.Key, got, ok)
			}
		}
		if len(f.Tensors) != len(smallTensors()) {
			t.Fatalf("%d tensors", len(f.Tensors))
		}
		for i, tt := range smallTensors() {
			ti, ok := f.Tensor(tt.name)
			if !ok || ti != &f.Tensors[i] {
				t.Fatalf("Tensor(%q) not found at index %d", tt.name, i)
			}
			if ti.Type != tt.typ || !reflect.DeepEqual(ti.Shape, tt.shape) || ti.Offset%wantAlign != 0 {
				t.Errorf("tensor %q: %+v", tt.name, *ti)
			}
			if got := f.TensorData(ti); !bytes.Equal(got, tt.data) || cap(got) != len(got) {
				t.Errorf("tensor %q: data %x, want %x", tt.name, got, tt.data)
			}
		}
		// Writing what was read gives the same bytes again.
		w2, err := rewrite(f)
		if err != nil {
			t.Fatal(err)
		}
		if again := writeBytes(t, w2); !bytes.Equal(again, data) {
			t.Errorf("alignment %d: rewrite differs", alignment)
		}
	}
}

func TestVersion2(t *testing.T) {
	// v2 differs from v3 only in that v3 may be big-endian.
	data := smallFile(t)
	data[4] = 2
	f, err := Parse("v2.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.KVs) != len(allTypesKVs()) || len(f.Tensors) != len(smallTensors()) {
		t.Errorf("version %d, %d KVs, %d tensors", f.Version, len(f.KVs), len(f.Tensors))
	}
}

func TestStories260K(t *testing.T) {
	f, err := Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if arch, _ := f.GetString("general.architecture"); arch != "llama" {
		t.Errorf("general.architecture = %q, want llama", arch)
	}
	if n, ok := f.GetUint("llama.block_count"); !ok || n != 5 {
		t.Errorf("llama.block_count = %d, %v; want 5", n, ok)
	}
	if n, ok := f.GetInt("llama.block_count"); !ok || n != 5 {
		t.Errorf("GetInt(llama.block_count) = %d, %v; want 5", n, ok)
	}
	toks, ok := f.GetStrings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 512 {
		t.Errorf("tokenizer.ggml.tokens: %d tokens, %v; want 512", len(toks), ok)
	}
	if scores, ok := f.GetFloat32s("tokenizer.ggml.scores"); !ok || len(scores) != 512 {
		t.Errorf("tokenizer.ggml.scores: %d, %v", len(scores), ok)
	}
	if types, ok := f.GetInt32s("tokenizer.ggml.token_type"); !ok || len(types) != 512 {
		t.Errorf("tokenizer.ggml.token_type: %d, %v", len(types), ok)
	}
	if eps, ok := f.GetFloat("llama.attention.layer_norm_rms_epsilon"); !ok || eps < 0.9e-5 || eps > 1.1e-5 {
		t.Errorf("rms eps = %g, %v; want 1e-5", eps, ok)
	}
	ti, ok := f.Tensor("token_embd.weight")
	if !ok {
		t.Fatal("no token_embd.weight")
	}
	if ti.Type != tensor.F32 || !reflect.DeepEqual(ti.Shape, []int64{64, 512}) || ti.Size != 64*512*4 || ti.Elems() != 64*512 {
		t.Errorf("token_embd.weight: %+v, want F32 [64 512]", *ti)
	}
	if d := f.TensorData(ti); len(d) != 64*512*4 {
		t.Errorf("token_embd.weight data: %d bytes", len(d))
	}
	if _, ok := f.Tensor("output.weight"); !ok {
		t.Error("no output.weight")
	}
	if f.Version != 3 || f.Alignment != 32 || len(f.Tensors) != 48 {
		t.Errorf("version %d, alignment %d, %d tensors", f.Version, f.Alignment, len(f.Tensors))
	}
	// Metadata is copied: it outlives the mapping; tensor data does not.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if f.TensorData(ti) != nil {
		t.Error("TensorData after Close is not nil")
	}
	if toks[1] != "<s>" || toks[2] != "</s>" {
		t.Errorf("tokens after Close: %q %q", toks[1], toks[2])
	}
}

// The file was written by ggml's own gguf writer; writing back everything
// read from it must give the same bytes.
func TestRewriteStoriesByteIdentical(t *testing.T) {
	orig, err := os.ReadFile(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(orig)
	if got := hex.EncodeToString(sum[:]); got != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
		t.Fatalf("%s: sha256 %s, not the file testdata/README.md describes", storiesPath, got)
	}
	f, err := Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := rewrite(f)
	if err != nil {
		t.Fatal(err)
	}
	out := writeBytes(t, w)
	if !bytes.Equal(out, orig) {
		i := 0
		for i < len(out) && i < len(orig) && out[i] == orig[i] {
			i++
		}
		t.Fatalf("rewrite differs from the original at byte %d (lengths %d and %d)", i, len(out), len(orig))
	}
	path := filepath.Join(t.TempDir(), "rewritten.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, orig) {
		t.Fatal("WriteFile output differs from the original")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("WriteFile left %d files in its directory", len(ents))
	}
}

func TestMalformed(t *testing.T) {
	big := uint64(1) << 62
	f32 := uint32(tensor.F32)
	cases := []struct {
		name string
		data []byte
		want []string // words the error must contain
	}{
		{"empty", nil, []string{"not a GGUF file", "magic", "past end of file"}},
		{"bad magic", []byte("GGMLxxxxxxxxxxxxxxxxxxxxxxxx"), []string{"magic", `"GGML"`}},
		{"version 1", newRaw(1, 0, 0).Bytes(), []string{"version 1", "not supported"}},
		{"version 0", newRaw(0, 0, 0).Bytes(), []string{"version 0 is not supported"}},
		{"version 4", newRaw(4, 0, 0).Bytes(), []string{"version 4", "not supported"}},
		{"big-endian", newRaw(0x03000000, 0, 0).Bytes(), []string{"big-endian"}},
		{"header cut", newRaw(3, 0, 0).Bytes()[:20], []string{"kv count", "past end of file"}},
		{"kv count", newRaw(3, 0, big).Bytes(), []string{"kv count", "4611686018427387904"}},
		{"tensor count", newRaw(3, big, 0).Bytes(), []string{"tensor count"}},
		{"tensor count exceeds bytes", newRaw(3, 2, 0).zeros(40).Bytes(), []string{"tensor count 2"}},
		{"key length", newRaw(3, 0, 1).u64(big).zeros(16).Bytes(), []string{"key of kv 0", "length", "past end of file"}},
		{"empty key", newRaw(3, 0, 1).str("").u32(0).u32(0).Bytes(), []string{"kv 0", "empty"}},
		{"unknown value type", newRaw(3, 0, 1).str("k").u32(13).zeros(8).Bytes(), []string{`key "k"`, "unknown value type 13"}},
		{"unknown array type", newRaw(3, 0, 1).str("k").u32(9).u32(77).u64(1).zeros(8).Bytes(), []string{`key "k"`, "unknown value type 77"}},
		{"array length", newRaw(3, 0, 1).str("k").u32(9).u32(uint32(TypeFloat32)).u64(big).zeros(16).Bytes(), []string{`key "k"`, "array of 4611686018427387904 FLOAT32", "past end of file", "16 bytes left"}},
		{"string array length", newRaw(3, 0, 1).str("k").u32(9).u32(uint32(TypeString)).u64(3).u64(1).Bytes(), []string{`key "k"`, "array of 3 STRING", "past end of file"}},
		{"string in array", newRaw(3, 0, 1).str("k").u32(9).u32(uint32(TypeString)).u64(2).str("x").u64(9).zeros(1).Bytes(), []string{`key "k"`, "array element 1", "past end of file"}},
		{"value cut", newRaw(3, 0, 1).str("k").u32(uint32(TypeUint64)).zeros(4).Bytes(), []string{`key "k"`, "UINT64 value", "past end of file"}},
		{"nested too deep", nested(20), []string{`key "k"`, "nested more than 16"}},
		{"duplicate key", newRaw(3, 0, 2).kvU32("k", 1).kvU32("k", 2).Bytes(), []string{`duplicate key "k"`}},
		{"alignment type", newRaw(3, 0, 1).str(alignmentKey).u32(uint32(TypeUint64)).u64(32).Bytes(), []string{alignmentKey, "UINT64", "want UINT32"}},
		{"alignment zero", newRaw(3, 0, 1).kvU32(alignmentKey, 0).Bytes(), []string{alignmentKey, "power of two"}},
		{"alignment 48", newRaw(3, 0, 1).kvU32(alignmentKey, 48).Bytes(), []string{alignmentKey, "48", "power of two"}},
		{"no dims", newRaw(3, 1, 0).str("w").u32(0).zeros(40).Bytes(), []string{`tensor "w"`, "0 dimensions", "want 1 to 4"}},
		{"5 dims", newRaw(3, 1, 0).tensor("w", []uint64{1, 1, 1, 1, 1}, f32, 0).pad(32).zeros(32).Bytes(), []string{`tensor "w"`, "5 dimensions"}},
		{"zero dim", newRaw(3, 1, 0).tensor("w", []uint64{4, 0}, f32, 0).pad(32).zeros(32).Bytes(), []string{`tensor "w"`, "dimension 1 is 0"}},
		{"negative dim", newRaw(3, 1, 0).tensor("w", []uint64{1 << 63}, f32, 0).pad(32).zeros(32).Bytes(), []string{`tensor "w"`, "dimension 0 is 9223372036854775808"}},
		{"element count overflow", newRaw(3, 1, 0).tensor("w", []uint64{1 << 32, 1 << 32}, f32, 0).pad(32).Bytes(), []string{`tensor "w"`, "element count", "overflows"}},
		{"byte size overflow", newRaw(3, 1, 0).tensor("w", []uint64{1 << 31, 1 << 31}, f32, 0).pad(32).Bytes(), []string{`tensor "w"`, "size", "overflows"}},
		{"unknown tensor type", newRaw(3, 1, 0).tensor("w", []uint64{4}, 99, 0).pad(32).zeros(32).Bytes(), []string{`tensor "w"`, "unknown tensor type 99"}},
		{"partial block", newRaw(3, 1, 0).tensor("w", []uint64{16, 2}, uint32(tensor.Q8_0), 0).pad(32).zeros(64).Bytes(), []string{`tensor "w"`, "Q8_0", "16 values", "block size 32"}},
		{"misaligned offset", newRaw(3, 1, 0).tensor("w", []uint64{4}, f32, 16).pad(32).zeros(64).Bytes(), []string{`tensor "w"`, "offset 16", "alignment 32"}},
		{"offset overflow", newRaw(3, 1, 0).tensor("w", []uint64{4}, f32, 1<<63).pad(32).zeros(64).Bytes(), []string{`tensor "w"`, "offset", "overflows"}},
		{"data past end", newRaw(3, 1, 0).tensor("blk.0.attn_q.weight", []uint64{8, 2}, f32, 32).pad(32).zeros(64).Bytes(),
			[]string{`tensor "blk.0.attn_q.weight"`, "data [128, 192)", "runs past end of file (size 160)"}},
		{"huge offset", newRaw(3, 1, 0).tensor("w", []uint64{1 << 60}, f32, 1<<62).pad(32).Bytes(), []string{`tensor "w"`, "runs past end of file"}},
		{"data section past end", newRaw(3, 1, 0).tensor("w", []uint64{1}, f32, 0).Bytes(), []string{"data section", "past end of file"}},
		{"overlap", newRaw(3, 2, 0).tensor("a", []uint64{16}, f32, 0).tensor("b", []uint64{8}, f32, 32).pad(32).zeros(64).Bytes(), []string{`"a"`, `"b"`, "overlap"}},
		{"duplicate tensor", newRaw(3, 2, 0).tensor("a", []uint64{8}, f32, 0).tensor("a", []uint64{8}, f32, 32).pad(32).zeros(64).Bytes(), []string{`duplicate tensor name "a"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("model.gguf", c.data)
			if err == nil {
				t.Fatalf("no error; parsed %d KVs, %d tensors", len(f.KVs), len(f.Tensors))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gguf model.gguf: ") {
				t.Errorf("error does not name the file: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// nested is a file with one KV holding depth arrays of arrays.
func nested(depth int) []byte {
	r := newRaw(3, 0, 1).str("k").u32(uint32(TypeArray))
	for range depth - 1 {
		r.u32(uint32(TypeArray)).u64(1)
	}
	return r.u32(uint32(TypeUint8)).u64(0).Bytes()
}

func TestNestingLimitAgrees(t *testing.T) {
	// The deepest nesting the reader takes is the deepest the writer takes.
	if _, err := Parse("n.gguf", nested(maxArrayDepth)); err != nil {
		t.Fatalf("depth %d: %v", maxArrayDepth, err)
	}
	var v any = []uint8{}
	for range maxArrayDepth - 1 {
		v = []any{v}
	}
	w := NewWriter()
	if err := w.AddKV("k", v); err != nil {
		t.Fatalf("writer at depth %d: %v", maxArrayDepth, err)
	}
	if !bytes.Equal(writeBytes(t, w)[:len(nested(maxArrayDepth))], nested(maxArrayDepth)) {
		t.Error("writer's nested array differs from the hand-made one")
	}
	if err := NewWriter().AddKV("k", []any{v}); err == nil {
		t.Errorf("writer took depth %d", maxArrayDepth+1)
	}
}

// Every proper prefix of a valid file that cuts into its header or tensor
// data is an error, never a panic.
func TestTruncatedPrefixes(t *testing.T) {
	for _, file := range []struct {
		name string
		data func(t *testing.T) []byte
	}{
		{"small", func(t *testing.T) []byte { return smallFile(t) }},
		{"stories260K", func(t *testing.T) []byte {
			b, err := os.ReadFile(storiesPath)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	} {
		t.Run(file.name, func(t *testing.T) {
			data := file.data(t)
			f, err := Parse("x.gguf", data)
			if err != nil {
				t.Fatal(err)
			}
			end := f.DataOffset
			for _, ti := range f.Tensors {
				end = max(end, f.DataOffset+ti.Offset+ti.Size)
			}
			// Every byte of the header; in the data, every byte near each tensor's end.
			check := func(n int64) {
				if _, err := Parse("x.gguf", data[:n:n]); err == nil {
					t.Fatalf("prefix of %d bytes (of %d, data ends at %d) parsed", n, len(data), end)
				} else if !strings.HasPrefix(err.Error(), "gguf x.gguf: ") {
					t.Fatalf("prefix of %d: error %q does not name the file", n, err)
				}
			}
			for n := int64(0); n <= f.DataOffset && n < end; n++ {
				check(n)
			}
			for _, ti := range f.Tensors {
				e := f.DataOffset + ti.Offset + ti.Size
				for n := max(f.DataOffset+1, e-3); n < e; n++ {
					check(n)
				}
			}
			for n := end; n <= int64(len(data)); n++ {
				if _, err := Parse("x.gguf", data[:n:n]); err != nil {
					t.Fatalf("prefix of %d bytes holding all tensor data: %v", n, err)
				}
			}
		})
	}
}

func TestOpenErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.gguf")
	if err := os.WriteFile(short, []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.gguf")
	small := smallFile(t)
	if err := os.WriteFile(cut, small[:len(small)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	for _, c := range []struct {
		path string
		want string
	}{
		{missing, "no such file"},
		{short, "shorter than a GGUF header"},
		{cut, `tensor "f32.bias": data`},
		{dir, "not a regular file"},
	} {
		f, err := Open(c.path)
		if err == nil {
			f.Close()
			t.Errorf("Open(%s): no error", c.path)
			continue
		}
		if !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): error %q, want the path and %q", c.path, err, c.want)
		}
	}
	if _, err := Open(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) error %v does not wrap os.ErrNotExist", err)
	}
}

func TestGetters(t *testing.T) {
	w := NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"neg", int32(-5)}, {"u8", uint8(7)}, {"u64big", uint64(1 << 63)}, {"f32", float32(0.25)},
		{"str", "s"}, {"b", true}, {"u32s", []uint32{1, 2, 3}}, {"bigs", []uint32{1 << 31}},
		{"i64s", []int64{-1, 5}}, {"f64s", []float64{0.5}}, {"strs", []string{"a"}},
	} {
		if err := w.AddKV(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Parse("g.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.GetUint("neg"); ok {
		t.Error("GetUint of a negative value succeeded")
	}
	if v, ok := f.GetInt("neg"); !ok || v != -5 {
		t.Errorf("GetInt(neg) = %d, %v", v, ok)
	}
	if v, ok := f.GetUint("u8"); !ok || v != 7 {
		t.Errorf("GetUint(u8) = %d, %v", v, ok)
	}
	if v, ok := f.GetUint("u64big"); !ok || v != 1<<63 {
		t.Errorf("GetUint(u64big) = %d, %v", v, ok)
	}
	if _, ok := f.GetInt("u64big"); ok {
		t.Error("GetInt of 2^63 succeeded")
	}
	if v, ok := f.GetFloat("f32"); !ok || v != 0.25 {
		t.Errorf("GetFloat(f32) = %g, %v", v, ok)
	}
	if v, ok := f.GetFloat("neg"); !ok || v != -5 {
		t.Errorf("GetFloat(neg) = %g, %v", v, ok)
	}
	if _, ok := f.GetFloat("str"); ok {
		t.Error("GetFloat of a string succeeded")
	}
	if _, ok := f.GetString("neg"); ok {
		t.Error("GetString of an int succeeded")
	}
	if v, ok := f.GetBool("b"); !ok || !v {
		t.Errorf("GetBool(b) = %v, %v", v, ok)
	}
	if v, ok := f.GetInt32s("u32s"); !ok || !reflect.DeepEqual(v, []int32{1, 2, 3}) {
		t.Errorf("GetInt32s(u32s) = %v, %v", v, ok)
	}
	if v, ok := f.GetInt32s("i64s"); !ok || !reflect.DeepEqual(v, []int32{-1, 5}) {
		t.Errorf("GetInt32s(i64s) = %v, %v", v, ok)
	}
	if _, ok := f.GetInt32s("bigs"); ok {
		t.Error("GetInt32s of 2^31 succeeded")
	}
	if v, ok := f.GetFloat32s("f64s"); !ok || !reflect.DeepEqual(v, []float32{0.5}) {
		t.Errorf("GetFloat32s(f64s) = %v, %v", v, ok)
	}
	if _, ok := f.GetStrings("missing"); ok {
		t.Error("GetStrings of a missing key succeeded")
	}
	if v, ok := f.GetStrings("strs"); !ok || !reflect.DeepEqual(v, []string{"a"}) {
		t.Errorf("GetStrings(strs) = %v, %v", v, ok)
	}
	if _, ok := f.Tensor("none"); ok {
		t.Error("Tensor of a missing name succeeded")
	}
}

func TestWriterRejects(t *testing.T) {
	f32 := tensor.F32
	four := make([]byte, 16)
	cases := []struct {
		name string
		do   func(w *Writer) error
		want string
	}{
		{"int", func(w *Writer) error { return w.AddKV("k", 5) }, "unsupported Go type int"},
		{"empty key", func(w *Writer) error { return w.AddKV("", uint8(1)) }, "empty key"},
		{"duplicate key", func(w *Writer) error { w.AddKV("k", uint8(1)); return w.AddKV("k", uint8(2)) }, `duplicate key "k"`},
		{"array of scalars as []any", func(w *Writer) error { return w.AddKV("k", []any{int32(1)}) }, "not an array"},
		{"alignment type", func(w *Writer) error { return w.AddKV(alignmentKey, uint64(32)) }, "power of two"},
		{"alignment value", func(w *Writer) error { return w.AddKV(alignmentKey, uint32(24)) }, "power of two"},
		{"empty name", func(w *Writer) error { return w.AddTensor("", f32, []int64{4}, four) }, "empty name"},
		{"long name", func(w *Writer) error { return w.AddTensor(strings.Repeat("x", 64), f32, []int64{4}, four) }, "longer than"},
		{"duplicate tensor", func(w *Writer) error {
			w.AddTensor("a", f32, []int64{4}, four)
			return w.AddTensor("a", f32, []int64{4}, four)
		}, "duplicate tensor name"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("a", 99, []int64{4}, four) }, "unknown tensor type 99"},
		{"no dims", func(w *Writer) error { return w.AddTensor("a", f32, nil, four) }, "0 dimensions"},
		{"zero dim", func(w *Writer) error { return w.AddTensor("a", f32, []int64{4, 0}, four) }, "dimension 1 is 0"},
		{"overflow", func(w *Writer) error { return w.AddTensor("a", f32, []int64{1 << 32, 1 << 32}, four) }, "overflows"},
		{"partial block", func(w *Writer) error { return w.AddTensor("a", tensor.Q8_0, []int64{16}, four) }, "block size"},
		{"data length", func(w *Writer) error { return w.AddTensor("a", f32, []int64{5}, four) }, "16 bytes of data, want 20"},
	}
	for _, c := range cases {
		err := c.do(NewWriter())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errors.New("disk full")
	}
	w.left -= len(p)
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	w := NewWriter()
	w.AddKV("k", "v")
	w.AddTensor("a", tensor.F32, []int64{1 << 19}, make([]byte, 4<<19)) // larger than the write buffer
	if _, err := w.WriteTo(&failingWriter{left: 100}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteTo onto a failing writer: %v", err)
	}
	path := filepath.Join(t.TempDir(), "no", "such", "dir.gguf")
	if err := w.WriteFile(path); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}
