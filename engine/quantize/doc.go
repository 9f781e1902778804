// Package quantize produces GGUF model files.
//
// [Quantize] converts a model's linear weights to NVFP4 as llama.cpp stores
// them (GGML_TYPE_NVFP4 blocks plus a per-tensor `<name>.scale`), choosing
// the scales as NVIDIA's ModelOpt does; see quantize.go. llama.cpp runs its
// output (testdata/nvfp4).
//
// The synthetic models the tests and benchmarks use are written by
// engine/synth.
//
// This package does not read models (engine/gguf), run them (engine/model) or
// tokenize (engine/tokenizer).
package quantize
