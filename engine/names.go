package engine

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// KVTypeNames are the KV cache types by the names the command line and the
// config file use.
var KVTypeNames = map[string]tensor.DType{"f16": tensor.F16, "f32": tensor.F32, "fp8": tensor.E4M3}

// ActivationNames are the NVFP4 activation modes by their names: q8 (W4A8,
// llama.cpp's arithmetic, the default), f32 (W4A16), nvfp4 (W4A4).
var ActivationNames = map[string]tensor.NVFP4Activations{
	"q8": tensor.NVFP4ActQ8, "f32": tensor.NVFP4ActF32, "nvfp4": tensor.NVFP4ActFP4,
}

// ParseKVType reads a KV cache type name: f16, f32 or fp8.
func ParseKVType(name string) (tensor.DType, error) {
	if t, ok := KVTypeNames[name]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("%q is not one of f16, f32, fp8", name)
}

// ParseActivations reads an NVFP4 activation mode name: q8, f32 or nvfp4.
func ParseActivations(name string) (tensor.NVFP4Activations, error) {
	if a, ok := ActivationNames[name]; ok {
		return a, nil
	}
	return 0, fmt.Errorf("%q is not one of q8, f32, nvfp4", name)
}
