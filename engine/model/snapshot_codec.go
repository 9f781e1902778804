package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// Binary encoding of snapshot parts, for the prefix cache's files
// (engine/state). Little-endian throughout; every count is checked against
// the bytes that are left before anything is allocated, so garbage gives an
// error, never a panic or a huge allocation.
//
//	KVRows:    "KV" version(1) tokens(uvarint) layers(uvarint)
//	           per layer: type tag(1) dim(uvarint) payload length(uvarint) payload
//	           (tag 0: no attention in this layer, no payload; otherwise the
//	           payload is the K rows then the V rows, tokens*dim elements each,
//	           in the element type's own encoding)
//	Recurrent: "RC" version(1) layers(uvarint)
//	           per layer: state floats(uvarint) conv floats(uvarint) float32s
//
// Adding a KV element type (an FP8 cache, say) is one entry in kvElemTypes.

const codecVersion = 1

// kvElemType is one KV cache element type as the codec sees it.
type kvElemType struct {
	tag  byte
	name string
	// has reports whether a layer's rows are of this type.
	has func(l *kvRows) bool
	// count is the number of elements in each of K and V.
	count func(l *kvRows) int
	// payloadBytes is the encoded size of count elements of each of K and V.
	payloadBytes func(count int) int
	// put appends the encoded K and V rows to dst.
	put func(dst []byte, l *kvRows) []byte
	// get sets l's K and V from a payload of payloadBytes(count) bytes.
	get func(l *kvRows, payload []byte, count int)
}

var kvElemTypes = []kvElemType{
	{
		tag: 1, name: "f16",
		has:          func(l *kvRows) bool { return l.k16 != nil },
		count:        func(l *kvRows) int { return len(l.k16) },
		payloadBytes: func(n int) int { return 4 * n },
		put: func(dst []byte, l *kvRows) []byte {
			return appendU16s(appendU16s(dst, l.k16), l.v16)
		},
		get: func(l *kvRows, p []byte, n int) {
			l.k16, l.v16 = getU16s(p[:2*n]), getU16s(p[2*n:])
		},
	},
	{
		tag: 2, name: "f32",
		has:          func(l *kvRows) bool { return l.k32 != nil },
		count:        func(l *kvRows) int { return len(l.k32) },
		payloadBytes: func(n int) int { return 8 * n },
		put: func(dst []byte, l *kvRows) []byte {
			return appendF32s(appendF32s(dst, l.k32), l.v32)
		},
		get: func(l *kvRows, p []byte, n int) {
			l.k32, l.v32 = getF32s(p[:4*n]), getF32s(p[4*n:])
		},
	},
	{
		// E4M3 codes; the per-layer scales come from the model file (whose
		// identity the cache's fingerprint covers) and are not stored.
		tag: 3, name: "e4m3",
		has:          func(l *kvRows) bool { return l.k8 != nil },
		count:        func(l *kvRows) int { return len(l.k8) },
		payloadBytes: func(n int) int { return 2 * n },
		put: func(dst []byte, l *kvRows) []byte {
			return append(append(dst, l.k8...), l.v8...)
		},
		get: func(l *kvRows, p []byte, n int) {
			l.k8, l.v8 = append([]byte{}, p[:n]...), append([]byte{}, p[n:]...)
		},
	},
}

func kvElemOf(l *kvRows) *kvElemType {
	for i := range kvElemTypes {
		if kvElemTypes[i].has(l) {
			return &kvElemTypes[i]
		}
	}
	return nil
}

func kvElemByTag(tag byte) *kvElemType {
	for i := range kvElemTypes {
		if kvElemTypes[i].tag == tag {
			return &kvElemTypes[i]
		}
	}
	return nil
}

// Layout is the shape of a model's sequence state: per layer, the KV
// element type and width of an attention layer, the sizes of a DeltaNet
// layer's recurrent state and conv window. Decoding against a layout
// rejects rows or state made for another model or KV type.
type Layout struct {
	layers []layerShape
}

type layerShape struct {
	kvTag   byte // 0: no attention
	kvDim   int
	recS    int // 0: no DeltaNet
	recConv int
}

// StateLayout returns the layout of st (a state made by this package).
func StateLayout(st State) (Layout, error) {
	s, ok := st.(*state)
	if !ok {
		return Layout{}, fmt.Errorf("model: StateLayout of a %T, not a state of this package", st)
	}
	l := Layout{layers: make([]layerShape, len(s.kv))}
	for i := range s.kv {
		c := &s.kv[i]
		if c.dim > 0 {
			t := kvElemOf(&kvRows{k16: c.k16, v16: c.v16, k32: c.k32, v32: c.v32, k8: c.k8, v8: c.v8})
			if t == nil {
				return Layout{}, fmt.Errorf("model: layer %d has a KV element type the snapshot codec does not know", i)
			}
			l.layers[i].kvTag, l.layers[i].kvDim = t.tag, c.dim
		}
		if i < len(s.rec) {
			l.layers[i].recS, l.layers[i].recConv = len(s.rec[i].s), len(s.rec[i].conv)
		}
	}
	return l, nil
}

