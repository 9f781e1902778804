package tensor

import "golang.org/x/sys/cpu"

// useVec512 selects the AVX-512 kernels of vec512_amd64.s: SiLU's blocks
// with sixteen lanes a register where attn_amd64.s's AVX2 kernel has eight
// (~20% faster on an FFN row), and the delta rule's step two rows at a
// time (1.3-1.8x with the state in cache, level when it comes from
// memory); every lane does the same operations in the same order as the
// AVX2 kernels, so the same bits. Tests turn it off to check the AVX2
// kernels too.
var useVec512 = useSIMD && cpu.X86.HasAVX512F

// siluBlocks16 is siluBlocks for nblk blocks of sixteen.
//
//go:noescape
func siluBlocks16(x *float32, nblk int)

// deltaStepRows2 is deltaStepRows two rows at a time (dk a multiple of
// 32), for the AVX-512 CPUs (useVec512).
//
//go:noescape
func deltaStepRows2(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32)
