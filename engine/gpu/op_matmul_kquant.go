package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The K-quant and legacy block types (the GGUF files people download:
// Q4_K_M, Q5_K_M, Q6_K, Q4_0, ...) on the scalar shaders, with the
// weights in their blocks as the file has them. The activations are
// quantized as the CPU engine quantizes them for each type (ggml's
// vec_dot_type): Q8_K for the K-quants and IQ4_XS (quant_q8_k), Q8_0 for
// Q4_0, Q5_0 and IQ4_NL (quant_q8_0, the host's flavour, as for Q8_0
// weights), Q8_1 for Q4_1 and Q5_1 (quant_q8_1), bit for bit; the products
// (matmul_kquant, matmul_legacy) make the CPU's exact integer sums per
// chunk of 16 or 32 values and scale them in F32 in another order than the
// CPU, like matmul_q8_0. On the cooperative-matrix path (passes of
// Device.coopMin vectors or more) every one of these types unpacks its
// blocks to int8 tiles as it is staged (matmul_cm_kquant: the same integer
// sums per 32-value chunk, on the tensor cores). Embedding rows:
// getrows_kquant.

const (
	mmQ8K  mmKind = mmFP4 + 1 + iota // Q8_K blocks: int8 quants, then an F32 scale per 256 values
	mmQ8_1                           // Q8_1 blocks: Q8_0's quants and scales, then s = d*Σq per 32 values
)

// kqType is how one block type runs: its activations, its scalar product
// shader and that shader's TYPE, and the TYPE of getrows_kquant and of
// matmul_cm_kquant.
type kqType struct {
	act     mmKind
	shader  string
	typ     uint32
	getRows uint32
}

var kqTypes = map[tensor.DType]kqType{
	tensor.Q4_K:   {mmQ8K, "matmul_kquant", 0, 0},
	tensor.Q5_K:   {mmQ8K, "matmul_kquant", 1, 1},
	tensor.Q6_K:   {mmQ8K, "matmul_kquant", 2, 2},
	tensor.Q2_K:   {mmQ8K, "matmul_kquant", 3, 3},
	tensor.Q3_K:   {mmQ8K, "matmul_kquant", 4, 4},
	tensor.IQ4_XS: {mmQ8K, "matmul_kquant", 5, 5},
	tensor.Q4_0:   {mmQ8, "matmul_legacy", 0, 6},
	tensor.Q4_1:   {mmQ8_1, "matmul_legacy", 1, 7},
	tensor.Q5_0:   {mmQ8, "matmul_legacy", 2, 8},
	tensor.Q5_1:   {mmQ8_1, "matmul_legacy", 3, 9},
	tensor.IQ4_NL: {mmQ8, "matmul_legacy", 4, 10},
}

// kqActivations is the conversion a product with weights of type t needs,
// if t is one of these types.
func kqActivations(t tensor.DType) (mmKind, bool) {
	k, ok := kqTypes[t]
	return k.act, ok
}

// kqScratch is the scratch of v converted activations of kind k (mmQ8K,
// mmQ8_1), in bytes.
func kqScratch(k mmKind, v int64) int64 {
	if k == mmQ8K {
		return v + v/256*4
	}
	return v + v/32*8
}

// kqQuantize records the conversion of vals activations (n vectors) from
// x (words from xoff) into the scratch s (words from soff) for kind k, and
// returns the offsets, in words, of the scales and of Q8_1's sums.
func (r *Recorder) kqQuantize(k mmKind, x, s Range, xoff, soff, vals uint32) (scaleOff, ioff uint32) {
	scaleOff = soff + vals/4
	if k == mmQ8K {
		r.Dispatch("quant_q8_k", nil, Groups(int(vals/256)), []uint32{vals / 256, xoff, soff, scaleOff}, x, s, s)
		return scaleOff, 0
	}
	blocks := vals / 32
	ioff = scaleOff + blocks
	r.Dispatch("quant_q8_1", []uint32{mmConvWG}, Groups(int((blocks+mmConvWG-1)/mmConvWG)),
		[]uint32{blocks, xoff, soff, scaleOff, ioff}, x, s, s)
	return scaleOff, ioff
}

// kqShader is the scalar product shader for weights of type t and its
// specialization constants after the common ones (WG, NV, TPR): for the
// K-quants, matmul_kquant_dp (packed dot products) where the device has
// shaderIntegerDotProduct, else matmul_kquant; the same integer sums
// either way.
func (r *Recorder) kqShader(t tensor.DType, spec []uint32) (string, []uint32) {
	k := kqTypes[t]
	name := k.shader
	if name == "matmul_kquant" && r.dev.info.IntDot {
		name = "matmul_kquant_dp"
	}
	return name, append(spec, k.typ)
}

// kqTiles says whether products with weights of type t have a
// cooperative-matrix shader: matmul_cm_kquant takes every block type here,
// its TYPE being getrows_kquant's.
func kqTiles(t tensor.DType) bool {
	_, ok := kqTypes[t]
	return ok
}

// kqTileDepth says whether matmul_cm_kquant runs with int8 tile t: a depth
// that divides the 16-value halves of a chunk or is a whole chunk (8, 16
// or 32: what drivers list for int8).
func kqTileDepth(t tile) bool { return t.K == 8 || t.K == 16 || t.K == 32 }
