package convert

// Test-only writers of Hugging Face checkpoints: a safetensors writer, a
// SentencePiece model writer, and exporters that turn a GGUF model back into
// the checkpoint Hugging Face would hold for it. The exporters are written
// from Hugging Face's conventions (modeling code and checkpoint layouts), not
// by inverting this package's tables, so a round trip checks the mapping
// against an independent statement of it.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// stEntry is one tensor to write.
type stEntry struct {
	name  string
	dtype string
	shape []int64
	data  []byte
}

// encodeSafetensors lays out a safetensors file: header size, JSON header
// (padded with spaces to 8 bytes, as the reference writer does), data.
func encodeSafetensors(entries []stEntry) []byte {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, e := range entries {
		header[e.name] = map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": []int64{off, off + int64(len(e.data))}}
		off += int64(len(e.data))
	}
	h, err := json.Marshal(header)
	if err != nil {
		panic(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	for _, e := range entries {
		out = append(out, e.data...)
	}
	return out
}

// hfCheckpoint is a checkpoint directory's contents.
type hfCheckpoint struct {
	config          map[string]any
	tensors         []stEntry
	shards          int            // 1: model.safetensors; more: model-0000i-of-0000n + index
	tokenizerJSON   map[string]any // nil: none
	tokenizerConfig map[string]any
	spModel         []byte // tokenizer.model, nil: none
	extraFiles      map[string][]byte
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// write stores the checkpoint in dir.
func (h *hfCheckpoint) write(t testing.TB, dir string) {
	t.Helper()
	writeJSON(t, filepath.Join(dir, "config.json"), h.config)
	if h.tokenizerJSON != nil {
		writeJSON(t, filepath.Join(dir, "tokenizer.json"), h.tokenizerJSON)
	}
	if h.tokenizerConfig != nil {
		writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), h.tokenizerConfig)
	}
	if h.spModel != nil {
		if err := os.WriteFile(filepath.Join(dir, "tokenizer.model"), h.spModel, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range h.extraFiles {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := max(h.shards, 1)
	if n == 1 {
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), encodeSafetensors(h.tensors), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	weightMap := map[string]string{}
	per := (len(h.tensors) + n - 1) / n
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		part := h.tensors[min(i*per, len(h.tensors)):min((i+1)*per, len(h.tensors))]
		for _, e := range part {
			weightMap[e.name] = name
		}
		if err := os.WriteFile(filepath.Join(dir, name), encodeSafetensors(part), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(t, filepath.Join(dir, "model.safetensors.index.json"), map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
}

// ggufTensor reads one tensor of f as rows of bytes.
type ggufTensor struct {
	typ        tensor.DType
	rows, cols int
	rowBytes   int
	data       []byte
}

func readGGUFTensor(t testing.TB, f *gguf.File, name string) ggufTensor {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("%s: no tensor %q", f.Path, name)
	}
	cols := int(ti.Shape[0])
	rows := int(ti.Elems()) / cols
	rb, err := ti.Type.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	return ggufTensor{typ: ti.Type, rows: rows, cols: cols, rowBytes: int(rb), data: f.TensorData(ti)}
}

// stDType is the safetensors name of a GGUF float type.
func stDType(t testing.TB, typ tensor.DType) string {
	switch typ {
	case tensor.F32:
		return "F32"
	case tensor.F16:
		return "F16"
	case tensor.BF16:
		return "BF16"
	}
	t.Fatalf("no safetensors dtype for %s", typ)
	return ""
}

// floats decodes an F32 GGUF tensor.
func (g ggufTensor) floats(t testing.TB) []float32 {
	v := make([]float32, g.rows*g.cols)
	if err := tensor.DequantizeRow(g.typ, v, g.data); err != nil {
		t.Fatal(err)
	}
	return v
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// headGrouped is the GGUF value head whose data Hugging Face stores as head
// h. HF's Qwen3.5 Gated DeltaNet keeps the value heads of one key head
// together: head h = g*r + j belongs to key head g (repeat_interleave of q,k
// in modeling_qwen3_5.py); ggml (llama.cpp's qwen35 graph, and
// engine/model/deltanet.go's kh = hv % kHeads) pairs value head i with key
// head i % hk, so HF's head g*r + j is GGUF's head j*hk + g.
func headGrouped(h, hk, hv int) int {
	r := hv / hk
	g, j := h/r, h%r
	return j*hk + g
}

// groupRows reorders rows of d-row value heads from GGUF's order to HF's.
func groupRows(src []byte, rowBytes, d, hk, hv int) []byte {
	out := make([]byte, len(src))
	for h := 0; h < hv; h++ {
		from := headGrouped(h, hk, hv)
		copy(out[h*d*rowBytes:(h+1)*d*rowBytes], src[from*d*rowBytes:(from+1)*d*rowBytes])
	}
	return out
}

// groupCols reorders column blocks of d-column value heads of every row.
func groupCols(src []byte, rows, elemBytes, d, hk, hv int) []byte {
	out := make([]byte, len(src))
	rb := hv * d * elemBytes
	hb := d * elemBytes
	for r := 0; r < rows; r++ {
		for h := 0; h < hv; h++ {
			from := headGrouped(h, hk, hv)
			copy(out[r*rb+h*hb:r*rb+(h+1)*hb], src[r*rb+from*hb:r*rb+(from+1)*hb])
		}
	}
	return out
}

// qwen35Dims are a qwen35 GGUF's sizes.
type qwen35Dims struct {
	embd, ffn, layers, mtp, heads, kvHeads, headDim, vocab int
	K, dk, hk, hv, ropeDims                                int
	sections                                               []int32
	eps, theta                                             float32
}

func getU(t testing.TB, f *gguf.File, key string) int {
	t.Helper()
	v, ok := f.GetUint(key)
	if !ok {
		t.Fatalf("%s: no %s", f.Path, key)
	}
	return int(v)
}

func getF(t testing.TB, f *gguf.File, key string) float32 {
	t.Helper()
	v, ok := f.GetFloat(key)
	if !ok {
		t.Fatalf("%s: no %s", f.Path, key)
	}
	return float32(v)
}

func readQwen35Dims(t testing.TB, f *gguf.File) qwen35Dims {
	const a = "qwen35."
	d := qwen35Dims{
		embd: getU(t, f, a+"embedding_length"), ffn: getU(t, f, a+"feed_forward_length"),
		heads: getU(t, f, a+"attention.head_count"), kvHeads: getU(t, f, a+"attention.head_count_kv"),
		headDim: getU(t, f, a+"attention.key_length"), K: getU(t, f, a+"ssm.conv_kernel"),
		dk: getU(t, f, a+"ssm.state_size"), hk: getU(t, f, a+"ssm.group_count"), hv: getU(t, f, a+"ssm.time_step_rank"),
		ropeDims: getU(t, f, a+"rope.dimension_count"),
		eps:      getF(t, f, a+"attention.layer_norm_rms_epsilon"), theta: getF(t, f, a+"rope.freq_base"),
	}
	if v, ok := f.GetUint(a + "nextn_predict_layers"); ok {
		d.mtp = int(v)
	}
	d.layers = getU(t, f, a+"block_count") - d.mtp
	d.sections, _ = f.GetInt32s(a + "rope.dimension_sections")
	toks, _ := f.GetStrings("tokenizer.ggml.tokens")
	d.vocab = len(toks)
	return d
}

// mat is a weight matrix in Hugging Face's layout, [rows, cols] row-major:
// plain floats (dtype, data), or ModelOpt NVFP4 held one E2M1 code a value
// (codes, rows*cols) with one E4M3 scale byte per 16 values and the
// per-tensor scale s2, so rows and columns can be moved value by value.
type mat struct {
	rows, cols int
	dtype      string
	esize      int
	data       []byte

	nv     bool
	codes  []byte
	scales []byte
	s2     float32
}

// matOf reads a GGUF matrix (ggml {cols, rows} = HF [rows, cols]).
func matOf(t testing.TB, f *gguf.File, name string) mat {
	g := readGGUFTensor(t, f, name)
	m := mat{rows: g.rows, cols: g.cols}
	if g.typ != tensor.NVFP4 {
		m.dtype, m.esize, m.data = stDType(t, g.typ), g.rowBytes/g.cols, g.data
		return m
	}
	// ggml block_nvfp4 (ggml-common.h): per 64 values 4 scale bytes, then
	// sub-block s's 8 bytes, byte j = value 16s+j (low nibble) | value
	// 16s+j+8 (high nibble).
	m.nv = true
	m.codes = make([]byte, g.rows*g.cols)
	m.scales = make([]byte, g.rows*g.cols/16)
	for r := 0; r < g.rows; r++ {
		row := g.data[r*g.rowBytes : (r+1)*g.rowBytes]
		for b := 0; b < g.cols/64; b++ {
			blk := row[36*b : 36*(b+1)]
			for s := 0; s < 4; s++ {
				m.scales[r*g.cols/16+4*b+s] = blk[s]
				for j := 0; j < 8; j++ {
					q := blk[4+8*s+j]
					m.codes[r*g.cols+64*b+16*s+j] = q & 15
					m.codes[r*g.cols+64*b+16*s+j+8] = q >> 4
				}
			}
		}
	}
	base := strings.TrimSuffix(name, ".weight")
	m.s2 = 1
	if _, ok := f.Tensor(base + ".scale"); ok {
		m.s2 = readGGUFTensor(t, f, base+".scale").floats(t)[0]
	}
	return m
}

// moveRows makes row r of the result row from(r) of m.
func (m mat) moveRows(from func(r int) int) mat {
	move := func(src []byte, rowBytes int) []byte {
		out := make([]byte, len(src))
		for r := 0; r < m.rows; r++ {
			copy(out[r*rowBytes:(r+1)*rowBytes], src[from(r)*rowBytes:(from(r)+1)*rowBytes])
		}
		return out
	}
	if m.nv {
		m.codes, m.scales = move(m.codes, m.cols), move(m.scales, m.cols/16)
	} else {
		m.data = move(m.data, m.cols*m.esize)
	}
	return m
}

// groupRows moves the rows from start on, value heads of d rows, from
// GGUF's tiled order to HF's grouped order.
func (m mat) groupRows(start, d, hk, hv int) mat {
	move := func(src []byte, rowBytes int) []byte {
		out := append([]byte{}, src...)
		copy(out[start*rowBytes:], groupRows(src[start*rowBytes:], rowBytes, d, hk, hv))
		return out
	}
	if m.nv {
		m.codes, m.scales = move(m.codes, m.cols), move(m.scales, m.cols/16)
	} else {
		m.data = move(m.data, m.cols*m.esize)
	}
	return m
}

// groupCols moves column blocks of d columns (value heads) likewise.
func (m mat) groupCols(d, hk, hv int) mat {
	if m.nv {
		m.codes = groupCols(m.codes, m.rows, 1, d, hk, hv)
		m.scales = groupCols(m.scales, m.rows, 1, d/16, hk, hv)
	} else {
		m.data = groupCols(m.data, m.rows, m.esize, d, hk, hv)
	}
	return m
}

// entries are the checkpoint tensors of weight name (".weight" included):
// the floats, or ModelOpt's weight (U8 [rows, cols/2], value 2i in the low
// nibble of byte i: NVFP4QTensor.quantize), weight_scale (F8_E4M3
// [rows, cols/16]), weight_scale_2 and input_scale (F32 scalars).
func (m mat) entries(name string, inputScale float32) []stEntry {
	shape := []int64{int64(m.rows), int64(m.cols)}
	if !m.nv {
		return []stEntry{{name, m.dtype, shape, m.data}}
	}
	packed := make([]byte, len(m.codes)/2)
	for i := range packed {
		packed[i] = m.codes[2*i] | m.codes[2*i+1]<<4
	}
	base := strings.TrimSuffix(name, ".weight")
	return []stEntry{
		{name, "U8", []int64{int64(m.rows), int64(m.cols / 2)}, packed},
		{base + ".weight_scale", "F8_E4M3", []int64{int64(m.rows), int64(m.cols / 16)}, m.scales},
		{base + ".weight_scale_2", "F32", []int64{}, f32Bytes([]float32{m.s2})},
		{base + ".input_scale", "F32", []int64{}, f32Bytes([]float32{inputScale})},
	}
}

// exportOptions vary qwen35Export.
type exportOptions struct {
	multimodal bool
	// inputScales gives ModelOpt input_scale values by GGUF weight name (1
	// for the others); kvScales the k_scale/v_scale of each attention block
	// by GGUF block number.
	inputScales map[string]float32
	kScales     map[int]float32
	vScales     map[int]float32
}

// qwen35Export builds the Hugging Face checkpoint of a qwen35 GGUF model:
// Qwen3_5ForCausalLM (model.*, mtp.*), or with multimodal the text model of
// Qwen3_5ForConditionalGeneration (model.language_model.*, a text_config,
// and a stand-in vision tower that a converter must skip). NVFP4 weights
// become ModelOpt's NVFP4 tensors.
//
// HF conventions used (transformers models/qwen3_5, Qwen3-Next): RMSNorm
// weights are zero-centred (the model uses 1 + w) except the DeltaNet's
// gated norm; the decay is stored as A_log with A = -exp(A_log); dt_bias;
// conv1d.weight is [channels, 1, kernel]; in_proj_qkv rows are q, k, v with
// value heads grouped by key head, as are in_proj_z, in_proj_a/b, A_log,
// dt_bias and out_proj's columns; the MTP block is mtp.fc, mtp.pre_fc_norm_
// embedding, mtp.pre_fc_norm_hidden, mtp.norm and mtp.layers.0.*.
func qwen35Export(t testing.TB, f *gguf.File, opt exportOptions) *hfCheckpoint {
	t.Helper()
	d := readQwen35Dims(t, f)
	h := &hfCheckpoint{}
	trunk := "model."
	if opt.multimodal {
		trunk = "model.language_model."
	}
	add := func(name, dtype string, shape []int64, data []byte) {
		h.tensors = append(h.tensors, stEntry{name, dtype, shape, data})
	}
	put := func(hf, gg string, m mat) {
		in := float32(1)
		if v, ok := opt.inputScales[gg]; ok {
			in = v
		}
		h.tensors = append(h.tensors, m.entries(hf, in)...)
	}
	matrix := func(hf, gg string) { put(hf, gg, matOf(t, f, gg)) }
	// zeroCentred stores a folded norm weight w as HF's w - 1.
	zeroCentred := func(hf, gg string) {
		v := readGGUFTensor(t, f, gg).floats(t)
		for i := range v {
			v[i] -= 1 // exact: synth norms lie in [0.5, 2] (Sterbenz)
		}
		add(hf, "F32", []int64{int64(len(v))}, f32Bytes(v))
	}
	kvScales := func(hfp string, block int) {
		if v, ok := opt.kScales[block]; ok {
			add(hfp+"self_attn.k_proj.k_scale", "F32", []int64{}, f32Bytes([]float32{v}))
		}
		if v, ok := opt.vScales[block]; ok {
			add(hfp+"self_attn.v_proj.v_scale", "F32", []int64{}, f32Bytes([]float32{v}))
		}
	}

	matrix(trunk+"embed_tokens.weight", "token_embd.weight")
	zeroCentred(trunk+"norm.weight", "output_norm.weight")
	if _, ok := f.Tensor("output.weight"); ok {
		matrix("lm_head.weight", "output.weight")
	}

	hk, hv, dv := d.hk, d.hv, d.dk
	keyDim := hk * d.dk
	fullAttn := func(hfp, gp string) {
		zeroCentred(hfp+"input_layernorm.weight", gp+"attn_norm.weight")
		matrix(hfp+"self_attn.q_proj.weight", gp+"attn_q.weight")
		matrix(hfp+"self_attn.k_proj.weight", gp+"attn_k.weight")
		matrix(hfp+"self_attn.v_proj.weight", gp+"attn_v.weight")
		matrix(hfp+"self_attn.o_proj.weight", gp+"attn_output.weight")
		zeroCentred(hfp+"self_attn.q_norm.weight", gp+"attn_q_norm.weight")
		zeroCentred(hfp+"self_attn.k_norm.weight", gp+"attn_k_norm.weight")
	}
	mlp := func(hfp, gp string) {
		zeroCentred(hfp+"post_attention_layernorm.weight", gp+"post_attention_norm.weight")
		matrix(hfp+"mlp.gate_proj.weight", gp+"ffn_gate.weight")
		matrix(hfp+"mlp.up_proj.weight", gp+"ffn_up.weight")
		matrix(hfp+"mlp.down_proj.weight", gp+"ffn_down.weight")
	}
	for i := 0; i < d.layers; i++ {
		hfp := fmt.Sprintf("%slayers.%d.", trunk, i)
		gp := fmt.Sprintf("blk.%d.", i)
		if _, ok := f.Tensor(gp + "attn_qkv.weight"); !ok {
			fullAttn(hfp, gp)
			kvScales(hfp, i)
			mlp(hfp, gp)
			continue
		}
		zeroCentred(hfp+"input_layernorm.weight", gp+"attn_norm.weight")
		put(hfp+"linear_attn.in_proj_qkv.weight", gp+"attn_qkv.weight", matOf(t, f, gp+"attn_qkv.weight").groupRows(2*keyDim, dv, hk, hv))
		put(hfp+"linear_attn.in_proj_z.weight", gp+"attn_gate.weight", matOf(t, f, gp+"attn_gate.weight").groupRows(0, dv, hk, hv))
		put(hfp+"linear_attn.in_proj_b.weight", gp+"ssm_beta.weight", matOf(t, f, gp+"ssm_beta.weight").groupRows(0, 1, hk, hv))
		put(hfp+"linear_attn.in_proj_a.weight", gp+"ssm_alpha.weight", matOf(t, f, gp+"ssm_alpha.weight").groupRows(0, 1, hk, hv))
		conv := matOf(t, f, gp+"ssm_conv1d.weight").groupRows(2*keyDim, dv, hk, hv) // {K, channels}: channels rows of K
		add(hfp+"linear_attn.conv1d.weight", "F32", []int64{int64(conv.rows), 1, int64(conv.cols)}, conv.data)
		dt := readGGUFTensor(t, f, gp+"ssm_dt.bias")
		add(hfp+"linear_attn.dt_bias", "F32", []int64{int64(hv)}, groupRows(dt.data, 4, 1, hk, hv))
		a := readGGUFTensor(t, f, gp+"ssm_a")
		dtype, aLog := aLogOf(bytesToF32(groupRows(a.data, 4, 1, hk, hv)))
		add(hfp+"linear_attn.A_log", dtype, []int64{int64(hv)}, aLog)
		norm := readGGUFTensor(t, f, gp+"ssm_norm.weight") // the gated norm is not zero-centred
		add(hfp+"linear_attn.norm.weight", "F32", []int64{int64(dv)}, norm.data)
		put(hfp+"linear_attn.out_proj.weight", gp+"ssm_out.weight", matOf(t, f, gp+"ssm_out.weight").groupCols(dv, hk, hv))
		mlp(hfp, gp)
	}
	if d.mtp > 0 {
		gp := fmt.Sprintf("blk.%d.", d.layers)
		fullAttn("mtp.layers.0.", gp)
		kvScales("mtp.layers.0.", d.layers)
		mlp("mtp.layers.0.", gp)
		matrix("mtp.fc.weight", gp+"nextn.eh_proj.weight")
		zeroCentred("mtp.pre_fc_norm_embedding.weight", gp+"nextn.enorm.weight")
		zeroCentred("mtp.pre_fc_norm_hidden.weight", gp+"nextn.hnorm.weight")
		zeroCentred("mtp.norm.weight", gp+"nextn.shared_head_norm.weight")
	}

	layerTypes := make([]string, d.layers)
	for i := range layerTypes {
		layerTypes[i] = "linear_attention"
		if _, ok := f.Tensor(fmt.Sprintf("blk.%d.attn_qkv.weight", i)); !ok {
			layerTypes[i] = "full_attention"
		}
	}
	text := map[string]any{
		"model_type":  "qwen3_5_text",
		"hidden_size": d.embd, "intermediate_size": d.ffn, "num_hidden_layers": d.layers,
		"num_attention_heads": d.heads, "num_key_value_heads": d.kvHeads, "head_dim": d.headDim,
		"rms_norm_eps": d.eps, "vocab_size": d.vocab, "max_position_embeddings": 32768,
		"linear_conv_kernel_dim": d.K, "linear_key_head_dim": d.dk, "linear_value_head_dim": d.dk,
		"linear_num_key_heads": hk, "linear_num_value_heads": hv,
		"layer_types": layerTypes, "full_attention_interval": 4,
		"mtp_num_hidden_layers": d.mtp, "tie_word_embeddings": false, "attn_output_gate": true,
		"hidden_act": "silu",
		"rope_parameters": map[string]any{
			"rope_type": "default", "rope_theta": d.theta,
			"partial_rotary_factor": float64(d.ropeDims) / float64(d.headDim),
			"mrope_section":         d.sections[:3], "mrope_interleaved": true,
		},
	}
	if opt.multimodal {
		h.config = map[string]any{
			"architectures": []string{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
			"text_config": text, "vision_config": map[string]any{"depth": 1, "hidden_size": 16},
			"tie_word_embeddings": false,
		}
		add("model.visual.blocks.0.attn.qkv.weight", "F32", []int64{48, 16}, make([]byte, 48*16*4))
		add("model.visual.patch_embed.proj.weight", "BF16", []int64{16, 3}, make([]byte, 16*3*2))
	} else {
		text["architectures"] = []string{"Qwen3_5ForCausalLM"}
		h.config = text
	}
	return h
}

func bytesToF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// aLogOf stores A = ssm_a as HF's A_log = log(-A): F32 when every value
// has an F32 logarithm whose -exp rounds back to it, else F64.
func aLogOf(a []float32) (string, []byte) {
	out := make([]float32, len(a))
	for i, x := range a {
		l := float32(math.Log(-float64(x)))
		found := false
		for k := 0; k <= 8 && !found; k++ {
			for _, cand := range []float32{stepUlp(l, k), stepUlp(l, -k)} {
				if float32(-math.Exp(float64(cand))) == x {
					out[i], found = cand, true
					break
				}
			}
		}
		if !found {
			b := make([]byte, 8*len(a))
			for i, x := range a {
				binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(math.Log(-float64(x))))
			}
			return "F64", b
		}
	}
	return "F32", f32Bytes(out)
}

// stepUlp moves x by k units in the last place.
func stepUlp(x float32, k int) float32 {
	dir := float32(math.Inf(1))
	if k < 0 {
		dir, k = float32(math.Inf(-1)), -k
	}
	for ; k > 0; k-- {
		x = math.Nextafter32(x, dir)
	}
	return x
}

// qwenTokenizerFiles writes a byte-level vocabulary as Hugging Face's
// tokenizer.json (BPE model, NFC normalizer, Split+ByteLevel pre-tokenizer
// with Qwen2's regex, ByteLevel decoder; control tokens as special added
// tokens) and tokenizer_config.json.
func qwenTokenizerFiles(v tokenizer.Vocab, chatTemplate string) (map[string]any, map[string]any) {
	const qwen2Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	vocab := map[string]int{}
	var added []map[string]any
	decoder := map[string]any{}
	for id, s := range v.Tokens {
		if v.Types[id] == tokenizer.TypeControl {
			a := map[string]any{"id": id, "content": s, "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}
			added = append(added, a)
			decoder[fmt.Sprint(id)] = a
			continue
		}
		vocab[s] = id
	}
	merges := make([][]string, len(v.Merges))
	for i, m := range v.Merges {
		a, b, _ := strings.Cut(m, " ")
		merges[i] = []string{a, b}
	}
	tj := map[string]any{
		"version": "1.0", "added_tokens": added,
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":   map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges},
	}
	tc := map[string]any{
		"add_bos_token": false, "bos_token": nil, "added_tokens_decoder": decoder,
		"chat_template": chatTemplate, "model_max_length": 32768, "tokenizer_class": "Qwen2Tokenizer",
	}
	if v.EOS >= 0 {
		tc["eos_token"] = v.Tokens[v.EOS]
	}
	if v.PAD >= 0 {
		tc["pad_token"] = v.Tokens[v.PAD]
	}
	return tj, tc
}

// spModel encodes a SentencePiece ModelProto holding only its pieces
// (sentencepiece_model.proto: ModelProto.pieces = 1; SentencePiece.piece = 1,
// score = 2 (float), type = 3).
func spModel(tokens []string, scores []float32, types []int32) []byte {
	var out []byte
	for i, tok := range tokens {
		var p []byte
		p = binary.AppendUvarint(p, 1<<3|2)
		p = binary.AppendUvarint(p, uint64(len(tok)))
		p = append(p, tok...)
		p = binary.AppendUvarint(p, 2<<3|5)
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(scores[i]))
		p = binary.AppendUvarint(p, 3<<3|0)
		p = binary.AppendUvarint(p, uint64(types[i]))
		out = binary.AppendUvarint(out, 1<<3|2)
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	// A trainer_spec (field 2) the reader must skip.
	spec := []byte{1<<3 | 2, 3, 'b', 'p', 'e'}
	out = binary.AppendUvarint(out, 2<<3|2)
	out = binary.AppendUvarint(out, uint64(len(spec)))
	return append(out, spec...)
}

// llamaExport builds the Hugging Face LlamaForCausalLM checkpoint of a
// llama GGUF (Meta's layout): transformers' convert_llama_weights_to_hf.py
// permutes q_proj and k_proj rows for rotate-half RoPE,
// w.view(heads, dim/heads/2, 2, in).transpose(1, 2): HF row
// (head, half, i) is Meta's row (head, i, half). Norms are plain RMSNorm
// weights. The vocabulary goes to a SentencePiece tokenizer.model.
func llamaExport(t testing.TB, f *gguf.File, v tokenizer.Vocab) *hfCheckpoint {
	t.Helper()
	const a = "llama."
	embd, heads := getU(t, f, a+"embedding_length"), getU(t, f, a+"attention.head_count")
	kvHeads, layers := getU(t, f, a+"attention.head_count_kv"), getU(t, f, a+"block_count")
	hd := embd / heads
	h := &hfCheckpoint{}
	plain := func(hf, gg string) {
		g := readGGUFTensor(t, f, gg)
		if g.rows == 1 { // a norm
			h.tensors = append(h.tensors, stEntry{hf, stDType(t, g.typ), []int64{int64(g.cols)}, g.data})
			return
		}
		h.tensors = append(h.tensors, matOf(t, f, gg).entries(hf, 1)...)
	}
	hfPermute := func(hf, gg string, n int) {
		m := matOf(t, f, gg).moveRows(func(dst int) int {
			head, rest := dst/hd, dst%hd
			half, i := rest/(hd/2), rest%(hd/2)
			return head*hd + 2*i + half
		})
		h.tensors = append(h.tensors, m.entries(hf, 1)...)
	}
	plain("model.embed_tokens.weight", "token_embd.weight")
	plain("model.norm.weight", "output_norm.weight")
	plain("lm_head.weight", "output.weight")
	for i := 0; i < layers; i++ {
		hfp, gp := fmt.Sprintf("model.layers.%d.", i), fmt.Sprintf("blk.%d.", i)
		plain(hfp+"input_layernorm.weight", gp+"attn_norm.weight")
		hfPermute(hfp+"self_attn.q_proj.weight", gp+"attn_q.weight", heads)
		hfPermute(hfp+"self_attn.k_proj.weight", gp+"attn_k.weight", kvHeads)
		plain(hfp+"self_attn.v_proj.weight", gp+"attn_v.weight")
		plain(hfp+"self_attn.o_proj.weight", gp+"attn_output.weight")
		plain(hfp+"post_attention_layernorm.weight", gp+"ffn_norm.weight")
		plain(hfp+"mlp.gate_proj.weight", gp+"ffn_gate.weight")
		plain(hfp+"mlp.up_proj.weight", gp+"ffn_up.weight")
		plain(hfp+"mlp.down_proj.weight", gp+"ffn_down.weight")
	}
	// Sort like a torch state dict is not required; shuffle order a little
	// by name so the converter cannot rely on file order.
	sort.Slice(h.tensors, func(i, j int) bool { return h.tensors[i].name < h.tensors[j].name })

	ctx := getU(t, f, a+"context_length")
	h.config = map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": embd, "intermediate_size": getU(t, f, a+"feed_forward_length"),
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kvHeads,
		"rms_norm_eps": getF(t, f, a+"attention.layer_norm_rms_epsilon"), "vocab_size": len(v.Tokens),
		"max_position_embeddings": ctx, "rope_theta": 10000.0, "tie_word_embeddings": false,
		"hidden_act": "silu", "bos_token_id": v.BOS, "eos_token_id": v.EOS, "rope_scaling": nil,
	}
	h.spModel = spModel(v.Tokens, v.Scores, v.Types)
	h.tokenizerConfig = map[string]any{
		"bos_token": v.Tokens[v.BOS], "eos_token": v.Tokens[v.EOS], "unk_token": v.Tokens[v.UNK],
		"add_bos_token": true, "add_eos_token": false, "tokenizer_class": "LlamaTokenizer",
	}
	return h
}
