package tensor

import "math/rand/v2"

// Inputs for the tests of the NVFP4 SIMD kernels against their twins
// (nvfp4_amd64_test.go, dot_arm64_test.go).

// nvfp4EdgeRow makes nb blocks of random bytes, with edge cases by rep:
// every scale code including 0, 0x7E (448), 0x7F (NaN, read as 0) and codes
// with the top bit set (ignored), every E2M1 code, all-zero blocks.
func nvfp4EdgeRow(r *rand.Rand, nb, rep int) []byte {
	row := make([]byte, nb*nvBlockBytes)
	for i := range row {
		row[i] = byte(r.IntN(256))
	}
	for b := 0; b < nb; b++ {
		blk := row[b*nvBlockBytes : (b+1)*nvBlockBytes]
		switch rep % 5 {
		case 0: // realistic scales: the quantizer's range
			for s := 0; s < 4; s++ {
				blk[s] = byte(r.IntN(0x7F))
			}
		case 1: // edge scale codes
			for s := 0; s < 4; s++ {
				blk[s] = []byte{0x00, 0x7E, 0x7F, 0xFF, 0x80, 0x01, 0x08, 0xFE}[(b*4+s+rep)%8]
			}
		case 2: // all-zero block
			clear(blk)
		case 3: // extreme codes: ±6 everywhere, largest scale
			for s := 0; s < 4; s++ {
				blk[s] = 0x7E
			}
			for k := 4; k < nvBlockBytes; k++ {
				blk[k] = []byte{0x77, 0xFF, 0x7F, 0xF7}[k%4]
			}
		}
	}
	return row
}

// q8EdgeAct makes 2*nb Q8_0 activation blocks: random quants in
// [-127, 127] (ggml's quantizer never writes -128, and neither
// ggml's kernel nor these handle it), scales from F16 subnormals to large.
func q8EdgeAct(r *rand.Rand, nb, rep int) []q8Act {
	act := make([]q8Act, 2*nb)
	for i := range act {
		for k := range act[i].q {
			act[i].q[k] = int8(r.IntN(255) - 127)
			if rep%5 == 3 {
				act[i].q[k] = []int8{127, -127}[k%2]
			}
		}
		act[i].d = f16Table[uint16(r.IntN(0x7C00))] // every finite positive F16
	}
	return act
}
