//go:build !amd64

package tensor

const useVec512 = false

func siluBlocks16(x *float32, nblk int) { panic("tensor: no AVX-512 kernels") }

func deltaStepRows2(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32) {
	panic("tensor: no AVX-512 kernels")
}
