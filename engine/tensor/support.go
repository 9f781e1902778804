package tensor

import "strings"

// cpuTypes are the weight types the CPU engine runs: DequantizeRow decodes
// them (embeddings, norms, the tied LM head) and MatVec/MatMul multiply
// with them. Every other type, known to ggml or not, is refused when a
// model loads (CheckCPUType).
var cpuTypes = []DType{F32, F16, BF16, Q8_0, NVFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS}

// CPUSupports reports whether the CPU engine runs weights of type t.
func CPUSupports(t DType) bool {
	for _, c := range cpuTypes {
		if c == t {
			return true
		}
	}
	return false
}

// CPUTypes lists the types CPUSupports accepts, in words: "F32, F16, ...".
func CPUTypes() string { return TypeList(cpuTypes) }

// TypeList writes types as "A, B, C".
func TypeList(ts []DType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}
