package tensor

import "golang.org/x/sys/cpu"

// useVec512 selects the AVX-512 form of SiLU's blocks (vec512_amd64.s):
// sixteen lanes a register where attn_amd64.s's AVX2 kernel has eight,
// every lane doing the same operations in the same order, so the same
// bits (20-30% faster on an FFN row). Tests turn it off to check the AVX2
// kernel too. (The delta rule's step gained nothing so: it waits on its
// state's memory.)
var useVec512 = useSIMD && cpu.X86.HasAVX512F

// siluBlocks16 is siluBlocks for nblk blocks of sixteen.
//
//go:noescape
func siluBlocks16(x *float32, nblk int)
