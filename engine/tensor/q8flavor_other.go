//go:build !amd64 && !arm64

package tensor

// Elsewhere ggml-cpu falls back to the reference quantizer.
const actQ8Flavor = q8FlavorRef
