package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8_0 (ggml's block_q8_0): blocks of 32 values, each stored as an F16 scale d
// followed by 32 int8 quants q, value = q * d.
const (
	q8Block      = 32
	q8BlockBytes = 34
)

// QuantizeRow encodes src as one row of type t into dst, which must hold
// exactly t.RowBytes(len(src)) bytes. F32, F16 and BF16 are stored little
// endian; Q8_0 uses ggml's reference quantizer (quantize_row_q8_0_ref), the
// one ggml uses to write model files; NVFP4 uses ModelOpt's block scales with
// no per-tensor scale (QuantizeNVFP4Row with s2 = 1).
func QuantizeRow(t DType, dst []byte, src []float32) error {
	switch t {
	case F32, F16, BF16, Q8_0, NVFP4:
	default:
		return fmt.Errorf("quantize row: writing type %s is not supported (want F32, F16, BF16, Q8_0 or NVFP4)", t)
	}
	if err := checkRow(t, len(dst), len(src)); err != nil {
		return fmt.Errorf("quantize row: %w", err)
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/q8Block; b++ {
			quantizeBlockQ8_0Ref(dst[b*q8BlockBytes:(b+1)*q8BlockBytes], src[b*q8Block:(b+1)*q8Block])
		}
	case NVFP4:
		for b := 0; b < len(src)/nvBlock; b++ {
			quantizeBlockNVFP4(dst[b*nvBlockBytes:(b+1)*nvBlockBytes], src[b*nvBlock:(b+1)*nvBlock], 1)
		}
	}
	return nil
}

// DequantizeRow decodes one row of type t from src into dst; src must hold
// exactly t.RowBytes(len(dst)) bytes.
func DequantizeRow(t DType, dst []float32, src []byte) error {
	if err := checkRow(t, len(src), len(dst)); err != nil {
		return fmt.Errorf("dequantize row: %w", err)
	}
	dequantizeRow(t, dst, src)
	return nil
}

// dequantizeRow is DequantizeRow without the checks.
func dequantizeRow(t DType, dst []float32, src []byte) {
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		tab := f16Table
		for i := range dst {
			dst[i] = tab[binary.LittleEndian.Uint16(src[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/q8Block; b++ {
			blk := src[b*q8BlockBytes : (b+1)*q8BlockBytes]
			out := dst[b*q8Block : (b+1)*q8Block]
			d := f16Table[binary.LittleEndian.Uint16(blk)]
			qs := blk[2:34]
			for j := range out {
				out[j] = float32(int8(qs[j])) * d
			}
		}
	case NVFP4:
		dequantizeNVFP4(dst, src)
	default:
		dequantizeBlocks(t, dst, src)
	}
}

// checkRow validates a row of n values of type t stored in nbytes bytes.
func checkRow(t DType, nbytes, n int) error {
	if !CPUSupports(t) {
		return fmt.Errorf("type %s is not supported (want %s)", t, CPUTypes())
	}
	want, err := t.RowBytes(int64(n))
	if err != nil {
		return err
	}
	if int64(nbytes) != want {
		return fmt.Errorf("%s: %d values need %d bytes, have %d", t, n, want, nbytes)
	}
	return nil
}

// quantizeBlockQ8_0Ref is ggml's quantize_row_q8_0_ref for one block:
// d = amax/127, id = 1/d, q = roundf(x*id) (halves away from zero).
func quantizeBlockQ8_0Ref(dst []byte, src []float32) {
	dst = dst[:q8BlockBytes]
	src = src[:q8Block]
	var amax float32
	for _, v := range src {
		a := float32(math.Abs(float64(v)))
		if !(amax > a) { // ggml's MAX(amax, fabsf(v)), NaN behaviour included
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	qs := dst[2:34]
	for j, v := range src {
		qs[j] = byte(roundToInt8(math.Round(float64(v * id))))
	}
}

// roundToInt8 converts an already rounded value to int8 the way C's
// float-to-int8_t conversion behaves for in-range values; NaN, which is
// undefined behaviour in C, gives 0.
func roundToInt8(r float64) int8 {
	if r != r {
		return 0
	}
	return int8(int32(r))
}

// q8Act is one block of 32 activations quantized to Q8_0: the quants, and
// the scale d after its trip through F16, as ggml stores it.
type q8Act struct {
	q [32]int8
	d float32
}

// q8Flavor selects which of ggml's CPU Q8_0 activation quantizers (the
// quantize_row_q8_0 that ggml-cpu picks at build time) quantizeActQ8_0
// reproduces. They differ in two ways that matter for bit-exact parity: how
// the inverse scale is computed and how halves are rounded.
type q8Flavor int

const (
	q8FlavorRef  q8Flavor = iota // quantize_row_q8_0_ref: id = 1/d, roundf (away from zero)
	q8FlavorX86                  // AVX/AVX2/AVX-512 path: id = 127/amax, round half to even
	q8FlavorNEON                 // ARM NEON path: id = 1/d, round half to even
)

// quantizeActQ8_0 quantizes one block of activations the way ggml's CPU
// backend does with the given flavour; MatMul passes actQ8Flavor, the one of
// the architecture it runs on.
func quantizeActQ8_0(a *q8Act, src []float32, flavor q8Flavor) {
	src = src[:q8Block]
	var amax float32
	for _, v := range src {
		av := float32(math.Abs(float64(v)))
		if !(amax > av) {
			amax = av
		}
	}
	d := amax / 127
	var id float32
	switch flavor {
	case q8FlavorX86:
		if amax != 0 {
			id = 127 / amax
		}
	default:
		if d != 0 {
			id = 1 / d
		}
	}
	a.d = f16Table[F32ToF16(d)]
	for j, v := range src {
		r := float64(v * id)
		if flavor == q8FlavorRef {
			r = math.Round(r)
		} else {
			r = math.RoundToEven(r)
		}
		a.q[j] = roundToInt8(r)
	}
}
