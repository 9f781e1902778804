package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

const (
	magic            = "GGUF"
	defaultAlignment = 32
	alignmentKey     = "general.alignment"
	maxDims          = 4  // GGML_MAX_DIMS
	maxArrayDepth    = 16 // arrays of arrays: far deeper than any real file
	headerSize       = 4 + 4 + 8 + 8

	// The fewest bytes one KV and one tensor info can take; used to refuse
	// counts that the rest of the file could not possibly hold before
	// allocating anything sized by them.
	minKVSize     = 8 + 1 + 4 + 1     // key length, 1-byte key, type, 1-byte value
	minTensorSize = 8 + 4 + 8 + 4 + 8 // name length, n_dims, one dim, type, offset
	maxHint       = 4096              // largest capacity preallocated for KVs and tensors
)

// errEOF marks a read past the end of the image; the message is filled in by
// the parser with what was being read and where.
var errEOF = errors.New("runs past end of file")

// Parse reads the GGUF image data. name is used in error messages (Open
// passes the path). Tensor data is not copied: the slices TensorData returns
// alias data, which must stay unchanged while the File is in use. Close on a
// parsed File only drops that reference.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{data: data}
	f, err := p.file()
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", name, err)
	}
	f.Path = name
	f.data = data
	return f, nil
}

type parser struct {
	data []byte
	pos  int // next byte to read
}

func (p *parser) left() int { return len(p.data) - p.pos }

// take returns the next n bytes, or an error naming what they were for.
func (p *parser) take(n uint64, what string) ([]byte, error) {
	if n > uint64(p.left()) {
		return nil, fmt.Errorf("%s at offset %d (%d bytes) %w (size %d)", what, p.pos, n, errEOF, len(p.data))
	}
	b := p.data[p.pos : p.pos+int(n)]
	p.pos += int(n)
	return b, nil
}

