package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// quantAlgoNVFP4 reads the checkpoint's quantization: config.json's
// quantization_config, else hf_quant_config.json's "quantization" (ModelOpt's
// export). It reports whether it is NVFP4; any other quantization is an
// error, since its tensors would be misread as plain weights.
func quantAlgoNVFP4(c *checkpoint) (bool, error) {
	qc, err := c.hp.object("quantization_config")
	if err != nil {
		return false, err
	}
	where := c.hp.path + " quantization_config"
	if qc == nil {
		path := filepath.Join(c.dir, "hf_quant_config.json")
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		m, err := decodeObject(data)
		if err != nil {
			return false, fmt.Errorf("%s: %v", path, err)
		}
		if qc, _ = m["quantization"].(map[string]any); qc == nil {
			return false, fmt.Errorf("%s: no \"quantization\" object", path)
		}
		where = path
	}
	algo, _ := qc["quant_algo"].(string)
	switch strings.ToUpper(algo) {
	case "NVFP4", "W4A16_NVFP4":
		return true, nil
	case "MIXED_PRECISION":
		// Mixed ModelOpt exports list a quant_algo per layer; NVFP4 layers
		// are handled, FP8 ones are refused where they are met.
		layers, _ := qc["quantized_layers"].(map[string]any)
		for _, l := range layers {
			if o, ok := l.(map[string]any); ok && strings.HasSuffix(fmt.Sprint(o["quant_algo"]), "NVFP4") {
				return true, nil
			}
		}
	}
	method, _ := qc["quant_method"].(string)
	return false, fmt.Errorf("%s: quantization %q (quant_method %q) is not supported (want a ModelOpt NVFP4 checkpoint or unquantized weights)", where, algo, method)
}

// nvfp4Trivial is llama.cpp's _scale_is_trivial: a scale within 1e-6 of 1
// is not written.
func nvfp4Trivial(v float32) bool { return math.Abs(float64(v)-1) < 1e-6 }

