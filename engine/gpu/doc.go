// Package gpu is edgellmd's GPU engine: Vulkan compute called from Go
// without cgo (libvulkan.so.1 through purego), with its own model.Model and
// model.State for the llama and qwen35 architectures, so that the engine,
// the sampler, the speculative decoder and the prefix cache above it run
// unchanged. Its shaders are in shaders/, one per operation, compiled to
// SPIR-V by `go generate` and committed.
//
// The face is small: Devices lists what the Vulkan loader sees, Open opens
// one, Load builds a model on it. The model also runs the batches of
// several sequences in one pass (model.MultiForwarder, and
// ForwardMultiGreedy beside ForwardGreedy), each sequence's bits those it
// gets alone. The CPU engine (engine/model,
// engine/tensor) is the reference every shader is tested against.
//
// It is not for graphics, nor a general compute library: the binding
// (internal/vk) covers what the forward pass needs and no more.
package gpu
