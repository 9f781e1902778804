package tensor

import "golang.org/x/sys/cpu"

// useNEONDot selects the NEON W4A4 kernel of nvfp4_arm64.s, which needs
// the dot-product extension (SDOT).
var useNEONDot = cpu.ARM64.HasASIMDDP

// dotNVFP4FP4LanesNEON runs nblk blocks into the twin's sixteen lanes.
//
//go:noescape
func dotNVFP4FP4LanesNEON(row *byte, act *fp4Act, nblk int, lanes *[16]float32)

// dotNVFP4FP4NEON is dotNVFP4FP4 in dotNVFP4FP4LanesNEON.
func dotNVFP4FP4NEON(row []byte, act []fp4Act) float32 {
	nb := len(row) / nvBlockBytes
	act = act[:nb]
	var l [16]float32
	if nb > 0 {
		dotNVFP4FP4LanesNEON(&row[0], &act[0], nb, &l)
	}
	return hsum8(l[0]+l[8], l[1]+l[9], l[2]+l[10], l[3]+l[11], l[4]+l[12], l[5]+l[13], l[6]+l[14], l[7]+l[15])
}
