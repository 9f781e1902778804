package gguf

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// File is a parsed GGUF file. Its metadata lives on the heap; its tensor
// data stays in the mapping (or the slice given to Parse).
type File struct {
	Path       string // as given to Open or Parse
	Version    uint32 // 2 or 3
	Alignment  int64  // general.alignment, or 32
	DataOffset int64  // file offset of the data section; TensorInfo.Offset counts from here

	KVs     []KV         // in file order
	Tensors []TensorInfo // in file order

	data        []byte // whole image
	mapped      bool   // data is our mmap, unmapped by Close
	kvIndex     map[string]int
	tensorIndex map[string]int
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name   string
	Type   tensor.DType
	Shape  []int64 // ggml ne: innermost (contiguous) dimension first
	Offset int64   // from File.DataOffset, a multiple of File.Alignment
	Size   int64   // bytes
}

// Elems is the number of values in the tensor.
func (t *TensorInfo) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Open memory-maps the GGUF file at path read-only, asks the kernel to read
// it ahead (madvise WILLNEED) and parses it. Tensor data is never copied.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err) // *PathError names the file
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf %s: not a regular file", path)
	}
	size := st.Size()
	if size < headerSize {
		return nil, fmt.Errorf("gguf %s: file of %d bytes is shorter than a GGUF header (%d bytes)", path, size, headerSize)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf %s: file of %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: mmap: %w", path, err)
	}
	// Read-ahead is only advice: a failure here does not stop the load.
	_ = unix.Madvise(data, unix.MADV_WILLNEED)
	f, err := Parse(path, data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, err
	}
	f.mapped = true
	return f, nil
}

// Close unmaps the file. Slices returned by TensorData must not be used
// after Close; KVs, Tensors and the values they hold stay valid.
func (f *File) Close() error {
	data, mapped := f.data, f.mapped
	f.data, f.mapped = nil, false
	if mapped && data != nil {
		if err := unix.Munmap(data); err != nil {
			return fmt.Errorf("gguf %s: munmap: %w", f.Path, err)
		}
	}
	return nil
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns t's bytes: a slice of the mapping, not a copy, of
// length t.Size and no larger capacity. It returns nil after Close, or for a
// TensorInfo whose range does not lie in the file (Parse checked every
// tensor it returned).
func (f *File) TensorData(t *TensorInfo) []byte {
	if t == nil || f.data == nil || t.Offset < 0 || t.Size < 0 {
		return nil
	}
	room := int64(len(f.data)) - f.DataOffset
	if t.Offset > room || t.Size > room-t.Offset {
		return nil
	}
	lo := f.DataOffset + t.Offset
	hi := lo + t.Size
	return f.data[lo:hi:hi]
}

// Lookup finds a metadata entry by key.
func (f *File) Lookup(key string) (KV, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return KV{}, false
	}
	return f.KVs[i], true
}

// GetString returns a STRING value.
func (f *File) GetString(key string) (string, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// GetUint returns an integer value of any GGUF integer type, if it is not negative.
func (f *File) GetUint(key string) (uint64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	if u, ok := kv.Value.(uint64); ok {
		return u, true
	}
	i, ok := toInt64(kv.Value)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// GetInt returns an integer value of any GGUF integer type, if it fits int64.
func (f *File) GetInt(key string) (int64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return toInt64(kv.Value)
}

// GetFloat returns a FLOAT32 or FLOAT64 value, or an integer value converted.
func (f *File) GetFloat(key string) (float64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	case uint64:
		return float64(v), true
	}
	i, ok := toInt64(kv.Value)
	return float64(i), ok
}

// GetBool returns a BOOL value.
func (f *File) GetBool(key string) (bool, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// GetStrings returns an array of STRING. The slice is the File's own.
func (f *File) GetStrings(key string) ([]string, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]string)
	return s, ok
}

// GetFloat32s returns an array of FLOAT32 (the File's own slice), or an
// array of FLOAT64 converted.
func (f *File) GetFloat32s(key string) ([]float32, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	switch v := kv.Value.(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// GetInt32s returns an array of any integer type converted to int32 (an
// INT32 array is returned as the File's own slice). It reports false when a
// value does not fit int32.
func (f *File) GetInt32s(key string) ([]int32, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	switch v := kv.Value.(type) {
	case []int32:
		return v, true
	case []uint8:
		return convertInts(v)
	case []int8:
		return convertInts(v)
	case []uint16:
		return convertInts(v)
	case []int16:
		return convertInts(v)
	case []uint32:
		return convertInts(v)
	case []uint64:
		return convertInts(v)
	case []int64:
		return convertInts(v)
	}
	return nil, false
}

func convertInts[T uint8 | int8 | uint16 | int16 | uint32 | uint64 | int64](v []T) ([]int32, bool) {
	out := make([]int32, len(v))
	for i, x := range v {
		if x < 0 && int64(x) < math.MinInt32 || x > 0 && uint64(x) > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint64:
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}