func (p *parser) u32(what string) (uint32, error) {
	b, err := p.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(what string) (uint64, error) {
	b, err := p.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string and copies it, so metadata outlives the mapping.
func (p *parser) str(what string) (string, error) {
	n, err := p.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(p.left()) {
		return "", fmt.Errorf("%s: length %d at offset %d %w (size %d)", what, n, p.pos-8, errEOF, len(p.data))
	}
	b, _ := p.take(n, what)
	return string(b), nil
}

func (p *parser) file() (*File, error) {
	m, err := p.take(4, "magic")
	if err != nil {
		return nil, fmt.Errorf("not a GGUF file: %w", err)
	}
	if string(m) != magic {
		return nil, fmt.Errorf("not a GGUF file: magic %q, want %q", m, magic)
	}
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, fmt.Errorf("GGUF version 1 is not supported (only 2 and 3); convert the model again with a current llama.cpp")
	case version != 0 && version&0xFFFF == 0:
		return nil, fmt.Errorf("GGUF version %#x looks byte-swapped: big-endian GGUF files are not supported", version)
	default:
		return nil, fmt.Errorf("GGUF version %d is not supported (only 2 and 3)", version)
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64("kv count")
	if err != nil {
		return nil, err
	}
	if nKV > uint64(p.left()/minKVSize) {
		return nil, fmt.Errorf("kv count %d is more than the %d bytes after the header could hold", nKV, p.left())
	}
	if nTensors > uint64(p.left()/minTensorSize) {
		return nil, fmt.Errorf("tensor count %d is more than the %d bytes after the header could hold", nTensors, p.left())
	}

	// Capacity hints are capped: memory grows with what is actually read,
	// not with what the header claims.
	kvHint, tensorHint := min(nKV, maxHint), min(nTensors, maxHint)
	f := &File{
		Version:     version,
		Alignment:   defaultAlignment,
		KVs:         make([]KV, 0, kvHint),
		Tensors:     make([]TensorInfo, 0, tensorHint),
		kvIndex:     make(map[string]int, kvHint),
		tensorIndex: make(map[string]int, tensorHint),
	}
	for i := range nKV {
		kv, err := p.kv(i)
		if err != nil {
			return nil, err
		}
		if j, dup := f.kvIndex[kv.Key]; dup {
			return nil, fmt.Errorf("duplicate key %q (kvs %d and %d)", kv.Key, j, i)
		}
		f.kvIndex[kv.Key] = len(f.KVs)
		f.KVs = append(f.KVs, kv)
	}
	if kv, ok := f.Lookup(alignmentKey); ok {
		a, isU32 := kv.Value.(uint32)
		if !isU32 {
			return nil, fmt.Errorf("key %q is %s, want UINT32", alignmentKey, kvTypeName(kv))
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("key %q is %d, want a non-zero power of two", alignmentKey, a)
		}
		f.Alignment = int64(a)
	}

	for i := range nTensors {
		t, err := p.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if j, dup := f.tensorIndex[t.Name]; dup {
			return nil, fmt.Errorf("duplicate tensor name %q (tensors %d and %d)", t.Name, j, i)
		}
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	// The data section starts at the next multiple of the alignment (the
	// padding may be missing from a file without tensors).
	start := alignUp(int64(p.pos), f.Alignment)
	if start > int64(len(p.data)) {
		if len(f.Tensors) > 0 {
			return nil, fmt.Errorf("data section at offset %d (after tensor infos end at %d, aligned to %d) %w (size %d)",
				start, p.pos, f.Alignment, errEOF, len(p.data))
		}
		start = int64(len(p.data))
	}
	f.DataOffset = start
	if err := checkData(f.Tensors, start, int64(len(p.data))); err != nil {
		return nil, err
	}
	return f, nil
}

func (p *parser) kv(i uint64) (KV, error) {
	key, err := p.str(fmt.Sprintf("key of kv %d", i))
	if err != nil {
		return KV{}, err
	}
	if key == "" {
		return KV{}, fmt.Errorf("key of kv %d is empty", i)
	}
	t, err := p.u32(fmt.Sprintf("key %q: value type", key))
	if err != nil {
		return KV{}, err
	}
	v, err := p.value(ValueType(t), 0)
	if err != nil {
		return KV{}, fmt.Errorf("key %q: %w", key, err)
	}
	return KV{Key: key, Type: ValueType(t), Value: v}, nil
}

// value reads one value of type t; depth counts enclosing arrays.
func (p *parser) value(t ValueType, depth int) (any, error) {
	if t == TypeArray {
		return p.array(depth + 1)
	}
	if t == TypeString {
		return p.str("string")
	}
	size := t.fixedSize()
	if size == 0 {
		return nil, fmt.Errorf("unknown value type %d", uint32(t))
	}
	b, err := p.take(uint64(size), t.String()+" value")
	if err != nil {
		return nil, err
	}
	return decodeScalar(t, b), nil
}

func decodeScalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("gguf: decodeScalar of " + t.String())
}

// array reads an array's element type, count and elements into a typed slice.
func (p *parser) array(depth int) (any, error) {
	if depth > maxArrayDepth {
		return nil, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	et, err := p.u32("array element type")
	if err != nil {
		return nil, err
	}
	t := ValueType(et)
	n, err := p.u64("array length")
	if err != nil {
		return nil, err
	}
	min := t.minSize()
	if min == 0 {
		return nil, fmt.Errorf("array of unknown value type %d", et)
	}
	// Bound the count by the bytes left before allocating anything for it.
	if n > uint64(p.left()/min) {
		return nil, fmt.Errorf("array of %d %s (%d bytes or more each) at offset %d %w (size %d, %d bytes left)",
			n, t, min, p.pos-12, errEOF, len(p.data), p.left())
	}
	switch t {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = p.str("string"); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			if out[i], err = p.array(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	b, _ := p.take(n*uint64(min), "array") // fits: checked above
	return decodeArray(t, b, int(n)), nil
}

func decodeArray(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		out := make([]uint8, n)
		copy(out, b)
		return out
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(b[i])
		}
		return out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = b[i] != 0
		}
		return out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(b[2*i:])
		}
		return out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(b[2*i:]))
		}
		return out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(b[4*i:])
		}
		return out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(b[4*i:]))
		}
		return out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(b[8*i:])
		}
		return out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
		return out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return out
	}
	panic("gguf: decodeArray of " + t.String())
}

