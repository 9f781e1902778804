package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The NEON Q8_0 and NVFP4 W4A8 kernels of q8neon_arm64.s against their
// plain-Go twins (dotQ8, dotNVFP4Q8): equal bits. Cross-compile and run
// with
//
//	GOARCH=arm64 go test -c -o tensor.arm64 ./engine/tensor/
//	qemu-aarch64-static ./tensor.arm64 -test.run NEON

// q8EdgeRow makes nb Q8_0 weight blocks with edge cases by rep: random
// scales over every finite F16 (both signs, subnormals, zero), random
// quants including -128, all-extreme quants, zero blocks, and scales that
// are powers of two with small quants, where F32 midpoints are frequent.
func q8EdgeRow(r *rand.Rand, nb, rep int) []byte {
	row := make([]byte, nb*q8BlockBytes)
	for b := 0; b < nb; b++ {
		blk := row[b*q8BlockBytes : (b+1)*q8BlockBytes]
		h := uint16(r.IntN(0x7C00)) | uint16(r.IntN(2))<<15
		for k := 2; k < q8BlockBytes; k++ {
			blk[k] = byte(r.IntN(256))
		}
		switch rep % 6 {
		case 1: // edge scales: 0, -0, smallest subnormal, largest, 1
			h = []uint16{0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x3C00}[(b+rep)%6]
		case 2: // zero quants
			for k := 2; k < q8BlockBytes; k++ {
				blk[k] = 0
			}
		case 3: // extremes: products of ±128 and ±127
			for k := 2; k < q8BlockBytes; k++ {
				blk[k] = []byte{0x80, 0x7F, 0x81, 0x80}[k%4]
			}
		case 4: // powers of two, small quants: F32 ties in the lane sums
			h = uint16(0x3C00 + (r.IntN(21)-10)<<10)
			for k := 2; k < q8BlockBytes; k++ {
				blk[k] = byte(int8(r.IntN(7) - 3))
			}
		case 5: // a realistic row: Q8_0-quantized normal values
			x := make([]float32, q8Block)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 0.05)
			}
			if err := QuantizeRow(Q8_0, blk, x); err != nil {
				panic(err)
			}
			h = binary.LittleEndian.Uint16(blk)
		}
		binary.LittleEndian.PutUint16(blk, h)
	}
	return row
}

// q8ActEdge makes n activation blocks: quants including -128, scales over
// every finite positive F16 (the rep%6 == 4 case: powers of two, for ties),
// or a quantized normal vector (rep%6 == 5).
func q8ActEdge(r *rand.Rand, n, rep int) []q8Act {
	act := make([]q8Act, n)
	for i := range act {
		for k := range act[i].q {
			act[i].q[k] = int8(r.IntN(256) - 128)
			if rep%6 == 3 {
				act[i].q[k] = []int8{-128, -128, 127, -127}[(k+i)%4]
			}
			if rep%6 == 4 {
				act[i].q[k] = int8(r.IntN(9) - 4)
			}
		}
		act[i].d = f16Table[uint16(r.IntN(0x7C00))]
		if rep%6 == 4 {
			act[i].d = float32(math.Ldexp(1, r.IntN(21)-10))
		}
	}
	if rep%6 == 5 {
		x := make([]float32, n*q8Block)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp(r.Float64()*4-2))
		}
		quantizeQ8Vector(act, x)
	}
	return act
}

