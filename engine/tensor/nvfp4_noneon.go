//go:build !arm64

package tensor

// useNEONDot: the NEON kernels exist on arm64 only.
const useNEONDot = false

func dotNVFP4FP4NEON(row []byte, act []fp4Act) float32 { panic("tensor: no NEON kernels") }
