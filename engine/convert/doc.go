// Package convert turns a Hugging Face checkpoint directory (config.json,
// safetensors shards, tokenizer files) into a GGUF file that engine/model and
// llama.cpp load.
//
// It follows what llama.cpp's converter (convert_hf_to_gguf.py and its
// conversion/ package) writes for the same checkpoint: the tensor names and
// shapes, the metadata keys and their GGUF types, and every transformation
// of the data:
//
//   - llama (LlamaForCausalLM): the q/k rows that Hugging Face permuted for
//     its rotate-half RoPE are put back in Meta's interleaved order.
//   - qwen35 (Qwen3_5ForCausalLM, and the text model of
//     Qwen3_5ForConditionalGeneration with the vision tower skipped): the +1
//     of the zero-centred RMSNorms is folded into every norm weight except
//     the DeltaNet output norm, A_log becomes ssm_a = -exp(A_log), dt_bias
//     becomes ssm_dt.bias, conv1d is squeezed to {kernel, channels}, the
//     DeltaNet value heads are reordered from grouped-by-key-head to tiled
//     order, and the mtp.* block becomes the extra block blk.N.nextn.*.
//
// Weights stay in their checkpoint type (F32, F16, BF16; F64 becomes F32) or
// the type Options.OutType asks for; 1-D tensors, norms and conv1d are F32.
// A ModelOpt NVFP4 checkpoint (weight U8 [out, in/2], weight_scale F8_E4M3
// [out, in/16], weight_scale_2 and input_scale F32 scalars) is repacked into
// GGML_TYPE_NVFP4 blocks without re-quantizing, with the per-tensor scale
// and the input scale as the F32 tensors `<name>.scale` and
// `<name>.input_scale` (left out when 1, as llama.cpp's converter does).
//
// The safetensors reader is this package's own (safetensors.go): it maps the
// shards read-only and checks every header offset, dtype and shape before a
// byte is used. Nothing is written until the whole conversion is planned, and
// the file is written through a temporary file that is renamed into place.
//
// This package does not quantize (engine/quantize), run models
// (engine/model) or tokenize (engine/tokenizer).
package convert