// LayoutOf returns the layout of m's sequence states.
func LayoutOf(m Model) (Layout, error) {
	return StateLayout(m.NewState(1))
}

// Equal reports whether two layouts are the same.
func (l Layout) Equal(o Layout) bool {
	if len(l.layers) != len(o.layers) {
		return false
	}
	for i := range l.layers {
		if l.layers[i] != o.layers[i] {
			return false
		}
	}
	return true
}

// String describes the layout briefly, e.g. "8 layers, KV f16x64 in 2, recurrent in 6".
func (l Layout) String() string {
	kinds := map[string]int{}
	rec := 0
	for _, s := range l.layers {
		if s.kvTag != 0 {
			name := fmt.Sprintf("tag%d", s.kvTag)
			if t := kvElemByTag(s.kvTag); t != nil {
				name = t.name
			}
			kinds[fmt.Sprintf("%sx%d", name, s.kvDim)]++
		}
		if s.recS != 0 {
			rec++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d layers", len(l.layers))
	for k, n := range kinds {
		fmt.Fprintf(&b, ", KV %s in %d", k, n)
	}
	if rec > 0 {
		fmt.Fprintf(&b, ", recurrent in %d", rec)
	}
	return b.String()
}

// AppendKVRows appends the encoding of r to dst.
func AppendKVRows(dst []byte, r *KVRows) ([]byte, error) {
	dst = append(dst, 'K', 'V', codecVersion)
	dst = binary.AppendUvarint(dst, uint64(r.n))
	dst = binary.AppendUvarint(dst, uint64(len(r.layers)))
	for i := range r.layers {
		l := &r.layers[i]
		t := kvElemOf(l)
		if t == nil {
			dst = append(dst, 0)
			continue
		}
		count := t.count(l)
		dim := 0
		if r.n > 0 {
			if count%r.n != 0 {
				return nil, fmt.Errorf("model: encode KV rows: layer %d holds %d values, not a multiple of %d tokens", i, count, r.n)
			}
			dim = count / r.n
		}
		dst = append(dst, t.tag)
		dst = binary.AppendUvarint(dst, uint64(dim))
		dst = binary.AppendUvarint(dst, uint64(t.payloadBytes(count)))
		dst = t.put(dst, l)
	}
	return dst, nil
}

// errShort is the error for input that ends early.
var errShort = errors.New("input ends early")

// decoder state over a byte slice.
type codecReader struct {
	b   []byte
	err error
}

func (r *codecReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// uvarint reads a count, which must be at most max.
func (r *codecReader) uvarint(what string, max int) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	if v > uint64(max) {
		r.err = fmt.Errorf("%s = %d, at most %d possible here", what, v, max)
		return 0
	}
	return int(v)
}

func (r *codecReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = errShort
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *codecReader) magic(a, b byte) {
	if x, y, v := r.byte(), r.byte(), r.byte(); r.err == nil && (x != a || y != b || v != codecVersion) {
		r.err = fmt.Errorf("not %c%c version %d data (starts %q, version %d)", a, b, codecVersion, []byte{x, y}, v)
	}
}

// DecodeKVRows decodes rows encoded by AppendKVRows. When want is not nil
// the rows must have its layers, element types and widths.
func DecodeKVRows(b []byte, want *Layout) (*KVRows, error) {
	r := &codecReader{b: b}
	r.magic('K', 'V')
	n := r.uvarint("tokens", math.MaxInt32)
	nl := r.uvarint("layers", len(b))
	if r.err != nil {
		return nil, fmt.Errorf("model: decode KV rows: %w", r.err)
	}
	if want != nil && nl != len(want.layers) {
		return nil, fmt.Errorf("model: decode KV rows: %d layers, the model has %d", nl, len(want.layers))
	}
	rows := &KVRows{n: n, layers: make([]kvRows, nl)}
	for i := 0; i < nl && r.err == nil; i++ {
		tag := r.byte()
		if r.err != nil {
			break
		}
		var ws layerShape
		if want != nil {
			ws = want.layers[i]
			// Rows of no tokens may leave a layer's slices nil: tag 0.
			if tag != ws.kvTag && !(n == 0 && tag == 0) {
				return nil, fmt.Errorf("model: decode KV rows: layer %d has KV type tag %d, the model %d", i, tag, ws.kvTag)
			}
		}
		if tag == 0 {
			continue
		}
		t := kvElemByTag(tag)
		if t == nil {
			return nil, fmt.Errorf("model: decode KV rows: layer %d: unknown KV type tag %d", i, tag)
		}
		dim := r.uvarint("dim", len(b))
		size := r.uvarint("payload bytes", len(r.b))
		if r.err != nil {
			break
		}
		if want != nil && n > 0 && dim != ws.kvDim {
			return nil, fmt.Errorf("model: decode KV rows: layer %d is %d wide, the model's %d", i, dim, ws.kvDim)
		}
		if n > 0 && dim == 0 || n == 0 && dim != 0 {
			return nil, fmt.Errorf("model: decode KV rows: layer %d: width %d for %d tokens", i, dim, n)
		}
		// size <= len(b) bounds every product below: each element takes
		// at least one byte.
		if dim > 0 && n > size/dim {
			return nil, fmt.Errorf("model: decode KV rows: layer %d: %d tokens x %d do not fit %d bytes", i, n, dim, size)
		}
		count := n * dim
		if t.payloadBytes(count) != size {
			return nil, fmt.Errorf("model: decode KV rows: layer %d: %s payload of %d bytes, want %d for %d tokens x %d",
				i, t.name, size, t.payloadBytes(count), n, dim)
		}
		p := r.bytes(size)
		if r.err != nil {
			break
		}
		t.get(&rows.layers[i], p, count)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the last layer", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("model: decode KV rows: %w", r.err)
	}
	return rows, nil
}

// AppendRecurrent appends the encoding of rc to dst.
func AppendRecurrent(dst []byte, rc *Recurrent) []byte {
	dst = append(dst, 'R', 'C', codecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(rc.layers)))
	for i := range rc.layers {
		l := &rc.layers[i]
		dst = binary.AppendUvarint(dst, uint64(len(l.s)))
		dst = binary.AppendUvarint(dst, uint64(len(l.conv)))
		dst = appendF32s(appendF32s(dst, l.s), l.conv)
	}
	return dst
}

// DecodeRecurrent decodes state encoded by AppendRecurrent. When want is
// not nil the state must have its layers and sizes.
func DecodeRecurrent(b []byte, want *Layout) (*Recurrent, error) {
	r := &codecReader{b: b}
	r.magic('R', 'C')
	nl := r.uvarint("layers", len(b))
	if r.err != nil {
		return nil, fmt.Errorf("model: decode recurrent state: %w", r.err)
	}
	if want != nil && nl != len(want.layers) {
		return nil, fmt.Errorf("model: decode recurrent state: %d layers, the model has %d", nl, len(want.layers))
	}
	rc := &Recurrent{layers: make([]recCopy, nl)}
	for i := 0; i < nl && r.err == nil; i++ {
		ns := r.uvarint("state floats", len(r.b)/4)
		nc := r.uvarint("conv floats", len(r.b)/4)
		if r.err != nil {
			break
		}
		if want != nil && (ns != want.layers[i].recS || nc != want.layers[i].recConv) {
			return nil, fmt.Errorf("model: decode recurrent state: layer %d holds %d+%d floats, the model %d+%d",
				i, ns, nc, want.layers[i].recS, want.layers[i].recConv)
		}
		if (ns == 0) != (nc == 0) {
			return nil, fmt.Errorf("model: decode recurrent state: layer %d holds %d state and %d conv floats", i, ns, nc)
		}
		p := r.bytes(4 * (ns + nc))
		if r.err != nil || ns == 0 {
			continue
		}
		rc.layers[i].s = getF32s(p[:4*ns])
		rc.layers[i].conv = getF32s(p[4*ns:])
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the last layer", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("model: decode recurrent state: %w", r.err)
	}
	return rc, nil
}

// littleEndian: the host's memory layout is the encoding's, so slices are
// copied as bytes (amd64, arm64); other hosts convert element by element.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func u16Bytes(v []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
}

func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func appendU16s(dst []byte, v []uint16) []byte {
	if littleEndian {
		return append(dst, u16Bytes(v)...)
	}
	dst = growBytes(dst, 2*len(v))
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint16(dst, x)
	}
	return dst
}

func appendF32s(dst []byte, v []float32) []byte {
	if littleEndian {
		return append(dst, f32Bytes(v)...)
	}
	dst = growBytes(dst, 4*len(v))
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n+len(b)/4)
		copy(nb, b)
		b = nb
	}
	return b
}

func getU16s(p []byte) []uint16 {
	v := make([]uint16, len(p)/2)
	if littleEndian {
		copy(u16Bytes(v), p)
		return v
	}
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(p[2*i:])
	}
	return v
}

func getF32s(p []byte) []float32 {
	v := make([]float32, len(p)/4)
	if littleEndian {
		copy(f32Bytes(v), p)
		return v
	}
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return v
}
