package tensor

// The kernels of attn_amd64.s (see attn_kernels.go for what they compute).

//go:noescape
func attnExpShiftBlocks(dst, src *float32, nblk int, m float32)

//go:noescape
func attnScores64(s *[64]float32, kt, q *float32, hd int, scale float32)

//go:noescape
func deltaStepRows(s, k, q, v *float32, dk int, eg, beta, scale float32, o *float32)

//go:noescape
func attnDotF16Rows(dst *float32, k *uint16, stride int, q *float32, nblk, rows int)

//go:noescape
func attnAccF16(acc *float32, v *uint16, stride int, ms, vs *float32, rows, nblk int)

//go:noescape
func siluBlocks(x *float32, nblk int)

//go:noescape
func attnKT8(kt *float32, k *uint16, stride, groups, hd8 int)

//go:noescape
func attnExpSum(p, s *float32, m int, mx float32) float64

//go:noescape
func attnDotF32Rows(dst *float32, k *float32, stride int, q *float32, nblk, rows int)

//go:noescape
func attnMadF32(y, x *float32, nblk int, a float32)

//go:noescape
func attnWidenF16(dst *float32, src *uint16, stride, rows, nblk int)

//go:noescape
func attnMadRows(o *float32, v *float32, stride int, p *float32, m, nblk int)

//go:noescape
func attnScores64x2(s0, s1 *[64]float32, kt, q0, q1 *float32, hd int, scale float32)

//go:noescape
func attnMadRowsx2(o0, o1, v *float32, stride int, p0, p1 *float32, m, nblk int)

//go:noescape
func convTapsBlocks(out, win, mix, taps *float32, c, k, unfused, nblk int)

//go:noescape
func attnAccE4M3(acc *float32, v *byte, stride int, ms, vs *float32, rows, nblk int)
