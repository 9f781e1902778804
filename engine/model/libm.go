package model

import (
	"math"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Single-precision expf, logf and sincosf with the exact results of glibc's
// x86-64 libm (2.27 and later, the FMA variants that glibc selects on any
// CPU with FMA), which llama.cpp calls for the flash-attention softmax,
// sigmoid, softplus and the RoPE angles. They are not correctly rounded
// (expf's error reaches 0.502 ulp, sincosf's 0.56), so a correctly rounded
// float32(math.Exp(x)) differs from them once in a few thousand calls, enough
// to change the last bits of some logits.
//
// The algorithms and tables are those of Arm's optimized-routines (math/
// expf.c, exp2f_data.c, logf.c, logf_data.c, sincosf.c, sincosf.h,
// sincosf_data.c; Copyright (c) 2017-2018 Arm Limited, MIT licence), which
// glibc took over; written here in Go with the fused multiply-adds the FMA
// build of glibc performs (math.FMA).

// expf is glibc's expf (tensor.Expf, which SiLU's leftovers call too).
func expf(x float32) float32 { return tensor.Expf(x) }

// logf: LOGF_TABLE_BITS = 4, LOGF_POLY_ORDER = 4.
var logfTab = [16]struct{ invc, logc float64 }{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2},
	{0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010bp+0, -0x1.01eae7f513a67p-2},
	{0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3},
	{0x1.25e227b0b8eap+0, -0x1.1aa2bc79c81p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4},
	{0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5},
	{0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5},
	{0x1.ca4b31f026aap-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3},
	{0x1.9c2d163a1aa2dp-1, 0x1.bc2860d22477p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2},
	{0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

const (
	logfLn2 = 0x1.62e42fefa39efp-1
	logfA0  = -0x1.00ea348b88334p-2
	logfA1  = 0x1.5575b0be00b6ap-2
	logfA2  = -0x1.ffffef20a4123p-2
)

// logf is glibc's logf.
func logf(x float32) float32 {
	ix := math.Float32bits(x)
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		switch {
		case ix*2 == 0:
			return float32(math.Inf(-1))
		case ix == 0x7f800000:
			return x
		case ix&0x80000000 != 0 || ix*2 >= 0xff000000:
			return float32(math.NaN())
		}
		ix = math.Float32bits(x * 0x1p23) // subnormal: normalise
		ix -= 23 << 23
	}
	const off = 0x3f330000
	tmp := ix - off
	i := tmp >> (23 - 4) % 16
	k := int32(tmp) >> 23
	iz := ix - tmp&(0x1ff<<23)
	e := &logfTab[i]
	z := float64(math.Float32frombits(iz))
	r := math.FMA(z, e.invc, -1)
	y0 := math.FMA(float64(k), logfLn2, e.logc)
	r2 := r * r
	y := math.FMA(logfA1, r, logfA2)
	y = math.FMA(logfA0, r2, y)
	y = math.FMA(y, r2, y0+r)
	return float32(y)
}

// sincosf tables: the second row computes -cos, to get the negation free.
type sincosCoef struct {
	sign                                        [4]float64
	hpiInv, hpi, c0, c1, c2, c3, c4, s1, s2, s3 float64
}

var sincosfTab = [2]sincosCoef{
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0, 0x1p0,
		-0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0, -0x1p0,
		0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// invPio4 is 4/pi to 192 bits, 8 new bits per entry.
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

func abstop12(x float32) uint32 { return math.Float32bits(x) >> 20 & 0x7ff }

// sincosf is glibc's sincosf (GCC turns llama.cpp's cosf(t), sinf(t) pair
// into one sincosf call; sinf and cosf alone give the same values).
func sincosf(y float32) (sin, cos float32) {
	x := float64(y)
	p := &sincosfTab[0]
	switch {
	case abstop12(y) < abstop12(0x1.921FB54442D18p-1): // |y| < pi/4
		if abstop12(y) < abstop12(0x1p-12) {
			return y, 1
		}
		return sincosfPoly(x, x*x, p, 0)
	case abstop12(y) < abstop12(120):
		// reduce_fast: x - n*pi/2 with n the nearest quadrant
		r := x * p.hpiInv
		n := (int32(r) + 0x800000) >> 24
		x = math.FMA(-float64(n), p.hpi, x)
		s := p.sign[n&3]
		if n&2 != 0 {
			p = &sincosfTab[1]
		}
		return sincosfPoly(x*s, x*x, p, int(n))
	case abstop12(y) < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		var n int
		x, n = reduceLarge(xi)
		s := p.sign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosfTab[1]
		}
		return sincosfPoly(x*s, x*x, p, n)
	}
	nan := y - y
	return nan, nan
}

func sincosfPoly(x, x2 float64, p *sincosCoef, n int) (sin, cos float32) {
	x4 := x2 * x2
	x3 := x2 * x
	c2 := math.FMA(x2, p.c4, p.c3)
	s1 := math.FMA(x2, p.s3, p.s2)
	c1 := math.FMA(x2, p.c1, p.c0)
	x5 := x3 * x2
	x6 := x4 * x2
	s := math.FMA(x3, p.s1, x)
	c := math.FMA(x4, p.c2, c1)
	sv := float32(math.FMA(x5, s1, s))
	cv := float32(math.FMA(x6, c2, c))
	if n&1 != 0 {
		return cv, sv
	}
	return sv, cv
}

// reduceLarge reduces |x| >= 120 (the float bits xi) modulo pi/2 with a
// 32x96-bit fixed-point product by 4/pi; it returns the remainder in
// [-pi/4, pi/4] and the quadrant.
func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * 0x1.921FB54442D18p-62, int(n)
}