func (p *parser) tensorInfo(i uint64, alignment int64) (TensorInfo, error) {
	name, err := p.str(fmt.Sprintf("name of tensor %d", i))
	if err != nil {
		return TensorInfo{}, err
	}
	fail := func(format string, args ...any) (TensorInfo, error) {
		return TensorInfo{}, fmt.Errorf("tensor %q: "+format, append([]any{name}, args...)...)
	}
	nDims, err := p.u32("number of dimensions")
	if err != nil {
		return fail("%w", err)
	}
	if nDims < 1 || nDims > maxDims {
		return fail("%d dimensions, want 1 to %d", nDims, maxDims)
	}
	shape := make([]int64, nDims)
	count := int64(1)
	for d := range shape {
		ne, err := p.u64("dimension")
		if err != nil {
			return fail("dimension %d: %w", d, err)
		}
		if ne == 0 || ne > math.MaxInt64 {
			return fail("dimension %d is %d, want 1 to 2^63-1", d, ne)
		}
		hi, lo := bits.Mul64(uint64(count), ne)
		if hi != 0 || lo > math.MaxInt64 {
			return fail("element count of shape %v overflows int64", append(shape[:d], int64(ne)))
		}
		shape[d], count = int64(ne), int64(lo)
	}
	typ, err := p.u32("type")
	if err != nil {
		return fail("%w", err)
	}
	dt := tensor.DType(typ)
	if !dt.Known() {
		return fail("unknown tensor type %d", typ)
	}
	size, err := tensorSize(dt, shape, count)
	if err != nil {
		return fail("%w", err)
	}
	off, err := p.u64("offset")
	if err != nil {
		return fail("%w", err)
	}
	if off > math.MaxInt64 {
		return fail("offset %d overflows int64", off)
	}
	if int64(off)%alignment != 0 {
		return fail("offset %d is not a multiple of the alignment %d", off, alignment)
	}
	return TensorInfo{Name: name, Type: dt, Shape: shape, Offset: int64(off), Size: size}, nil
}

// tensorSize is the byte size of a tensor of type dt with the given shape
// and element count, checking the rows hold whole blocks (as ggml does).
func tensorSize(dt tensor.DType, shape []int64, count int64) (int64, error) {
	be, bb := int64(dt.BlockElems()), int64(dt.BlockBytes())
	if shape[0]%be != 0 {
		return 0, fmt.Errorf("type %s: row of %d values is not a multiple of the block size %d", dt, shape[0], be)
	}
	blocks := count / be
	if blocks > math.MaxInt64/bb {
		return 0, fmt.Errorf("type %s: size of shape %v overflows int64", dt, shape)
	}
	return blocks * bb, nil
}

// checkData checks every tensor's bytes lie inside the file and no two overlap.
func checkData(ts []TensorInfo, dataOffset, fileSize int64) error {
	room := fileSize - dataOffset
	for i := range ts {
		t := &ts[i]
		if t.Offset > room || t.Size > room-t.Offset {
			start := uint64(dataOffset) + uint64(t.Offset) // both < 2^63: no wrap
			if end, carry := bits.Add64(start, uint64(t.Size), 0); carry == 0 {
				return fmt.Errorf("tensor %q: data [%d, %d) %w (size %d)", t.Name, start, end, errEOF, fileSize)
			}
			return fmt.Errorf("tensor %q: data at %d, %d bytes, %w (size %d)", t.Name, start, t.Size, errEOF, fileSize)
		}
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ts[order[a]].Offset < ts[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		a, b := &ts[order[k-1]], &ts[order[k]]
		if a.Offset+a.Size > b.Offset {
			return fmt.Errorf("tensors %q [%d, %d) and %q [%d, %d) overlap", a.Name,
				dataOffset+a.Offset, dataOffset+a.Offset+a.Size, b.Name, dataOffset+b.Offset, dataOffset+b.Offset+b.Size)
		}
	}
	return nil
}

func alignUp(n, alignment int64) int64 {
	return (n + alignment - 1) / alignment * alignment
}

func kvTypeName(kv KV) string {
	if kv.Type == TypeArray {
		return "ARRAY of " + elemType(kv.Value).String()
	}
	return kv.Type.String()
}
