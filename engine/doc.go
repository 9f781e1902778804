// Package engine is the inference engine's face: load a GGUF model (mapped,
// not copied) with its tokenizer, and run generations that stream tokens as
// they are decoded. Everything below it (gguf, tensor, model, tokenizer,
// sample) is reached through this package by the rest of edgellmd; it knows
// nothing of HTTP or of the daemon.
package engine
