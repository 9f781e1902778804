package gpu

import (
	"slices"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// weightTypes are the matrix types the shaders run (op_matmul.go's
// products, op_getrows.go's embedding rows). Vectors (norms, biases) reach
// the GPU as F32 whatever their type in the file.
var weightTypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.NVFP4,
	tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.Q2_K, tensor.Q3_K, tensor.IQ4_XS,
	tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.IQ4_NL}

// SupportsWeight reports whether the GPU engine runs weight matrices of
// type t; the engine checks every matrix of a file with it at load.
func SupportsWeight(t tensor.DType) bool { return slices.Contains(weightTypes, t) }

// WeightTypes lists the types SupportsWeight accepts, in words.
func WeightTypes() string { return tensor.TypeList(weightTypes) }
