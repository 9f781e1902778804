package tensor

import "fmt"

// DType is a weight or activation element type. The values are ggml's
// `ggml_type` ids, so a GGUF tensor's type field converts directly.
type DType uint32

// The ggml type ids this engine knows (ggml/include/ggml.h).
const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q8_1 DType = 9
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	Q8_K DType = 15
	// IQ4_NL and IQ4_XS are 4-bit non-linear levels (kvalues_iq4nl).
	IQ4_NL DType = 20
	IQ4_XS DType = 23
	// The other types of ggml's table: a file may hold them, the engine
	// reads their layout (so that it can name them when it refuses them).
	IQ2_XXS DType = 16
	IQ2_XS  DType = 17
	IQ3_XXS DType = 18
	IQ1_S   DType = 19
	IQ3_S   DType = 21
	IQ2_S   DType = 22
	IQ1_M   DType = 29
	TQ1_0   DType = 34
	TQ2_0   DType = 35
	MXFP4   DType = 39
	Q1_0    DType = 41
	Q2_0    DType = 42
	I8      DType = 24
	I16     DType = 25
	I32     DType = 26
	I64     DType = 27
	F64     DType = 28
	BF16    DType = 30
	NVFP4   DType = 40
)

// E4M3 is the engine's FP8 KV-cache element (OCP e4m3fn, one byte a
// value, see fp8.go). ggml has no FP8 type, so E4M3 lies outside ggml's id
// range (which stops below engineTypes): no GGUF file holds it, Known
// reports false for it, and the gguf reader and writer refuse it.
const E4M3 DType = engineTypes + 1

// engineTypes is where the engine's own type ids start, far above ggml's
// (GGML_TYPE_COUNT is 43 in 2026).
const engineTypes DType = 1 << 16

type dtypeInfo struct {
	name       string
	blockElems int // values per block
	blockBytes int // bytes per block
}

var dtypes = map[DType]dtypeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ1_M:   {"IQ1_M", 256, 56},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
	Q1_0:    {"Q1_0", 128, 18},
	Q2_0:    {"Q2_0", 64, 18},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	BF16:    {"BF16", 1, 2},
	NVFP4:   {"NVFP4", 64, 36},
	E4M3:    {"E4M3", 1, 1},
}

// Known reports whether t is a ggml type whose block layout the engine
// knows: a type a GGUF tensor may have. The engine's own types (E4M3) are
// not.
func (t DType) Known() bool { _, ok := dtypes[t]; return ok && t < engineTypes }

func (t DType) String() string {
	if i, ok := dtypes[t]; ok {
		return i.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// BlockElems is the number of values one block of t holds (1 for plain types).
func (t DType) BlockElems() int { return dtypes[t].blockElems }

// BlockBytes is the size in bytes of one block of t.
func (t DType) BlockBytes() int { return dtypes[t].blockBytes }

// RowBytes is the size in bytes of n values of type t, or an error when n is
// not a whole number of blocks or the type is unknown.
func (t DType) RowBytes(n int64) (int64, error) {
	i, ok := dtypes[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%int64(i.blockElems) != 0 {
		return 0, fmt.Errorf("%s: %d values is not a multiple of the block size %d", i.name, n, i.blockElems)
	}
	return n / int64(i.blockElems) * int64(i.blockBytes), nil
}
