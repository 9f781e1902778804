// Package engine is the inference engine's face: load a GGUF model (mapped,
// not copied) with its tokenizer, place it on the CPU or a GPU (Options.Device;
// the GPU twin comes from engine/gpu), and run generations that stream
// tokens as they are decoded. Everything below it (gguf, tensor, model, gpu,
// tokenizer, sample) is reached through this package by the rest of
// edgellmd; it knows nothing of HTTP or of the daemon.
package engine
