package tensor

// On arm64 ggml-cpu quantizes activations with its NEON path
// (ggml-cpu/arch/arm/quants.c, quantize_row_q8_0).
const actQ8Flavor = q8FlavorNEON
