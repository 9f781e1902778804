//go:build !amd64

package tensor

// No attention kernels outside amd64 (useSIMD is false there): the
// plain-Go twins of attn_kernels.go run.

func attnExpShiftBlocks(dst, src *float32, nblk int, m float32) { panic("tensor: no SIMD kernels") }

func attnScores64(s *[64]float32, kt, q *float32, hd int, scale float32) {
	panic("tensor: no SIMD kernels")
}

func deltaStepRows(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32) {
	panic("tensor: no SIMD kernels")
}

func attnDotF16Rows(dst *float32, k *uint16, stride int, q *float32, nblk, rows int) {
	panic("tensor: no SIMD kernels")
}

func attnAccF16(acc *float32, v *uint16, stride int, ms, vs *float32, rows, nblk int) {
	panic("tensor: no SIMD kernels")
}

func siluBlocks(x *float32, nblk int) { panic("tensor: no SIMD kernels") }

func attnKT8(kt *float32, k *uint16, stride, groups, hd8 int) { panic("tensor: no SIMD kernels") }

func attnExpSum(p, s *float32, m int, mx float32) float64 { panic("tensor: no SIMD kernels") }

func attnDotF32Rows(dst *float32, k *float32, stride int, q *float32, nblk, rows int) {
	panic("tensor: no SIMD kernels")
}

func attnMadF32(y, x *float32, nblk int, a float32) { panic("tensor: no SIMD kernels") }

func attnWidenF16(dst *float32, src *uint16, stride, rows, nblk int) {
	panic("tensor: no SIMD kernels")
}

func attnMadRows(o *float32, v *float32, stride int, p *float32, m, nblk int) {
	panic("tensor: no SIMD kernels")
}

func attnScores64x2(s0, s1 *[64]float32, kt, q0, q1 *float32, hd int, scale float32) {
	panic("tensor: no SIMD kernels")
}

func attnMadRowsx2(o0, o1, v *float32, stride int, p0, p1 *float32, m, nblk int) {
	panic("tensor: no SIMD kernels")
}

func convTapsBlocks(out, win, mix, taps *float32, c, k, unfused, nblk int) {
	panic("tensor: no SIMD kernels")
}

func attnAccE4M3(acc *float32, v *byte, stride int, ms, vs *float32, rows, nblk int) {
	panic("tensor: no SIMD kernels")
}
