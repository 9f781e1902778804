package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Options says how Convert writes the model.
type Options struct {
	// OutType is the type of the 2-D float weights: "" keeps each tensor's
	// checkpoint type (F64 becomes F32), or "f32", "f16", "bf16". NVFP4
	// weights of a ModelOpt checkpoint stay NVFP4 whatever it says.
	OutType string
	// NoMTP leaves out a Qwen3.5 checkpoint's multi-token-prediction block.
	NoMTP bool
	// Progress, when set, is called after each tensor is prepared with the
	// number done and the total.
	Progress func(done, total int)
}

// Report tells what Convert did.
type Report struct {
	Arch      string   // GGUF architecture: "llama" or "qwen35"
	HFArch    string   // config.json architectures[0] (or model_type)
	Tensors   int      // tensors in the GGUF file
	NVFP4     []string // GGUF weights repacked from ModelOpt NVFP4
	MTPLayers int      // MTP blocks written (qwen35)
	Skipped   int      // checkpoint tensors left out on purpose (vision tower, rotary caches, MTP with NoMTP)
	KVScales  int      // FP8 KV cache scales stored in the edgellmd.kv_cache.* metadata
	Dropped   []string // checkpoint tensors with no GGUF counterpart (KV scales of no known block)
	Copied    int64    // tensor bytes referenced straight from the checkpoint
	Converted int64    // tensor bytes that were transformed or retyped
}

// llama_ftype values (include/llama.h).
const (
	ftypeAllF32      = 0
	ftypeMostlyF16   = 1
	ftypeMostlyBF16  = 32
	ftypeMostlyNVFP4 = 39
)

