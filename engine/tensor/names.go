package tensor

import (
	"fmt"
)

// KVTypeNames are the KV cache types by the names the command line and the
// config file use.
var KVTypeNames = map[string]DType{"f16": F16, "f32": F32, "fp8": E4M3}

// ActivationNames are the NVFP4 activation modes by their names: q8 (W4A8,
// llama.cpp's arithmetic, the default), f32 (W4A16), nvfp4 (W4A4).
var ActivationNames = map[string]NVFP4Activations{
	"q8": NVFP4ActQ8, "f32": NVFP4ActF32, "nvfp4": NVFP4ActFP4,
}

// ParseKVType reads a KV cache type name: f16, f32 or fp8.
func ParseKVType(name string) (DType, error) {
	if t, ok := KVTypeNames[name]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("%q is not one of f16, f32, fp8", name)
}

// ParseActivations reads an NVFP4 activation mode name: q8, f32 or nvfp4.
func ParseActivations(name string) (NVFP4Activations, error) {
	if a, ok := ActivationNames[name]; ok {
		return a, nil
	}
	return 0, fmt.Errorf("%q is not one of q8, f32, nvfp4", name)
}
