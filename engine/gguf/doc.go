// Package gguf reads and writes GGUF model files, the container format of
// ggml and llama.cpp.
//
// A GGUF file is a header, typed key/value metadata, a table of tensor infos
// (name, shape, ggml type, offset) and an aligned data section holding the
// tensor bytes. [Open] memory-maps a file read-only and [Parse] checks every
// count, length, offset and size in it against the file before it trusts
// them, so a truncated, oversized or hostile file is an error that names the
// file and what is wrong, never a panic, an out-of-range read or an
// allocation sized by a number in the file. Tensor data is never copied:
// [File.TensorData] returns a slice of the mapping, valid until [File.Close].
// Metadata is copied to the heap, so KV values stay valid after Close.
//
// [Writer] produces files in the same layout as ggml's own gguf writer
// (header, KVs, tensor infos, padding to the alignment, then each tensor's
// data padded to the alignment), so llama.cpp loads what it writes.
//
// This package knows the container only: it does not interpret metadata keys
// (that is engine/model's and engine/tokenizer's job) nor tensor contents
// (engine/tensor). Format: ggml/docs/gguf.md; layout rules:
// ggml/src/gguf.cpp in llama.cpp. Versions 2 and 3 are read (they differ only
// in that v3 may be big-endian, which is refused); version 1 is refused.
package gguf
