package quantize

import (
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Options says how Quantize converts a model.
type Options struct {
	// Type is the target type of the linear weights; only tensor.NVFP4 now.
	Type tensor.DType
	// Keep holds shell patterns (path.Match syntax, e.g. "blk.*.attn_v.weight"
	// or "output.weight"); a tensor whose name matches one stays in its type.
	Keep []string
	// Progress, when set, is called after each tensor with the number of
	// tensors done and the total.
	Progress func(done, total int)
	// Calib is what the unquantized model saw on calibration prompts
	// (engine/calib.Run): each NVFP4 weight gets `<base>.input_scale` =
	// amax of its input / (6*448) (ModelOpt's static activation scale, used
	// by W4A4) and the file gets per-layer FP8 KV scales (amax / 448) in
	// edgellmd.kv_cache.{k,v}_scale. nil: no input scales (W4A4 then scales
	// each vector itself) and no KV scales (1.0).
	Calib *Calibration
}

// Report tells what Quantize did.
type Report struct {
	Quantized []string // names of the tensors now in Options.Type
	Kept      []string // weight matrices left in their type, with the reason
	Untied    bool     // the LM head was the tied token embedding; output.weight was added
	InBytes   int64    // tensor data bytes before
	OutBytes  int64    // and after
	// CalibTokens are the tokens calibration ran; InputScales the
	// `.input_scale` tensors written; KVScales the layers given FP8 KV
	// scales from calibration.
	CalibTokens int
	InputScales int
	KVScales    int
}

// keptByDefault names what the record run and ModelOpt leave in higher
// precision (model-numerics.md §3.3): embeddings, the Gated DeltaNet conv1d
// and its tiny a/b (alpha/beta) projections, and the MTP block's own
// projections. Norms, biases and the other 1-D tensors are never quantized.
var keptByDefault = []struct{ pattern, why string }{
	{"token_embd.weight", "embedding"},
	{"*.ssm_conv1d.weight", "DeltaNet conv1d"},
	{"*.ssm_alpha.weight", "DeltaNet a projection"},
	{"*.ssm_beta.weight", "DeltaNet b projection"},
	{"*.nextn.*", "MTP block"},
}

// llamaFtypeNVFP4 is LLAMA_FTYPE_MOSTLY_NVFP4 (include/llama.h).
const llamaFtypeNVFP4 = 39

// Quantize converts the linear weights of the model in f to opt.Type and
// returns a Writer for the new file, in llama.cpp's layout: for NVFP4 each
// weight `<base>.weight` becomes GGML_TYPE_NVFP4 blocks quantized as
// ModelOpt does (per-tensor scale s2 = amax/(6*448), UE4M3 block scales of
// amax_block/(6*s2), E2M1 values rounded to nearest even), followed by the
// F32 [1] tensor `<base>.scale` = s2 that llama.cpp multiplies the product
// by. With Options.Calib, `<base>.input_scale` (F32 [1]) follows, as
// llama.cpp's converter names it (its CPU backend does not use it; our W4A4
// does), and the per-layer FP8 KV scales go into the metadata. A model whose LM head is
// the tied token embedding gets its own NVFP4 output.weight (llama.cpp refuses
// scales on a tied NVFP4 head), unless "output.weight" is kept.
//
// The Writer refers to f's mapped tensor data: f must stay open until the
// Writer has been written.
func Quantize(f *gguf.File, opt Options) (*gguf.Writer, Report, error) {
	var rep Report
	fail := func(format string, args ...any) (*gguf.Writer, Report, error) {
		return nil, Report{}, fmt.Errorf("quantize %s: "+format, append([]any{f.Path}, args...)...)
	}
	if opt.Type != tensor.NVFP4 {
		return fail("target type %s is not supported (want NVFP4)", opt.Type)
	}
	for _, p := range opt.Keep {
		if _, err := path.Match(p, ""); err != nil {
			return fail("--keep pattern %q: %w", p, err)
		}
	}
	cal := opt.Calib
	if cal != nil {
		rep.CalibTokens = cal.Tokens
	}
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if cal != nil && (kv.Key == kvKScaleKey || kv.Key == kvVScaleKey) {
			continue // replaced by the calibrated ones below
		}
		v := kv.Value
		if kv.Key == "general.file_type" {
			v = uint32(llamaFtypeNVFP4)
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return fail("%w", err)
		}
	}
	if _, ok := f.Lookup("general.file_type"); !ok {
		if err := w.AddKV("general.file_type", uint32(llamaFtypeNVFP4)); err != nil {
			return fail("%w", err)
		}
	}

	if cal != nil && len(cal.KAmax) > 0 {
		arch, _ := f.GetString("general.architecture")
		blocks, _ := f.GetUint(arch + ".block_count")
		k, v := cal.kvScales(int(blocks))
		for i := range k {
			if k[i] != 1 || v[i] != 1 {
				rep.KVScales++
			}
		}
		if err := w.AddKV(kvKScaleKey, k); err != nil {
			return fail("%w", err)
		}
		if err := w.AddKV(kvVScaleKey, v); err != nil {
			return fail("%w", err)
		}
	}
	mtp := mtpBlocks(f)
	_, hasOutput := f.Tensor("output.weight")
	untie := !hasOutput && !opt.matches("output.weight")
	total := len(f.Tensors)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		data := f.TensorData(t)
		rep.InBytes += t.Size
		why := opt.keepReason(t, mtp)
		if why == "" {
			if err := addQuantized(w, t.Name, t, data, cal.inputScale(strings.TrimSuffix(t.Name, ".weight")), &rep); err != nil {
				return fail("%w", err)
			}
		} else {
			if isMatrix(t) {
				rep.Kept = append(rep.Kept, t.Name+" ("+why+")")
			}
			if err := w.AddTensor(t.Name, t.Type, t.Shape, data); err != nil {
				return fail("%w", err)
			}
			rep.OutBytes += t.Size
		}
		if untie && t.Name == "token_embd.weight" && t.Shape[0]%int64(tensor.NVFP4.BlockElems()) == 0 {
			// the tied head's input is what the model ran as token_embd
			if err := addQuantized(w, "output.weight", t, data, cal.inputScale("token_embd"), &rep); err != nil {
				return fail("%w", err)
			}
			rep.Untied = true
		}
		if opt.Progress != nil {
			opt.Progress(i+1, total)
		}
	}
	return w, rep, nil
}

