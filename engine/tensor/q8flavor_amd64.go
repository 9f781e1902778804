package tensor

// On amd64 ggml-cpu quantizes activations with its AVX path
// (ggml-cpu/arch/x86/quants.c, quantize_row_q8_0).
const actQ8Flavor = q8FlavorX86