// Convert plans the GGUF file for the checkpoint in dir and returns it as a
// Writer. The Writer refers to the checkpoint's mapped shards: call release
// once it has been written (or dropped). Every check runs here, before
// anything is written.
func Convert(dir string, opt Options) (w *gguf.Writer, rep Report, release func() error, err error) {
	outType, err := parseOutType(opt.OutType)
	if err != nil {
		return nil, Report{}, nil, err
	}
	c, err := openCheckpoint(dir)
	if err != nil {
		return nil, Report{}, nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	cv := &converter{c: c, opt: opt, outType: outType, w: gguf.NewWriter(), used: map[string]bool{}}
	if err := cv.run(); err != nil {
		return nil, Report{}, nil, fmt.Errorf("convert %s: %w", dir, err)
	}
	return cv.w, cv.rep, c.Close, nil
}

// ConvertFile converts the checkpoint in dir and writes out atomically
// (a temporary file renamed over out): an error or an interruption leaves
// no partial out.
func ConvertFile(dir, out string, opt Options) (Report, error) {
	w, rep, release, err := Convert(dir, opt)
	if err != nil {
		return Report{}, err
	}
	defer release()
	if err := w.WriteFile(out); err != nil {
		return Report{}, fmt.Errorf("convert %s: %w", dir, err)
	}
	return rep, nil
}

// parseOutType reads Options.OutType; ok=false keeps the checkpoint types.
func parseOutType(s string) (outType, error) {
	switch strings.ToLower(s) {
	case "":
		return outType{}, nil
	case "f32":
		return outType{tensor.F32, true}, nil
	case "f16":
		return outType{tensor.F16, true}, nil
	case "bf16":
		return outType{tensor.BF16, true}, nil
	}
	return outType{}, fmt.Errorf("convert: output type %q is not one of f32, f16, bf16", s)
}

type outType struct {
	t  tensor.DType
	ok bool
}

// converter holds one conversion in progress.
type converter struct {
	c             *checkpoint
	opt           Options
	outType       outType
	w             *gguf.Writer
	rep           Report
	nvfp4         bool                 // the checkpoint says quant_algo NVFP4
	canon         map[string]*stTensor // tensors by canonical name (language_model. stripped, mtp. at the top)
	kvScales      map[string]*stTensor // FP8 KV cache k_scale / v_scale tensors by canonical name
	used          map[string]bool      // canonical names consumed
	fileTypeCount map[uint32]int
}

// job makes one GGUF tensor from one checkpoint tensor.
type job struct {
	dst   string  // GGUF name
	src   string  // canonical checkpoint name
	shape []int64 // expected checkpoint shape, outermost first

	vec       bool                  // stored as F32: norms, 1-D tensors, conv1d
	fn        func(float64) float64 // elementwise transform (vec only)
	rowPerm   []int                 // output row r is input row rowPerm[r]
	colGroup  int                   // columns move in groups of colGroup ...
	colPerm   []int                 // ... output group g is input group colPerm[g]
	ggufShape []int64               // when not the reverse of shape (conv1d's squeeze)
	optional  bool
}

// kv is one metadata entry.
type kv struct {
	key   string
	value any
}

// plan is what an architecture contributes.
type plan struct {
	arch   string
	layers int // trunk blocks; MTP blocks follow
	meta   []kv
	jobs   []job
	mtp    int
}

func (cv *converter) run() error {
	c := cv.c
	hfArch := c.hp.architecture()
	if hfArch == "" {
		hfArch = c.hp.str("model_type")
	}
	cv.rep.HFArch = hfArch
	var err error
	if cv.nvfp4, err = quantAlgoNVFP4(c); err != nil {
		return err
	}
	if err := cv.canonicalise(); err != nil {
		return err
	}

	var p plan
	switch hfArch {
	case "LlamaForCausalLM", "llama":
		p, err = planLlama(c.hp)
	case "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "qwen3_5_text", "qwen3_5":
		p, err = planQwen35(c.hp, cv.mtpLayersSeen(), cv.opt.NoMTP)
	default:
		return fmt.Errorf("%s: architecture %q is not supported (want LlamaForCausalLM, Qwen3_5ForCausalLM or Qwen3_5ForConditionalGeneration)", c.hp.path, hfArch)
	}
	if err != nil {
		return err
	}
	cv.rep.Arch, cv.rep.MTPLayers = p.arch, p.mtp

	// The vocabulary first: its size checks the embedding's.
	vocabMeta, nVocab, err := readVocab(c.dir, c.hp, p.arch)
	if err != nil {
		return err
	}
	if emb, ok := cv.canon["model.embed_tokens.weight"]; ok && len(emb.Shape) == 2 && int(emb.Shape[0]) != nVocab {
		return fmt.Errorf("tensor %q in %s has %d rows, but the vocabulary has %d tokens (config.json vocab_size)", emb.Name, emb.File, emb.Shape[0], nVocab)
	}

	cv.fileTypeCount = map[uint32]int{}
	prepared := make([]preparedTensor, 0, len(p.jobs))
	for i := range p.jobs {
		t, ok, err := cv.prepare(&p.jobs[i])
		if err != nil {
			return err
		}
		if ok {
			prepared = append(prepared, t...)
		}
		if cv.opt.Progress != nil {
			cv.opt.Progress(i+1, len(p.jobs))
		}
	}
	if err := cv.leftovers(); err != nil {
		return err
	}
	kvMeta, err := cv.kvScaleMeta(p.layers, p.layers+p.mtp)
	if err != nil {
		return err
	}

	// general.* first, then the architecture's keys, then the tokenizer, in
	// the order llama.cpp's converter writes them.
	name := filepath.Base(filepath.Clean(c.dir))
	if n := c.hp.str("_name_or_path"); n != "" {
		name = filepath.Base(n)
	}
	meta := []kv{
		{"general.architecture", p.arch},
		{"general.type", "model"},
		{"general.name", name},
	}
	meta = append(meta, p.meta...)
	meta = append(meta, kvMeta...)
	meta = append(meta, kv{"general.file_type", cv.fileType()}, kv{"general.quantization_version", uint32(2)})
	meta = append(meta, vocabMeta...)
	for _, m := range meta {
		if err := cv.w.AddKV(m.key, m.value); err != nil {
			return err
		}
	}
	for _, t := range prepared {
		if err := cv.w.AddTensor(t.name, t.typ, t.shape, t.data); err != nil {
			return err
		}
	}
	cv.rep.Tensors = len(prepared)
	return nil
}

// fileType is general.file_type: NVFP4 when any weight is, else the type
// most weight matrices have.
func (cv *converter) fileType() uint32 {
	if len(cv.rep.NVFP4) > 0 {
		return ftypeMostlyNVFP4
	}
	best, n := uint32(ftypeAllF32), 0
	for _, ft := range []uint32{ftypeAllF32, ftypeMostlyF16, ftypeMostlyBF16} {
		if cv.fileTypeCount[ft] > n {
			best, n = ft, cv.fileTypeCount[ft]
		}
	}
	return best
}

// canonicalise names the tensors as llama.cpp's converter sees them after
// its filters: "language_model." removed (the text model of a multimodal
// checkpoint), "model.mtp." as "mtp."; vision and audio towers and rotary
// caches are skipped, FP8 KV scales dropped.
func (cv *converter) canonicalise() error {
	cv.canon = map[string]*stTensor{}
	cv.kvScales = map[string]*stTensor{}
	for _, name := range cv.c.names {
		t := cv.c.tensors[name]
		n := strings.Replace(name, "language_model.", "", 1)
		if strings.HasPrefix(n, "model.mtp.") {
			n = strings.TrimPrefix(n, "model.")
		}
		switch {
		case isTowerTensor(n), strings.HasSuffix(n, ".rotary_emb.inv_freq"),
			cv.opt.NoMTP && strings.HasPrefix(n, "mtp."):
			cv.rep.Skipped++
			continue
		case strings.HasSuffix(n, ".k_scale"), strings.HasSuffix(n, ".v_scale"):
			cv.kvScales[n] = t
			continue
		}
		if prev, dup := cv.canon[n]; dup {
			return fmt.Errorf("tensors %q and %q both stand for %q", prev.Name, name, n)
		}
		cv.canon[n] = t
	}
	return nil
}

// The FP8 KV cache scales as engine/model reads them (load.go): F32 arrays,
// entry N for blk.N (MTP blocks included), 1 where there is none; metadata
// rather than tensors because llama.cpp refuses tensors it does not create.
const (
	kvKScaleKey = "edgellmd.kv_cache.k_scale"
	kvVScaleKey = "edgellmd.kv_cache.v_scale"
)

// kvScaleMeta turns ModelOpt's per-layer `self_attn.k_proj.k_scale` and
// `self_attn.v_proj.v_scale` (FP8 value = code * scale, amax/448) into the
// two metadata arrays. A scale of a layer it cannot place is dropped.
func (cv *converter) kvScaleMeta(layers, blocks int) ([]kv, error) {
	if len(cv.kvScales) == 0 {
		return nil, nil
	}
	k, v := make([]float32, blocks), make([]float32, blocks)
	for i := range k {
		k[i], v[i] = 1, 1
	}
	names := make([]string, 0, len(cv.kvScales))
	for n := range cv.kvScales {
		names = append(names, n)
	}
	sort.Strings(names)
	var haveK, haveV bool
	for _, n := range names {
		t := cv.kvScales[n]
		block := -1
		var i int
		if _, err := fmt.Sscanf(n, "model.layers.%d.", &i); err == nil && i >= 0 && i < layers {
			block = i
		} else if _, err := fmt.Sscanf(n, "mtp.layers.%d.", &i); err == nil && i >= 0 && layers+i < blocks {
			block = layers + i
		}
		if block < 0 || !strings.Contains(n, ".self_attn.") {
			cv.rep.Dropped = append(cv.rep.Dropped, t.Name)
			continue
		}
		size, ok := floatSize(t.DType)
		if !ok || t.elems() != 1 || len(t.Data) != size {
			return nil, fmt.Errorf("tensor %q in %s is %s %v, want one F32 value", t.Name, t.File, t.DType, t.Shape)
		}
		val := make([]float32, 1)
		decodeFloats(t.DType, val, t.Data)
		if !(val[0] > 0) || math.IsInf(float64(val[0]), 0) {
			return nil, fmt.Errorf("tensor %q in %s = %g: want a positive finite KV scale", t.Name, t.File, val[0])
		}
		if strings.HasSuffix(n, ".k_scale") {
			k[block], haveK = val[0], true
		} else {
			v[block], haveV = val[0], true
		}
		cv.rep.KVScales++
	}
	var meta []kv
	if haveK {
		meta = append(meta, kv{kvKScaleKey, k})
	}
	if haveV {
		meta = append(meta, kv{kvVScaleKey, v})
	}
	return meta, nil
}

// isTowerTensor reports the tensors of a multimodal checkpoint's vision or
// audio parts (llama.cpp's TextModel.filter_tensors).
func isTowerTensor(n string) bool {
	for _, s := range []string{"visual.", "vision.", "vision_", "audio.", "audio_", "projector.", "patch_embed", "merger."} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// mtpLayersSeen is 1 + the largest i of the mtp.layers.i.* tensors.
func (cv *converter) mtpLayersSeen() int {
	n := 0
	for name := range cv.canon {
		rest, ok := strings.CutPrefix(name, "mtp.layers.")
		if !ok {
			continue
		}
		idx, _, _ := strings.Cut(rest, ".")
		var i int
		if _, err := fmt.Sscanf(idx, "%d", &i); err == nil && i >= 0 && i < 64 {
			n = max(n, i+1)
		}
	}
	return n
}

// leftovers fails on a checkpoint tensor no job used: a name this package
// does not know is a model it would convert wrongly.
func (cv *converter) leftovers() error {
	var left []string
	for name := range cv.canon {
		if !cv.used[name] {
			left = append(left, name)
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	t := cv.canon[left[0]]
	more := ""
	if len(left) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(left)-1)
	}
	return fmt.Errorf("tensor %q in %s%s has no place in a %s model: a different architecture or variant than config.json says?", t.Name, t.File, more, cv.rep.Arch)
}

// preparedTensor is one GGUF tensor ready for the Writer.
type preparedTensor struct {
	name  string
	typ   tensor.DType
	shape []int64
	data  []byte
}

// prepare runs one job: it finds and checks its source tensor and makes
// the GGUF tensor (plus an NVFP4 weight's .scale and .input_scale).
func (cv *converter) prepare(j *job) ([]preparedTensor, bool, error) {
	src, ok := cv.canon[j.src]
	if !ok {
		if j.optional {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("tensor %q missing from the checkpoint (want shape %v for %s)", j.src, j.shape, j.dst)
	}
	cv.used[j.src] = true
	if cv.nvfp4 && src.DType == "U8" {
		if j.vec || j.fn != nil {
			return nil, false, fmt.Errorf("tensor %q in %s: NVFP4 data where %s wants plain values", src.Name, src.File, j.dst)
		}
		t, err := cv.repackNVFP4(j, src)
		return t, err == nil, err
	}
	if !sameDims(src.Shape, j.shape) {
		return nil, false, fmt.Errorf("tensor %q in %s has shape %v, want %v (from config.json)", src.Name, src.File, src.Shape, j.shape)
	}
	size, ok := floatSize(src.DType)
	if !ok {
		return nil, false, fmt.Errorf("tensor %q in %s has dtype %s; want F32, F16, BF16 or F64 (or a ModelOpt NVFP4 checkpoint)", src.Name, src.File, src.DType)
	}
	rows, cols := rowsCols(j.shape)
	data := src.Data
	if j.rowPerm != nil || j.colPerm != nil {
		data = permute(data, rows, cols*size, j.rowPerm, j.colGroup*size, j.colPerm)
	}
	shape := j.ggufShape
	if shape == nil {
		shape = reversed(j.shape)
	}

	dt := srcType(src.DType)
	if j.vec {
		// Through float64, so an F64 source keeps its precision until the
		// transform's result is rounded once to F32.
		vals := make([]float64, rows*cols)
		decodeFloats64(src.DType, vals, data)
		out := make([]byte, 4*len(vals))
		for i, v := range vals {
			if j.fn != nil {
				v = j.fn(v)
			}
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(v)))
		}
		cv.rep.Converted += int64(len(out))
		return []preparedTensor{{j.dst, tensor.F32, shape, out}}, true, nil
	}

	want := dt
	if cv.outType.ok {
		want = cv.outType.t
	}
	cv.fileTypeCount[ftypeOf(want)]++
	if want == dt && src.DType != "F64" {
		if j.rowPerm == nil && j.colPerm == nil {
			cv.rep.Copied += int64(len(data))
		} else {
			cv.rep.Converted += int64(len(data))
		}
		return []preparedTensor{{j.dst, want, shape, data}}, true, nil
	}
	rb, err := want.RowBytes(int64(cols))
	if err != nil {
		return nil, false, fmt.Errorf("tensor %q: %w", src.Name, err)
	}
	out := make([]byte, int64(rows)*rb)
	row := make([]float32, cols)
	for r := 0; r < rows; r++ {
		decodeFloats(src.DType, row, data[r*cols*size:(r+1)*cols*size])
		if err := tensor.QuantizeRow(want, out[int64(r)*rb:int64(r+1)*rb], row); err != nil {
			return nil, false, fmt.Errorf("tensor %q: %w", src.Name, err)
		}
	}
	cv.rep.Converted += int64(len(out))
	return []preparedTensor{{j.dst, want, shape, out}}, true, nil
}

func ftypeOf(t tensor.DType) uint32 {
	switch t {
	case tensor.F16:
		return ftypeMostlyF16
	case tensor.BF16:
		return ftypeMostlyBF16
	}
	return ftypeAllF32
}

// sameDims compares shapes; a scalar [] and [1] are the same.
func sameDims(got, want []int64) bool {
	if len(got) == 0 {
		got = []int64{1}
	}
	if len(want) == 0 {
		want = []int64{1}
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// rowsCols views a shape as rows of the outermost dimension.
func rowsCols(shape []int64) (int, int) {
	if len(shape) == 0 {
		return 1, 1
	}
	cols := int64(1)
	for _, d := range shape[1:] {
		cols *= d
	}
	return int(shape[0]), int(cols)
}

func reversed(shape []int64) []int64 {
	if len(shape) == 0 {
		return []int64{1}
	}
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[len(shape)-1-i] = d
	}
	return out
}

func floatSize(dt string) (int, bool) {
	switch dt {
	case "F32":
		return 4, true
	case "F16", "BF16":
		return 2, true
	case "F64":
		return 8, true
	}
	return 0, false
}

// srcType is the GGUF type that holds dt's values exactly.
func srcType(dt string) tensor.DType {
	switch dt {
	case "F16":
		return tensor.F16
	case "BF16":
		return tensor.BF16
	}
	return tensor.F32
}

// decodeFloats decodes len(dst) little-endian values of dtype dt.
func decodeFloats(dt string, dst []float32, src []byte) {
	switch dt {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = tensor.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "F64":
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	}
}

// decodeFloats64 is decodeFloats into float64 (exact for every dtype).
func decodeFloats64(dt string, dst []float64, src []byte) {
	if dt == "F64" {
		for i := range dst {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
		}
		return
	}
	tmp := make([]float32, len(dst))
	decodeFloats(dt, tmp, src)
	for i, v := range tmp {
		dst[i] = float64(v)
	}
}

// permute copies rows of rowBytes bytes, output row r from input row
// rowPerm[r] (nil: in order), and within each row moves groups of
// groupBytes bytes, output group g from input group colPerm[g] (nil: none).
func permute(src []byte, rows, rowBytes int, rowPerm []int, groupBytes int, colPerm []int) []byte {
	out := make([]byte, rows*rowBytes)
	for r := 0; r < rows; r++ {
		in := r
		if rowPerm != nil {
			in = rowPerm[r]
		}
		s := src[in*rowBytes : (in+1)*rowBytes]
		d := out[r*rowBytes : (r+1)*rowBytes]
		if colPerm == nil {
			copy(d, s)
			continue
		}
		for g, from := range colPerm {
			copy(d[g*groupBytes:(g+1)*groupBytes], s[from*groupBytes:(from+1)*groupBytes])
		}
	}
	return out
}
