// Package model runs the transformer architectures of edgellmd on the CPU:
// `llama` (dense; stories260K is its test model) and `qwen35`, the
// Qwen3.5/3.6 hybrid of Gated DeltaNet and gated full-attention layers with
// an optional multi-token-prediction head. Weights, metadata keys and tensor
// names are llama.cpp's, so a GGUF file runs the same here and there.
//
// A forward pass takes a [Batch] of tokens with positions and parents. A
// chain (prefill, decode) is committed to the [State] at once; a tree (the
// verify step of speculative decoding) attends each node to the committed
// prefix and its ancestors, computes each DeltaNet node from its parent's
// state, and stays pending until [State.Commit] keeps one root-to-node path.
//
// [ForwardMulti] runs the batches of several sequences (decode steps,
// prefill chunks, verify trees, each against its own State) in one pass,
// the continuous batching of an engine that serves several agents: the
// matrix products take every sequence's tokens at once, so the weights
// are read once per pass; attention and the DeltaNet steps run per
// sequence. Each sequence gets exactly the bits it gets alone, because
// engine/tensor's products give every (row, vector) pair the one-vector
// kernel's sum whatever the number of vectors (llama.cpp's do not: its
// batches take other kernels than one token does).
//
// Where llama.cpp's arithmetic decides tokens, this package copies it, down
// to the last bit of the logits (given matrix kernels that sum as ggml's
// do; logits_test.go checks it against llama.cpp's raw logits): flash
// attention as ggml-cpu runs it (the default of node-llama-cpp and of
// llama.cpp on a CPU) with an F16 cache, llama.cpp's non-flash attention
// with an F32 cache, RoPE's float32 angle recurrence, the summation order
// and fused multiply-adds of ggml's x86 (AVX2, FMA) vector routines, the
// order of the gated delta rule, and glibc's expf, logf and sincosf. See
// attention.go, vec.go and libm.go.
//
// The KV cache is F16 (llama.cpp's default and arithmetic), F32 (llama.cpp
// without flash attention) or FP8: tensor.E4M3 codes of K/k_scale and
// V/v_scale (vLLM's convention, value = code * scale), with attention in
// F32 over the codes (attendFP8), the same for every batch size. The
// scales are per block and come from the file's metadata: F32 arrays
// "edgellmd.kv_cache.k_scale" and "edgellmd.kv_cache.v_scale", entry N for
// blk.N (MTP blocks included; entries of DeltaNet blocks unused), 1 where
// the file has no key or the array is shorter. They are ModelOpt's
// k_proj.k_scale / v_proj.v_scale (amax/448). They are metadata, not
// tensors: llama.cpp refuses a file with a tensor it does not create
// (llama_model_loader::done_getting_tensors) and its converter drops
// k_scale/v_scale, so scale tensors would stop the file running there.
//
// NVFP4 weights carry their per-tensor `<name>.scale` (applied to the
// product) and, when the file has it, `<name>.input_scale`, which the W4A4
// activation quantizer uses (tensor.Matrix.InputScale); which activation
// arithmetic runs is the Pool's setting (tensor.Pool.SetNVFP4Activations).
//
// A state can be snapshotted and restored (snapshot.go): its KV rows, as
// runs that several snapshots may share, and the DeltaNet recurrent state
// and conv window, which exist only at the end of the sequence. engine/state
// keeps such snapshots in its prefix cache.
//
// It is not the place for sampling (engine/sample), tokenizing
// (engine/tokenizer), paged or persistent caches (engine/state) or the
// matrix kernels (engine/tensor): it owns the layer wiring, the per-sequence
// KV and recurrent state, and the small vector loops that must round like
// ggml.
package model
