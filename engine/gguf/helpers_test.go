package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

const storiesPath = "../../testdata/models/stories260K.gguf" // the repository's one copy; see its README

// rewrite copies every KV and tensor of f, in file order, into a new Writer.
func rewrite(f *File) (*Writer, error) {
	w := NewWriter()
	for _, kv := range f.KVs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := w.AddTensor(t.Name, t.Type, t.Shape, f.TensorData(t)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func writeBytes(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

// allTypesKVs has one KV of every scalar type, an array of every element
// type (one of them empty), and arrays of arrays.
func allTypesKVs() []KV {
	return []KV{
		{"t.u8", TypeUint8, uint8(200)},
		{"t.i8", TypeInt8, int8(-100)},
		{"t.u16", TypeUint16, uint16(60000)},
		{"t.i16", TypeInt16, int16(-30000)},
		{"t.u32", TypeUint32, uint32(4000000000)},
		{"t.i32", TypeInt32, int32(-2000000000)},
		{"t.f32", TypeFloat32, float32(-1.5e-5)},
		{"t.bool", TypeBool, true},
		{"t.bool0", TypeBool, false},
		{"t.str", TypeString, "héllo\x00world"},
		{"t.empty_str", TypeString, ""},
		{"t.u64", TypeUint64, uint64(math.MaxUint64)},
		{"t.i64", TypeInt64, int64(math.MinInt64)},
		{"t.f64", TypeFloat64, math.Pi},
		{"a.u8", TypeArray, []uint8{0, 1, 255}},
		{"a.i8", TypeArray, []int8{-128, 0, 127}},
		{"a.u16", TypeArray, []uint16{1, 65535}},
		{"a.i16", TypeArray, []int16{-32768, 32767}},
		{"a.u32", TypeArray, []uint32{7, 1 << 31}},
		{"a.i32", TypeArray, []int32{-1, 2, -3}},
		{"a.f32", TypeArray, []float32{0.5, float32(math.Inf(-1)), -0}},
		{"a.bool", TypeArray, []bool{true, false, true}},
		{"a.str", TypeArray, []string{"a", "", "<0x0A>", "▁the"}},
		{"a.u64", TypeArray, []uint64{0, math.MaxUint64}},
		{"a.i64", TypeArray, []int64{math.MinInt64, math.MaxInt64}},
		{"a.f64", TypeArray, []float64{1e300, -2.5}},
		{"a.empty", TypeArray, []int32{}},
		{"aa.mixed", TypeArray, []any{[]int32{1, 2}, []string{"x"}, []any{[]float32{3}}, []uint8{}}},
		{"aa.empty", TypeArray, []any{}},
	}
}

// smallFile is a valid file with every value type and tensors of several
// types, whose last tensor ends on the alignment (so no padding follows it).
func smallFile(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range allTypesKVs() {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range smallTensors() {
		if err := w.AddTensor(tt.name, tt.typ, tt.shape, tt.data); err != nil {
			t.Fatal(err)
		}
	}
	return writeBytes(t, w)
}

type testTensor struct {
	name  string
	typ   tensor.DType
	shape []int64
	data  []byte
}

func smallTensors() []testTensor {
	mk := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	return []testTensor{
		{"f16.weight", tensor.F16, []int64{3, 2}, mk(12, 1)},            // 12 bytes, padded to 32
		{"q8.weight", tensor.Q8_0, []int64{64, 1, 2}, mk(4*34, 2)},      // 136 bytes
		{"nvfp4.weight", tensor.NVFP4, []int64{64, 1, 1, 2}, mk(72, 3)}, // 72 bytes
		{"f32.bias", tensor.F32, []int64{8}, mk(32, 4)},                 // 32: ends aligned
	}
}

// raw builds GGUF bytes by hand, including invalid ones.
type raw struct{ bytes.Buffer }

func newRaw(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{}
	r.WriteString("GGUF")
	return r.u32(version).u64(nTensors).u64(nKV)
}
func (r *raw) u32(v uint32) *raw { r.Write(binary.LittleEndian.AppendUint32(nil, v)); return r }
func (r *raw) u64(v uint64) *raw { r.Write(binary.LittleEndian.AppendUint64(nil, v)); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }
func (r *raw) zeros(n int) *raw  { r.Write(make([]byte, n)); return r }
func (r *raw) pad(a int) *raw    { return r.zeros((a - r.Len()%a) % a) }

// kvU32 appends a UINT32 KV.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(v) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, shape []uint64, typ uint32, off uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(typ).u64(off)
}
