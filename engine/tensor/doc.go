// Package tensor holds the numbers of the engine: weight types and their
// codecs, and every hot loop the model runs.
//
// What is here:
//   - DType, the ggml type ids, with their block layouts (dtype.go);
//   - F16 and BF16 conversions and the Q8_0 codec, bit-exact with ggml
//     (half.go, quant.go); QuantizeRow/DequantizeRow for F32, F16, BF16, Q8_0
//     and NVFP4;
//   - the E2M1 (FP4), E4M3 and unsigned E4M3 (FP8) codes (fp8.go); E4M3,
//     the engine's own DType for the FP8 KV cache (outside ggml's ids), with
//     its row codec and the dot and axpy loops attention runs on it
//     (e4m3row.go); and NVFP4 in ggml's block_nvfp4 layout with ModelOpt's
//     quantizer and three dot products, which Pool.SetNVFP4Activations
//     picks from: W4A8 (ggml's, Q8_0 activations; nvfp4.go), W4A16 (F32
//     activations; nvfp4.go) and W4A4 (activations quantized to NVFP4 at
//     run time with the weight's input scale, Matrix.InputScale, or one
//     per vector, and exact E2M1 x E2M1 integer products; nvfp4a4.go);
//   - llama.cpp's legacy and K-quant block types (Q4_0, Q4_1, Q5_0, Q5_1,
//     IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS): decoders as ggml's, and
//     products with activations quantized as ggml-cpu does for each (Q8_0,
//     Q8_1, Q8_K), in the order of its AVX2 kernels, including the
//     arithmetic of the matrices it repacks (kquant.go, kquant_dot.go; AVX2
//     row kernels for every type but IQ4_NL's vec_dot in kquant_amd64.s and
//     kquant_tile_amd64.s, register tiles of several rows against several
//     vectors (AVX2 and AVX-512 VNNI) for repacked Q4_0/IQ4_NL and Q4_K,
//     Q5_K, Q6_K and Q2_K in kquant_tile_amd64.s, tiles for Q5_0, Q4_1,
//     Q5_1, Q3_K and IQ4_XS (AVX-512 VNNI and AVX2) and the AVX2 forms of
//     the Q2_K and Q5_K ones in kquant_tile2_amd64.s, the Q8_K activation
//     quantizer in kquant_quant_amd64.s; each with its Go twin in
//     kquant_tile.go, kquant_dot.go or kquant.go). CPUSupports (support.go) is
//     the list of types the engine runs; every other ggml type parses and
//     is refused at load;
//   - Matrix, a weight matrix in ggml's layout, usually a slice of a mapped
//     GGUF file, and RowTo for embedding lookups;
//   - Pool, a fixed set of worker goroutines, with MatVec and MatMul, the
//     matrix products (matmul.go, kernels.go), and Run for other parallel loops;
//   - the small vector operations of the model layers: Dot, Axpy, Scale, Add,
//     Mul, RMSNorm, Softmax, SiLU (vecops.go).
//
// The arithmetic is ggml's CPU backend's, so that greedy decoding can match
// llama.cpp token for token: activations are rounded to F16 or BF16, or
// quantized to Q8_0, before the dot product with weights of that type, and
// the dot products accumulate in the order of ggml's x86 kernels (AVX2 with
// FMA), fused multiply-adds included. testdata/ggml holds outputs of
// llama.cpp's own library that the tests compare with bit for bit.
//
// Hot loops live in this package and nowhere else. The kernels are plain Go
// (kernels.go, lanes.go), unrolled and free of bounds checks in their inner
// loops. On amd64 CPUs with AVX2, FMA3 and F16C the F16, BF16,
// Q8_0 and NVFP4 (W4A8, W4A4) dot products run in Go assembly instead
// (dot_amd64.s, nvfp4_amd64.s, chosen at start-up in dot_amd64.go, entered
// through dot.go): the same lanes, the same order, hardware FMA where the
// twins emulate it, so the same bits, which dot_amd64_test.go and
// nvfp4_amd64_test.go check against the plain-Go twins. On arm64 NEON runs
// the F32 dot (dot_arm64.s), the F16 and BF16 dots (half_arm64.s) and, on
// CPUs with SDOT, the Q8_0, NVFP4 W4A8 (q8neon_arm64.s) and W4A4
// (nvfp4_arm64.s) dots, one vector at a time, each checked against its
// twin by the *_arm64_test.go files (make test-arm64 runs them under
// qemu-aarch64-static). W4A16 has no assembly yet. On arm64 CPUs with
// SDOT, several vectors at once run the Q8_0 and W4A8 products in NEON
// tile kernels (gemm_arm64.s, gemm_arm64.go): one weight row against a tile
// group of two, four or eight vectors in gemm.go's packed layout, each
// (row, vector) pair keeping its one-vector kernel's eight lanes and order,
// so the bits are the twins' (gemm_arm64_test.go); F16, BF16 and W4A4 with
// several vectors run their one-vector paths there. SMMLA (I8MM) and
// BFMMLA (BF16), detected from HWCAP2 (hwcap_arm64.go), are not used: an
// SMMLA output sums eight int8 products where a twin's lane sums four, so
// it gives the twins' bits only with half its operands zero, no faster than
// SDOT; BFMMLA sums four BF16 products and rounds to odd
// (mmla_arm64_test.go runs both).
// The K-quant and legacy block products run on arm64 CPUs with SDOT in
// kquant_arm64.s (kquant_arm64.go): whole-row kernels for every type but
// IQ4_NL's vec_dot, Q4_K's and Q6_K's block steps for several vectors,
// and the Q8_K activation quantizer in plain NEON on every arm64 CPU; each
// checked against its twin by kquant_arm64_test.go.
//
// On amd64 CPUs with AVX-512 (F, BW, VL and VNNI) the Q8_0 and NVFP4 W4A8
// products, one vector and several alike, run in vnni_amd64.s instead
// (VPDPBUSD on weights offset to unsigned bytes, a per-block correction
// packed with the activations), and F16 and BF16 with eight or more
// vectors in half512_amd64.s; a 512-bit register holds two (row, vector)
// pairs' eight lanes side by side, so the lanes, their order and the bits
// stay the AVX2 kernels' and the twins' (vnni_amd64_test.go,
// half512_amd64_test.go). They are chosen at start-up from CPUID
// (vnni_amd64.go, half512_amd64.go). On amd64 CPUs with AVX-VNNI but
// without the AVX-512 set (Intel's client cores since Alder Lake) the same
// Q8_0 and NVFP4 W4A8 products, one vector and several alike, run in
// avxvnni_amd64.s: the VEX-encoded, 256-bit VPDPBUSD (spelled out in BYTE
// directives, which Go's assembler does not know) on the activations
// packVNNI packs, with the same offset and correction, one (row, vector)
// pair's eight lanes per ymm register, and the tiles one row at a time
// against groups of eight, four or two vectors; so the same bits again
// (avxvnni_amd64_test.go). useAVXVNNI picks them at start-up
// (avxvnni_amd64.go), and the AVX-512 kernels stay preferred where both are
// present. The one-vector kernels read four
// rows at a time a quarter of the range apart (streamQuarter), which the
// hardware prefetchers follow far better than four adjacent rows.
//
// Several vectors at once (MatMul: prefill chunks, speculative verify
// batches) go through tile kernels that unpack each weight block once for
// up to eight vectors (gemm_amd64.s, gemm.go; the activation quantizer in
// gemm_q8act_amd64.s); each (row, vector) pair keeps its own accumulators
// in the one-vector kernel's order, so the bits are the same, which
// gemm_amd64_test.go checks. Attention and the Gated DeltaNet step have their own kernels
// (attn_kernels.go with the twins, attn_amd64.s), exported for engine/model;
// SiLU runs ggml_v_silu's blocks of eight there too.
//
// A panic in a loop's function on a Pool helper goroutine is carried to the
// caller of the loop (HelperPanic), where the engine contains it.
//
// What is not here: file formats (engine/gguf), model structure
// (engine/model), or any state that outlives a call, apart from the scratch
// buffers a Pool reuses.
package tensor
