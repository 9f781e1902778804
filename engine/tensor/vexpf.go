package tensor

// VExpf is one lane of ggml's vectorised single-precision exp
// (ggml_v_expf in ggml-cpu/vec.h, AVX2 and NEON), bit for bit: what
// ggml_vec_soft_max_f32 and the SIMD SiLU use, and engine/model's
// attention softmax with them (maximum error about 1.5 ulp, flushing below
// -103.97 to zero). It is expf32 (vecops.go), exported for engine/model
// so that the polynomial lives in one place.
func VExpf(x float32) float32 { return expf32(x) }
