package tensor

import "golang.org/x/sys/cpu"

// useVnniYmm selects vnniymm_amd64.s's 256-bit tiles over vnni_amd64.s's
// 512-bit ones for the Q8_0 and W4A8 products of several vectors: on Zen 4
// (AMD family 19h with AVX-512), whose 512-bit operations run as two
// 256-bit halves, so that the ymm form does the same arithmetic and
// skips the broadcasts. CPUs with full-width 512-bit units (Intel since
// Skylake-SP, Zen 5) keep the zmm tiles. Both give the same bits; tests
// run both wherever the CPU has AVX-512 VNNI and VBMI (VPERMB, which the
// W4A8 tiles use).
var useVnniYmm = hasAVX512VNNI && cpu.X86.HasAVX512VBMI && isZen4()

// nvScale256 is nvScale times 2^-8 (exact): the lane scales of the W4A8
// tiles, whose activation scales are d * 128.
var nvScale256 = func() (t [256]float32) {
	for c := range t {
		t[c] = nvScale[c] / 256
	}
	return t
}()

// isZen4 reports an AMD CPU of family 19h (Zen 3 and Zen 4; of those only
// Zen 4 has AVX-512, which the caller checks).
func isZen4() bool {
	_, b, c, d := cpuid(0, 0)
	if b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163 { // "AuthenticAMD"
		return false
	}
	a, _, _, _ := cpuid(1, 0)
	family := (a >> 8) & 0xF
	if family == 0xF {
		family += (a >> 20) & 0xFF
	}
	return family == 0x19
}

//go:noescape
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

//go:noescape
func q8YmmTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8YmmTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8YmmTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func q8YmmTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvYmmTile8(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvYmmTile4(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvYmmTile3(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)

//go:noescape
func nvYmmTile2(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int)
