//go:build !amd64

package tensor

const useVec512 = false

func siluBlocks16(x *float32, nblk int) { panic("tensor: no AVX-512 kernels") }
