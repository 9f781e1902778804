// Package synth writes synthetic models.
//
// [Build] (and [Write], to a file) makes a deterministic random-weight model in llama.cpp's qwen35
// layout (Qwen3.5: three Gated DeltaNet layers, then one gated
// full-attention layer, repeated, optionally with a multi-token-prediction
// block), used where a test or a benchmark needs the real code paths of the
// target architecture but no real checkpoint can be shipped.
//
// The files follow what llama.cpp's converter writes for Qwen3.5
// (conversion/qwen.py, src/models/qwen35.cpp): tensor names and shapes,
// metadata keys and their GGUF types, the +1 of the zero-centred RMSNorms
// folded into the stored norm weights, ssm_a stored as -exp(A_log)
// (negative), dt_bias stored as ssm_dt.bias, conv1d as {kernel, channels},
// 1-D tensors and ssm_conv1d in F32. llama.cpp loads and runs them; the
// goldens it produced are in testdata/qwen35 at the repository root.
//
// Synthetic weights are scaled so activations stay near unit RMS through all
// layers and the next-token distribution is peaked, so greedy decoding is
// decided by clear margins rather than by rounding. The same options and
// seed give the same bytes on every platform: every value comes from a
// per-tensor splitmix64 stream and exactly rounded arithmetic only.
//
// This package does not read models (engine/gguf), run them (engine/model),
// quantize them (engine/quantize) or tokenize (engine/tokenizer); it only
// assembles files.
package synth