func TestDotQ8NEON(t *testing.T) {
	if !useNEONDot {
		t.Skip("CPU lacks the dot-product extension: the NEON Q8_0 kernel is off")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, nb := range []int{0, 1, 2, 3, 7, 8, 9, 64, 65, 160} {
		for rep := 0; rep < 60; rep++ {
			row := q8EdgeRow(r, nb, rep)
			act := q8ActEdge(r, nb, rep)
			got, want := dotQ8NEON(row, act), dotQ8(row, act)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("Q8_0 %d blocks, rep %d: NEON %g (%#08x), Go %g (%#08x)", nb, rep, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	// Rows through dotQ8RowsSIMD, the arm64 dispatch entry.
	const rows, nb = 11, 12
	rb := nb * q8BlockBytes
	data := make([]byte, 0, rows*rb)
	for i := 0; i < rows; i++ {
		data = append(data, q8EdgeRow(r, nb, i)...)
	}
	act := q8ActEdge(r, nb, 5)
	got := make([]float32, rows)
	dotQ8RowsSIMD(got, data, rb, act)
	for i := range got {
		if want := dotQ8(data[i*rb:(i+1)*rb], act); math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("dotQ8RowsSIMD row %d: %g, Go twin %g", i, got[i], want)
		}
	}
}

func TestDotNVFP4Q8NEON(t *testing.T) {
	if !useNEONDot {
		t.Skip("CPU lacks the dot-product extension: the NEON W4A8 kernel is off")
	}
	r := rand.New(rand.NewPCG(43, 44))
	for _, nb := range []int{0, 1, 2, 3, 7, 64, 65} {
		for rep := 0; rep < 40; rep++ {
			row := nvfp4EdgeRow(r, nb, rep)
			var act []q8Act
			if rep%2 == 0 {
				act = q8EdgeAct(r, nb, rep)
			} else {
				act = q8ActEdge(r, 2*nb, rep)
			}
			got, want := dotNVFP4Q8NEON(row, act), dotNVFP4Q8(row, act)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("W4A8 %d blocks, rep %d: NEON %g (%#08x), Go %g (%#08x)", nb, rep, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	// Every scale code in each sub-block position, one block at a time.
	row := make([]byte, nvBlockBytes)
	for k := 4; k < nvBlockBytes; k++ {
		row[k] = byte(r.IntN(256))
	}
	act := q8EdgeAct(r, 1, 0)
	for c := 0; c < 256; c++ {
		for s := 0; s < 4; s++ {
			row[0], row[1], row[2], row[3] = 0x38, 0x38, 0x38, 0x38
			row[s] = byte(c)
			got, want := dotNVFP4Q8NEON(row, act), dotNVFP4Q8(row, act)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("W4A8 scale code %#02x in sub-block %d: NEON %g, Go %g", c, s, got, want)
			}
		}
	}
	// Rows through dotNVFP4Q8RowsSIMD.
	const rows, nb = 9, 5
	rb := nb * nvBlockBytes
	data := make([]byte, 0, rows*rb)
	for i := 0; i < rows; i++ {
		data = append(data, nvfp4EdgeRow(r, nb, i)...)
	}
	act = q8ActEdge(r, 2*nb, 5)
	got := make([]float32, rows)
	dotNVFP4Q8RowsSIMD(got, data, rb, act)
	for i := range got {
		if want := dotNVFP4Q8(data[i*rb:(i+1)*rb], act); math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("dotNVFP4Q8RowsSIMD row %d: %g, Go twin %g", i, got[i], want)
		}
	}
}

func BenchmarkDotQ8NEON(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const nb = 128 // 4096 columns
	row, act := q8EdgeRow(r, nb, 5), q8ActEdge(r, nb, 5)
	nrow, nact := nvfp4EdgeRow(r, nb/2, 0), q8ActEdge(r, nb, 5)
	var sink float32
	for _, c := range []struct {
		name string
		f    func() float32
	}{
		{"Q8_0/NEON", func() float32 { return dotQ8NEON(row, act) }},
		{"Q8_0/Go", func() float32 { return dotQ8(row, act) }},
		{"W4A8/NEON", func() float32 { return dotNVFP4Q8NEON(nrow, nact) }},
		{"W4A8/Go", func() float32 { return dotNVFP4Q8(nrow, nact) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				sink += c.f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/MAC")
		})
	}
	_ = sink
}
