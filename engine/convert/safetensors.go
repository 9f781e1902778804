package convert

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// The safetensors format (huggingface/safetensors, docs "Format"): an 8-byte
// little-endian header size N, N bytes of UTF-8 JSON mapping each tensor name
// to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// byte after the header) plus an optional "__metadata__" string map, then the
// raw little-endian tensor data, row-major.

// maxHeaderBytes bounds the JSON header (the reference implementation
// refuses headers over 100 MB).
const maxHeaderBytes = 100 << 20

// stDTypes are the safetensors dtypes this package knows, with their sizes.
var stDTypes = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
	"U16": 2, "U32": 4, "U64": 8,
	"F8_E4M3": 1, "F8_E5M2": 1,
}

// stTensor is one tensor of a safetensors file.
type stTensor struct {
	Name  string
	DType string
	Shape []int64 // PyTorch order: outermost first
	File  string  // the file it lives in
	Data  []byte  // its bytes, inside the file's mapping

	offset int64 // of Data within the file's data section
}

// elems is the number of values.
func (t *stTensor) elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// stFile is an open safetensors file: its tensors in header order (sorted by
// data offset) and the read-only mapping that holds their data.
type stFile struct {
	Path    string
	Tensors []stTensor
	mapping []byte
}

// openSafetensors maps path and parses and checks its header.
func openSafetensors(path string) (*stFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("safetensors %s: %d bytes is too short for the 8-byte header size", path, size)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("safetensors %s: %d bytes cannot be mapped", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: mmap: %w", path, err)
	}
	sf, err := parseSafetensors(path, data)
	if err != nil {
		unix.Munmap(data)
		return nil, err
	}
	sf.mapping = data
	return sf, nil
}

// Close unmaps the file; its tensors' Data must not be used afterwards.
func (f *stFile) Close() error {
	if f.mapping == nil {
		return nil
	}
	err := unix.Munmap(f.mapping)
	f.mapping = nil
	return err
}

// parseSafetensors reads the header of the file bytes data (name is for
// errors) and checks every entry against the data that follows it.
func parseSafetensors(name string, data []byte) (*stFile, error) {
	fail := func(format string, args ...any) (*stFile, error) {
		return nil, fmt.Errorf("safetensors %s: "+format, append([]any{name}, args...)...)
	}
	if len(data) < 8 {
		return fail("%d bytes is too short for the 8-byte header size", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeaderBytes {
		return fail("header size %d is over the limit of %d bytes", n, maxHeaderBytes)
	}
	if n > uint64(len(data)-8) {
		return fail("header size %d runs past the end of the file (%d bytes): truncated?", n, len(data))
	}
	header := data[8 : 8+n]
	body := data[8+n:]

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return fail("header is not a JSON object: %v", err)
	}
	f := &stFile{Path: name}
	for key, msg := range raw {
		if key == "__metadata__" {
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				return fail("__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		var e struct {
			DType   *string  `json:"dtype"`
			Shape   *[]int64 `json:"shape"`
			Offsets *[]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return fail("tensor %q: header entry is not {dtype, shape, data_offsets}: %v", key, err)
		}
		if e.DType == nil || e.Shape == nil || e.Offsets == nil {
			return fail("tensor %q: header entry lacks dtype, shape or data_offsets", key)
		}
		size, ok := stDTypes[*e.DType]
		if !ok {
			return fail("tensor %q: unknown dtype %q", key, *e.DType)
		}
		count := int64(1)
		for _, d := range *e.Shape {
			if d < 0 {
				return fail("tensor %q: negative dimension in shape %v", key, *e.Shape)
			}
			if d != 0 && count > math.MaxInt64/int64(size)/d {
				return fail("tensor %q: shape %v is too large", key, *e.Shape)
			}
			count *= d
		}
		off := *e.Offsets
		if len(off) != 2 {
			return fail("tensor %q: data_offsets %v: want [begin, end]", key, off)
		}
		if off[0] < 0 || off[1] < off[0] || off[1] > int64(len(body)) {
			return fail("tensor %q: data_offsets [%d, %d] are outside the %d data bytes (truncated file or lying header)", key, off[0], off[1], len(body))
		}
		if want := count * int64(size); off[1]-off[0] != want {
			return fail("tensor %q: data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", key, off[0], off[1], off[1]-off[0], *e.DType, *e.Shape, want)
		}
		f.Tensors = append(f.Tensors, stTensor{
			Name: key, DType: *e.DType, Shape: append([]int64{}, (*e.Shape)...),
			File: name, Data: body[off[0]:off[1]:off[1]], offset: off[0],
		})
	}
	// Tensors must not share bytes (the reference implementation also wants
	// them contiguous; holes are harmless to a reader, overlaps are not).
	sort.Slice(f.Tensors, func(i, j int) bool {
		a, b := &f.Tensors[i], &f.Tensors[j]
		if a.offset != b.offset {
			return a.offset < b.offset
		}
		return a.Name < b.Name
	})
	var end int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if len(t.Data) == 0 {
			continue
		}
		if t.offset < end {
			return fail("tensor %q: data_offsets overlap the tensor before it", t.Name)
		}
		end = t.offset + int64(len(t.Data))
	}
	return f, nil
}
