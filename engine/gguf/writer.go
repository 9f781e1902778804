package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// maxNameBytes is the longest tensor name llama.cpp loads (GGML_MAX_NAME
// is 64 including the terminating NUL).
const maxNameBytes = 63

// Writer builds a GGUF v3 file in the layout of ggml's gguf writer: header,
// KVs in the order added, tensor infos in the order added, zero padding to
// the alignment, then each tensor's data followed by zero padding to the
// alignment. Values and tensor data are referenced, not copied, until WriteTo.
type Writer struct {
	alignment int64
	kvs       []KV
	keys      map[string]bool
	tensors   []writerTensor
	names     map[string]bool
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns an empty Writer. The alignment is 32 unless a
// general.alignment KV (a UINT32 power of two) is added.
func NewWriter() *Writer {
	return &Writer{alignment: defaultAlignment, keys: map[string]bool{}, names: map[string]bool{}}
}

// AddKV appends a metadata entry. The Go type of value picks the GGUF type,
// as in KV.Value: uint32 is UINT32, []string an ARRAY of STRING, []any an
// ARRAY of ARRAY, and so on. Arrays of arrays are valid GGUF (gguf-py reads
// and writes them) but ggml's reader refuses them, so a file meant for
// llama.cpp must not use them.
func (w *Writer) AddKV(key string, value any) error {
	if key == "" {
		return fmt.Errorf("gguf writer: empty key")
	}
	if w.keys[key] {
		return fmt.Errorf("gguf writer: duplicate key %q", key)
	}
	t, err := typeOf(value)
	if err != nil {
		return fmt.Errorf("gguf writer: key %q: %w", key, err)
	}
	if key == alignmentKey {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf writer: key %q must be a UINT32 non-zero power of two, got %T %v", key, value, value)
		}
		w.alignment = int64(a)
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Type: t, Value: value})
	return nil
}

// AddTensor appends a tensor. shape is ggml's ne (innermost first, 1 to 4
// dimensions, each at least 1) and is written as given; data must hold
// exactly the tensor's bytes.
func (w *Writer) AddTensor(name string, t tensor.DType, shape []int64, data []byte) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("gguf writer: tensor %q: "+format, append([]any{name}, args...)...)
	}
	if name == "" {
		return fail("empty name")
	}
	if len(name) > maxNameBytes {
		return fail("name of %d bytes is longer than llama.cpp's limit of %d", len(name), maxNameBytes)
	}
	if w.names[name] {
		return fail("duplicate tensor name")
	}
	if !t.Known() {
		return fail("unknown tensor type %d", uint32(t))
	}
	if len(shape) < 1 || len(shape) > maxDims {
		return fail("%d dimensions, want 1 to %d", len(shape), maxDims)
	}
	count := int64(1)
	for d, ne := range shape {
		if ne < 1 {
			return fail("dimension %d is %d, want >= 1", d, ne)
		}
		if count > math.MaxInt64/ne {
			return fail("element count of shape %v overflows int64", shape)
		}
		count *= ne
	}
	size, err := tensorSize(t, shape, count)
	if err != nil {
		return fail("%w", err)
	}
	if int64(len(data)) != size {
		return fail("%d bytes of data, want %d for %s %v", len(data), size, t, shape)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{
		info: TensorInfo{Name: name, Type: t, Shape: append([]int64(nil), shape...), Size: size},
		data: data,
	})
	return nil
}

// WriteTo writes the file to out and returns the number of bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	e := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	e.bytes([]byte(magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		e.value(kv.Value)
	}
	var off int64
	for _, t := range w.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Shape)))
		for _, ne := range t.info.Shape {
			e.u64(uint64(ne))
		}
		e.u32(uint32(t.info.Type))
		e.u64(uint64(off))
		off = alignUp(off+t.info.Size, w.alignment)
	}
	e.pad(w.alignment)
	for _, t := range w.tensors {
		e.bytes(t.data)
		e.pad(w.alignment)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

// WriteFile writes the file to path through a temporary file in the same
// directory that is synced and then renamed over path, so path never holds a
// half-written file.
func (w *Writer) WriteFile(path string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf writer: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = w.WriteTo(tmp); err != nil {
		return fmt.Errorf("gguf writer %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf writer %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf writer %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf writer %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf writer: %w", err)
	}
	// Make the rename itself durable; not all systems can sync a directory.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// encoder writes little-endian GGUF fields and keeps the first error.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u8(v uint8)   { e.buf[0] = v; e.bytes(e.buf[:1]) }
func (e *encoder) u16(v uint16) { binary.LittleEndian.PutUint16(e.buf[:], v); e.bytes(e.buf[:2]) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:], v); e.bytes(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:], v); e.bytes(e.buf[:8]) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		n, err := e.w.WriteString(s)
		e.n += int64(n)
		e.err = err
	}
}

func (e *encoder) bool(b bool) {
	if b {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *encoder) pad(alignment int64) {
	var zeros [64]byte
	for e.err == nil && e.n%alignment != 0 {
		k := alignment - e.n%alignment
		e.bytes(zeros[:min(k, int64(len(zeros)))])
	}
}

// value writes v as typeOf classified it; for arrays the element type and
// count come first.
func (e *encoder) value(v any) {
	switch v := v.(type) {
	case uint8:
		e.u8(v)
	case int8:
		e.u8(uint8(v))
	case uint16:
		e.u16(v)
	case int16:
		e.u16(uint16(v))
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		e.bool(v)
	case string:
		e.str(v)
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	default:
		e.array(v)
	}
}

func (e *encoder) array(v any) {
	e.u32(uint32(elemType(v)))
	switch v := v.(type) {
	case []uint8:
		e.u64(uint64(len(v)))
		e.bytes(v)
	case []int8:
		writeEach(e, v, func(x int8) { e.u8(uint8(x)) })
	case []uint16:
		writeEach(e, v, e.u16)
	case []int16:
		writeEach(e, v, func(x int16) { e.u16(uint16(x)) })
	case []uint32:
		writeEach(e, v, e.u32)
	case []int32:
		writeEach(e, v, func(x int32) { e.u32(uint32(x)) })
	case []float32:
		writeEach(e, v, func(x float32) { e.u32(math.Float32bits(x)) })
	case []bool:
		writeEach(e, v, e.bool)
	case []string:
		writeEach(e, v, e.str)
	case []uint64:
		writeEach(e, v, e.u64)
	case []int64:
		writeEach(e, v, func(x int64) { e.u64(uint64(x)) })
	case []float64:
		writeEach(e, v, func(x float64) { e.u64(math.Float64bits(x)) })
	case []any:
		writeEach(e, v, e.array)
	default:
		panic(fmt.Sprintf("gguf: encoder.array of %T", v)) // AddKV checked the type
	}
}

func writeEach[T any](e *encoder, v []T, put func(T)) {
	e.u64(uint64(len(v)))
	for _, x := range v {
		put(x)
	}
}