// QuantizeFile reads in, quantizes it and writes out atomically (a temporary
// file renamed over out), so an interrupted run leaves no partial out.
func QuantizeFile(in, out string, opt Options) (Report, error) {
	f, err := gguf.Open(in)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	w, rep, err := Quantize(f, opt)
	if err != nil {
		return Report{}, err
	}
	if err := w.WriteFile(out); err != nil {
		return Report{}, err
	}
	return rep, nil
}

func (opt Options) matches(name string) bool {
	for _, p := range opt.Keep {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func isMatrix(t *gguf.TensorInfo) bool {
	return len(t.Shape) == 2 && strings.HasSuffix(t.Name, ".weight")
}

// mtpBlocks are the name prefixes ("blk.N.") of the MTP blocks: the last
// nextn_predict_layers of block_count. Their attention and FFN matrices
// have ordinary names, and llama.cpp loads no per-tensor scales for them,
// so the whole block stays in its type.
func mtpBlocks(f *gguf.File) []string {
	arch, _ := f.GetString("general.architecture")
	blocks, ok := f.GetUint(arch + ".block_count")
	nextn, ok2 := f.GetUint(arch + ".nextn_predict_layers")
	if !ok || !ok2 || nextn > blocks {
		return nil
	}
	var p []string
	for b := blocks - nextn; b < blocks; b++ {
		p = append(p, fmt.Sprintf("blk.%d.", b))
	}
	return p
}

// keepReason is why t stays in its type, or "" when it is quantized.
func (opt Options) keepReason(t *gguf.TensorInfo, mtp []string) string {
	switch {
	case !isMatrix(t):
		return "not a weight matrix"
	case opt.matches(t.Name):
		return "--keep"
	}
	for _, p := range mtp {
		if strings.HasPrefix(t.Name, p) {
			return "MTP block"
		}
	}
	for _, k := range keptByDefault {
		if ok, _ := path.Match(k.pattern, t.Name); ok {
			return k.why
		}
	}
	// Any type the CPU engine decodes is a source: F32, F16, BF16, Q8_0,
	// and the files people download (K-quants and the legacy types),
	// decoded as llama.cpp decodes them; quantizing from those adds their
	// own error (docs/performance/kquants.md measures it).
	if t.Type == tensor.NVFP4 || !tensor.CPUSupports(t.Type) {
		return "type " + t.Type.String() + " is not re-quantized"
	}
	if t.Shape[0]%int64(tensor.NVFP4.BlockElems()) != 0 {
		return fmt.Sprintf("%d columns are not a multiple of %d", t.Shape[0], tensor.NVFP4.BlockElems())
	}
	return ""
}

// addQuantized adds name as NVFP4 from the weight src (data its bytes), the
// per-tensor scale `<base>.scale` and, when inScale > 0, the calibrated
// activation scale `<base>.input_scale`.
func addQuantized(w *gguf.Writer, name string, src *gguf.TensorInfo, data []byte, inScale float32, rep *Report) error {
	cols, rows := int(src.Shape[0]), int(src.Shape[1])
	rb, err := src.Type.RowBytes(int64(cols))
	if err != nil {
		return fmt.Errorf("tensor %q: %w", src.Name, err)
	}
	// Two passes over the rows, one decoded row at a time: the tensor's amax,
	// then the blocks.
	vals := make([]float32, cols)
	row := func(r int) error {
		if err := tensor.DequantizeRow(src.Type, vals, data[int64(r)*rb:int64(r+1)*rb]); err != nil {
			return fmt.Errorf("tensor %q: %w", src.Name, err)
		}
		return nil
	}
	var amax float32
	for r := 0; r < rows; r++ {
		if err := row(r); err != nil {
			return err
		}
		for _, v := range vals {
			a := float32(math.Abs(float64(v)))
			if a != a || math.IsInf(float64(a), 0) {
				return fmt.Errorf("tensor %q row %d holds %v", src.Name, r, v)
			}
			amax = max(amax, a)
		}
	}
	s2 := amax / (6 * 448)
	if s2 == 0 {
		s2 = 1
	}
	qrb := cols / tensor.NVFP4.BlockElems() * tensor.NVFP4.BlockBytes()
	out := make([]byte, rows*qrb)
	for r := 0; r < rows; r++ {
		if err := row(r); err != nil {
			return err
		}
		if err := tensor.QuantizeNVFP4Row(out[r*qrb:(r+1)*qrb], vals, s2); err != nil {
			return fmt.Errorf("tensor %q: %w", src.Name, err)
		}
	}
	if err := w.AddTensor(name, tensor.NVFP4, []int64{int64(cols), int64(rows)}, out); err != nil {
		return err
	}
	base := strings.TrimSuffix(name, ".weight")
	sc := make([]byte, 4)
	if err := tensor.QuantizeRow(tensor.F32, sc, []float32{s2}); err != nil {
		return err
	}
	if err := w.AddTensor(base+".scale", tensor.F32, []int64{1}, sc); err != nil {
		return err
	}
	rep.Quantized = append(rep.Quantized, name)
	rep.OutBytes += int64(len(out)) + 4
	if inScale > 0 {
		is := make([]byte, 4)
		if err := tensor.QuantizeRow(tensor.F32, is, []float32{inScale}); err != nil {
			return err
		}
		if err := w.AddTensor(base+".input_scale", tensor.F32, []int64{1}, is); err != nil {
			return err
		}
		rep.InputScales++
		rep.OutBytes += 4
	}
	return nil
}