// repackNVFP4 turns a ModelOpt NVFP4 weight (U8 [out, in/2]: two E2M1 codes
// a byte, element 2i in the low nibble; weight_scale F8_E4M3 [out, in/16];
// weight_scale_2 and input_scale F32 scalars) into ggml's block_nvfp4 rows
// (per 64 values: 4 UE4M3 scale bytes, then 4 sub-blocks of 8 bytes, byte j
// of a sub-block holding value j in its low nibble and value j+8 in its
// high nibble; ggml-common.h) and the F32 tensors `<name>.scale` and
// `<name>.input_scale`, as llama.cpp's converter (_nvfp4_pack) does: the
// codes and the scale bits are kept, only the sign bit of the scales, which
// ModelOpt never sets, is cleared.
func (cv *converter) repackNVFP4(j *job, w *stTensor) ([]preparedTensor, error) {
	if len(j.shape) != 2 {
		return nil, fmt.Errorf("tensor %q in %s: NVFP4 data for %s, which is not a matrix", w.Name, w.File, j.dst)
	}
	rows, cols := int(j.shape[0]), int(j.shape[1])
	const block = 64
	if cols%block != 0 {
		return nil, fmt.Errorf("tensor %q in %s: NVFP4 rows of %d values are not whole %d-value ggml blocks", w.Name, w.File, cols, block)
	}
	if !sameDims(w.Shape, []int64{int64(rows), int64(cols / 2)}) {
		return nil, fmt.Errorf("tensor %q in %s has shape %v, want [%d %d] (NVFP4 codes of %v, two a byte)", w.Name, w.File, w.Shape, rows, cols/2, j.shape)
	}
	base := strings.TrimSuffix(j.src, ".weight")
	sc, ok := cv.canon[base+".weight_scale"]
	if !ok {
		return nil, fmt.Errorf("tensor %q in %s is U8 but %q is missing (want F8_E4M3 [%d %d])", w.Name, w.File, base+".weight_scale", rows, cols/16)
	}
	cv.used[base+".weight_scale"] = true
	if sc.DType != "F8_E4M3" || !sameDims(sc.Shape, []int64{int64(rows), int64(cols / 16)}) {
		return nil, fmt.Errorf("tensor %q in %s is %s %v, want F8_E4M3 [%d %d]", sc.Name, sc.File, sc.DType, sc.Shape, rows, cols/16)
	}
	scale2, err := cv.scalar(base + ".weight_scale_2")
	if err != nil {
		return nil, err
	}
	inScale, err := cv.scalar(base + ".input_scale")
	if err != nil {
		return nil, err
	}

	codes, scales := w.Data, sc.Data
	if j.rowPerm != nil || j.colPerm != nil {
		groupCodes, groupScales := 0, 0
		if j.colPerm != nil {
			if j.colGroup%16 != 0 {
				return nil, fmt.Errorf("tensor %q: its columns move in groups of %d, which split NVFP4 scale blocks of 16", w.Name, j.colGroup)
			}
			groupCodes, groupScales = j.colGroup/2, j.colGroup/16
		}
		codes = permute(codes, rows, cols/2, j.rowPerm, groupCodes, j.colPerm)
		scales = permute(scales, rows, cols/16, j.rowPerm, groupScales, j.colPerm)
	}

	rb := cols / block * tensor.NVFP4.BlockBytes()
	out := make([]byte, rows*rb)
	for r := 0; r < rows; r++ {
		packNVFP4Row(out[r*rb:(r+1)*rb], codes[r*cols/2:(r+1)*cols/2], scales[r*cols/16:(r+1)*cols/16])
	}
	shape := []int64{int64(cols), int64(rows)}
	res := []preparedTensor{{j.dst, tensor.NVFP4, shape, out}}
	name := strings.TrimSuffix(j.dst, ".weight")
	for _, s := range []struct {
		suffix string
		v      float32
	}{{".scale", scale2}, {".input_scale", inScale}} {
		if !nvfp4Trivial(s.v) {
			b := make([]byte, 4)
			binary.LittleEndian.PutUint32(b, math.Float32bits(s.v))
			res = append(res, preparedTensor{name + s.suffix, tensor.F32, []int64{1}, b})
		}
	}
	cv.rep.NVFP4 = append(cv.rep.NVFP4, j.dst)
	cv.rep.Converted += int64(len(out))
	return res, nil
}

// packNVFP4Row repacks one row: codes holds ModelOpt's bytes (value 2i low
// nibble, 2i+1 high), scales its E4M3 bytes, one per 16 values.
func packNVFP4Row(dst, codes, scales []byte) {
	for b := 0; b < len(scales)/4; b++ {
		blk := dst[b*36 : (b+1)*36]
		for s := 0; s < 4; s++ {
			blk[s] = scales[4*b+s] & 0x7F
			in := codes[(4*b+s)*8 : (4*b+s+1)*8] // 16 values
			q := blk[4+8*s : 4+8*(s+1)]
			for k := 0; k < 8; k++ {
				lo := nibble(in, k)   // value k
				hi := nibble(in, k+8) // value k+8
				q[k] = lo | hi<<4
			}
		}
	}
}

// nibble is value i of ModelOpt-packed bytes.
func nibble(b []byte, i int) byte {
	if i%2 == 0 {
		return b[i/2] & 0x0F
	}
	return b[i/2] >> 4
}

// scalar reads an optional one-value float tensor (1 when absent) and marks
// it used.
func (cv *converter) scalar(name string) (float32, error) {
	t, ok := cv.canon[name]
	if !ok {
		return 1, nil
	}
	cv.used[name] = true
	size, ok := floatSize(t.DType)
	if !ok || t.elems() != 1 || len(t.Data) != size {
		return 0, fmt.Errorf("tensor %q in %s is %s %v, want one F32 value", t.Name, t.File, t.DType, t.Shape)
	}
	v := make([]float32, 1)
	decodeFloats(t.DType, v, t.Data)
	if !(v[0] > 0) || math.IsInf(float64(v[0]), 0) {
		return 0, fmt.Errorf("tensor %q in %s = %g: want a positive finite scale", t.Name, t.File, v[0])
	}
	return v[0], nil
}
