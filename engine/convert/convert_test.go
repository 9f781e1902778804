package convert

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

const storiesPath = "../../testdata/models/stories260K.gguf"

// testTemplate is a chat template the exported checkpoints carry.
const testTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func vocabOf(t testing.TB, f *gguf.File) tokenizer.Vocab {
	t.Helper()
	v, err := tokenizer.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// synthQwen35 writes a tiny synthetic qwen35 model with an MTP head.
func synthQwen35(t testing.TB, dir, typ string) string {
	t.Helper()
	path := filepath.Join(dir, "synth-"+typ+".gguf")
	if err := synth.Write(path, synth.Options{Arch: "qwen35", Size: "tiny", Type: typ, MTP: true, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameTensors checks that got holds every tensor of want with the same
// type, shape and bytes, and nothing else but the names in extra.
func sameTensors(t testing.TB, want, got *gguf.File, extra ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, e := range extra {
		allowed[e] = true
	}
	for i := range want.Tensors {
		w := &want.Tensors[i]
		g, ok := got.Tensor(w.Name)
		if !ok {
			t.Errorf("tensor %s missing after conversion", w.Name)
			continue
		}
		if g.Type != w.Type || !reflect.DeepEqual(g.Shape, w.Shape) {
			t.Errorf("tensor %s: %s %v, want %s %v", w.Name, g.Type, g.Shape, w.Type, w.Shape)
			continue
		}
		if !bytes.Equal(got.TensorData(g), want.TensorData(w)) {
			t.Errorf("tensor %s: data differs", w.Name)
		}
	}
	for i := range got.Tensors {
		n := got.Tensors[i].Name
		if _, ok := want.Tensor(n); !ok && !allowed[n] {
			t.Errorf("unexpected tensor %s after conversion", n)
		}
	}
}

// runModel loads path and returns the logits of every token of a prompt
// and, when the model has an MTP head, that head's logits for the same
// positions (fed the trunk's hidden states and the next tokens).
func runModel(t testing.TB, f *gguf.File) (model.Hyper, []float32, []float32) {
	t.Helper()
	pool := tensor.NewPool(1)
	t.Cleanup(pool.Close)
	m, err := model.Load(f, model.Options{KVType: tensor.F32, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	hp := m.Hyper()
	toks := make([]int32, 12)
	for i := range toks {
		toks[i] = int32((i*37 + 5) % hp.Vocab)
	}
	st := m.NewState(64)
	logits := make([]float32, len(toks)*hp.Vocab)
	hidden := make([]float32, len(toks)*hp.Embd)
	if err := m.ForwardHidden(st, model.ChainBatch(toks, 0, true), logits, hidden); err != nil {
		t.Fatal(err)
	}
	var mtp []float32
	if head := m.MTP(); head != nil {
		n := len(toks) - 1
		mst := head.NewState(64)
		mtp = make([]float32, n*hp.Vocab)
		if err := head.Forward(mst, model.ChainBatch(toks[1:], 0, true), hidden[:n*hp.Embd], mtp, nil); err != nil {
			t.Fatal(err)
		}
	}
	return hp, logits, mtp
}

func sameBits(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v (bit-exact)", what, i, got[i], want[i])
		}
	}
}

// checkSameModel compares the logits (and MTP logits) and hyperparameters
// of two files bit for bit.
func checkSameModel(t testing.TB, want, got *gguf.File) {
	t.Helper()
	hw, lw, mw := runModel(t, want)
	hg, lg, mg := runModel(t, got)
	if !reflect.DeepEqual(hg, hw) {
		t.Errorf("hyperparameters after conversion\n%+v\nwant\n%+v", hg, hw)
	}
	sameBits(t, "logits", lg, lw)
	sameBits(t, "MTP logits", mg, mw)
}

func convertDir(t testing.TB, dir string, opt Options) (*gguf.File, Report) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.gguf")
	rep, err := ConvertFile(dir, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	return openGGUF(t, out), rep
}

// TestQwen35RoundTrip exports synthetic qwen35 models (with MTP) to Hugging
// Face checkpoints and converts them back: every tensor comes back with the
// same bytes, the metadata gives the same hyperparameters and vocabulary,
// and the trunk and MTP logits are bit-identical.
func TestQwen35RoundTrip(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		typ        string
		multimodal bool
		shards     int
	}{
		{"F32", false, 1},
		{"F16", true, 3},
		{"BF16", false, 2},
	} {
		t.Run(fmt.Sprintf("%s-multimodal=%v-shards=%d", tc.typ, tc.multimodal, tc.shards), func(t *testing.T) {
			orig := openGGUF(t, synthQwen35(t, tmp, tc.typ))
			v := vocabOf(t, orig)
			h := qwen35Export(t, orig, exportOptions{multimodal: tc.multimodal})
			h.tokenizerJSON, h.tokenizerConfig = qwenTokenizerFiles(v, testTemplate)
			h.shards = tc.shards
			dir := t.TempDir()
			h.write(t, dir)

			conv, rep := convertDir(t, dir, Options{})
			if rep.Arch != "qwen35" || rep.MTPLayers != 1 || len(rep.NVFP4) != 0 {
				t.Errorf("report %+v", rep)
			}
			if tc.multimodal && rep.Skipped != 2 {
				t.Errorf("skipped %d tensors, want the 2 vision ones", rep.Skipped)
			}
			sameTensors(t, orig, conv)
			checkSameModel(t, orig, conv)

			got := vocabOf(t, conv)
			if got.ChatTemplate != testTemplate {
				t.Errorf("chat template %q, want %q", got.ChatTemplate, testTemplate)
			}
			got.ChatTemplate = v.ChatTemplate
			if !reflect.DeepEqual(got, v) {
				t.Errorf("vocabulary after conversion differs:\n%+v\nwant\n%+v", summary(got), summary(v))
			}
			if ft, _ := conv.GetUint("general.file_type"); ft != uint64(map[string]uint32{"F32": 0, "F16": 1, "BF16": 32}[tc.typ]) {
				t.Errorf("general.file_type = %d", ft)
			}
		})
	}
}

func summary(v tokenizer.Vocab) string {
	return fmt.Sprintf("model=%s pre=%s tokens=%d merges=%d bos=%d eos=%d unk=%d pad=%d eot=%d addbos=%v addeos=%v space=%v",
		v.Model, v.Pre, len(v.Tokens), len(v.Merges), v.BOS, v.EOS, v.UNK, v.PAD, v.EOT, v.AddBOS, v.AddEOS, v.AddSpacePrefix)
}

// TestLlamaRoundTrip exports the real stories260K model to a Hugging Face
// LlamaForCausalLM checkpoint (HF's q/k permutation, a SentencePiece
// tokenizer.model) and converts it back.
func TestLlamaRoundTrip(t *testing.T) {
	orig := openGGUF(t, storiesPath)
	v := vocabOf(t, orig)
	h := llamaExport(t, orig, v)
	dir := t.TempDir()
	h.write(t, dir)

	conv, rep := convertDir(t, dir, Options{})
	if rep.Arch != "llama" || rep.Converted == 0 || rep.Copied == 0 {
		t.Errorf("report %+v", rep)
	}
	sameTensors(t, orig, conv)
	checkSameModel(t, orig, conv)
	got := vocabOf(t, conv)
	if got.Pre != "default" {
		t.Errorf("tokenizer.ggml.pre = %q, want llama.cpp's \"default\" for SentencePiece", got.Pre)
	}
	got.Pre = v.Pre // stories260K's file has none; SentencePiece ignores it
	if !reflect.DeepEqual(got, v) {
		t.Errorf("vocabulary after conversion differs:\n%+v\nwant\n%+v", summary(got), summary(v))
	}

	// --outtype f16: the matrices are the F32 values rounded to F16 (by
	// engine/tensor's tested codec); 1-D tensors stay F32.
	conv16, _ := convertDir(t, dir, Options{OutType: "f16"})
	for i := range orig.Tensors {
		w := &orig.Tensors[i]
		g, ok := conv16.Tensor(w.Name)
		if !ok {
			t.Fatalf("f16: %s missing", w.Name)
		}
		if len(w.Shape) == 1 {
			if g.Type != tensor.F32 {
				t.Errorf("f16: %s is %s, want F32", w.Name, g.Type)
			}
			continue
		}
		vals := make([]float32, w.Elems())
		if err := tensor.DequantizeRow(w.Type, vals, orig.TensorData(w)); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 2*len(vals))
		if err := tensor.QuantizeRow(tensor.F16, want, vals); err != nil {
			t.Fatal(err)
		}
		if g.Type != tensor.F16 || !bytes.Equal(conv16.TensorData(g), want) {
			t.Errorf("f16: %s is %s and differs from the F16 rounding of the original", w.Name, g.Type)
		}
	}
	if ft, _ := conv16.GetUint("general.file_type"); ft != 1 {
		t.Errorf("f16: general.file_type = %d, want 1", ft)
	}
}

// TestNVFP4Repack builds a ModelOpt NVFP4 checkpoint from engine/quantize's
// NVFP4 output (unpacked to ModelOpt's nibble order and E4M3 scale tensors)
// and converts it back: the NVFP4 blocks and .scale tensors come back byte
// for byte, a non-trivial input_scale becomes <name>.input_scale, the
// k/v scales go to the KV scale metadata, and the logits are identical.
func TestNVFP4Repack(t *testing.T) {
	tmp := t.TempDir()
	src := synthQwen35(t, tmp, "F32")
	nvPath := filepath.Join(tmp, "nvfp4.gguf")
	if _, err := quantize.QuantizeFile(src, nvPath, quantize.Options{Type: tensor.NVFP4}); err != nil {
		t.Fatal(err)
	}
	orig := openGGUF(t, nvPath)
	v := vocabOf(t, orig)
	opt := exportOptions{
		inputScales: map[string]float32{"blk.3.attn_q.weight": 0.0625, "blk.0.ssm_out.weight": 0.5},
		kScales:     map[int]float32{3: 0.02, 7: 0.03, 8: 0.04},
		vScales:     map[int]float32{3: 0.05, 7: 0.06},
	}
	h := qwen35Export(t, orig, opt)
	h.tokenizerJSON, h.tokenizerConfig = qwenTokenizerFiles(v, testTemplate)
	h.extraFiles = map[string][]byte{"hf_quant_config.json": []byte(`{"producer": {"name": "modelopt", "version": "0.29.0"},
 "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head", "mtp*"]}}`)}
	dir := t.TempDir()
	h.write(t, dir)

	conv, rep := convertDir(t, dir, Options{})
	nNV := 0
	for i := range orig.Tensors {
		if orig.Tensors[i].Type == tensor.NVFP4 {
			nNV++
		}
	}
	if nNV == 0 || len(rep.NVFP4) != nNV {
		t.Fatalf("repacked %d NVFP4 weights, the quantized file has %d", len(rep.NVFP4), nNV)
	}
	if ft, _ := conv.GetUint("general.file_type"); ft != ftypeMostlyNVFP4 {
		t.Errorf("general.file_type = %d, want %d", ft, ftypeMostlyNVFP4)
	}
	sameTensors(t, orig, conv, "blk.3.attn_q.input_scale", "blk.0.ssm_out.input_scale")
	for name, want := range map[string]float32{"blk.3.attn_q.input_scale": 0.0625, "blk.0.ssm_out.input_scale": 0.5} {
		ti, ok := conv.Tensor(name)
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if ti.Type != tensor.F32 || !bytes.Equal(conv.TensorData(ti), f32Bytes([]float32{want})) {
			t.Errorf("%s = %s %v, want F32 %v", name, ti.Type, conv.TensorData(ti), want)
		}
	}
	for key, want := range map[string]map[int]float32{kvKScaleKey: opt.kScales, kvVScaleKey: opt.vScales} {
		got, ok := conv.GetFloat32s(key)
		if !ok || len(got) != 9 {
			t.Errorf("%s = %v, want 9 entries", key, got)
			continue
		}
		for i, g := range got {
			w, ok := want[i]
			if !ok {
				w = 1
			}
			if g != w {
				t.Errorf("%s[%d] = %v, want %v", key, i, g, w)
			}
		}
	}
	if rep.KVScales != 5 || len(rep.Dropped) != 0 {
		t.Errorf("report: %d KV scales, dropped %v", rep.KVScales, rep.Dropped)
	}

	// Without the input scales and KV metadata, the models are the same.
	checkSameModel(t, orig, conv)
}

// TestLlamaNVFP4 does the same for stories260K: its q/k projections are
// NVFP4, so HF's RoPE row permutation has to be undone on the codes and the
// block scales (llama.cpp's LlamaModel._repack_nvfp4). The checkpoint
// announces NVFP4 in config.json's quantization_config this time.
func TestLlamaNVFP4(t *testing.T) {
	nvPath := filepath.Join(t.TempDir(), "stories-nvfp4.gguf")
	if _, err := quantize.QuantizeFile(storiesPath, nvPath, quantize.Options{Type: tensor.NVFP4}); err != nil {
		t.Fatal(err)
	}
	orig := openGGUF(t, nvPath)
	h := llamaExport(t, orig, vocabOf(t, orig))
	h.config["quantization_config"] = map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
	dir := t.TempDir()
	h.write(t, dir)
	conv, rep := convertDir(t, dir, Options{})
	if len(rep.NVFP4) == 0 {
		t.Fatalf("no NVFP4 weights repacked")
	}
	sameTensors(t, orig, conv)
	checkSameModel(t, orig, conv)
}

// TestNVFP4PackRow checks the nibble shuffle on one block against the two
// layouts' definitions, value by value.
func TestNVFP4PackRow(t *testing.T) {
	codes := make([]byte, 64) // value i has code i%16
	for i := range codes {
		codes[i] = byte(i % 16)
	}
	modelopt := make([]byte, 32)
	for i := range modelopt {
		modelopt[i] = codes[2*i] | codes[2*i+1]<<4
	}
	scales := []byte{0x38, 0x40, 0xC8, 0x01} // 1.0, 2.0, a sign bit ModelOpt never sets, a subnormal
	dst := make([]byte, 36)
	packNVFP4Row(dst, modelopt, scales)
	if want := []byte{0x38, 0x40, 0x48, 0x01}; !bytes.Equal(dst[:4], want) {
		t.Errorf("scales % x, want % x", dst[:4], want)
	}
	// engine/tensor decodes ggml's layout: value i must be E2M1(code i) * scale.
	vals := make([]float32, 64)
	if err := tensor.DequantizeRow(tensor.NVFP4, vals, dst); err != nil {
		t.Fatal(err)
	}
	for i, got := range vals {
		want := tensor.E2M1ToF32(codes[i]) * tensor.UE4M3ToF32(dst[i/16])
		if got != want {
			t.Errorf("value %d = %v, want %v", i, got, want)
		}
	}
}

// TestBadInputs breaks a valid checkpoint in the ways a user's download
// can be broken: every case is a clear error naming the problem, no panic,
// and OUT is neither created nor touched.
func TestBadInputs(t *testing.T) {
	tmp := t.TempDir()
	orig := openGGUF(t, synthQwen35(t, tmp, "F32"))
	v := vocabOf(t, orig)
	good := func() *hfCheckpoint {
		h := qwen35Export(t, orig, exportOptions{})
		h.tokenizerJSON, h.tokenizerConfig = qwenTokenizerFiles(v, testTemplate)
		return h
	}
	drop := func(h *hfCheckpoint, name string) {
		for i, e := range h.tensors {
			if e.name == name {
				h.tensors = append(h.tensors[:i], h.tensors[i+1:]...)
				return
			}
		}
		t.Fatalf("no tensor %s", name)
	}
	for _, tc := range []struct {
		name  string
		edit  func(h *hfCheckpoint)
		after func(dir string) // edits to the written files
		want  string
	}{
		{name: "missing config key", edit: func(h *hfCheckpoint) { delete(h.config, "hidden_size") }, want: `"hidden_size" missing`},
		{name: "config key of the wrong type", edit: func(h *hfCheckpoint) { h.config["num_hidden_layers"] = "eight" }, want: `"num_hidden_layers"`},
		{name: "unknown architecture", edit: func(h *hfCheckpoint) { h.config["architectures"] = []string{"GPT2LMHeadModel"} }, want: `"GPT2LMHeadModel" is not supported`},
		{name: "wrong shape from config", edit: func(h *hfCheckpoint) { h.config["intermediate_size"] = 128 }, want: "mlp.gate_proj.weight\" in"},
		{name: "missing tensor", edit: func(h *hfCheckpoint) { drop(h, "model.layers.2.linear_attn.A_log") }, want: `"model.layers.2.linear_attn.A_log" missing`},
		{name: "unknown tensor", edit: func(h *hfCheckpoint) {
			h.tensors = append(h.tensors, stEntry{"model.layers.0.mlp.extra.weight", "F32", []int64{2}, make([]byte, 8)})
		}, want: `"model.layers.0.mlp.extra.weight"`},
		{name: "unsupported dtype", edit: func(h *hfCheckpoint) {
			for i := range h.tensors {
				if h.tensors[i].name == "model.norm.weight" {
					h.tensors[i].dtype, h.tensors[i].shape = "I32", []int64{int64(len(h.tensors[i].data) / 4)}
				}
			}
		}, want: "dtype I32"},
		{name: "missing tokenizer", edit: func(h *hfCheckpoint) { h.tokenizerJSON = nil }, want: "no tokenizer.json"},
		{name: "vocab size disagrees", edit: func(h *hfCheckpoint) { h.config["vocab_size"] = v.PAD }, want: "tokens, more than"},
		{name: "other quantization", edit: func(h *hfCheckpoint) {
			h.config["quantization_config"] = map[string]any{"quant_method": "gptq", "bits": 4}
		}, want: `quant_method "gptq"`},
		{name: "NVFP4 weight without its scales", edit: func(h *hfCheckpoint) {
			h.config["quantization_config"] = map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4"}
			for i := range h.tensors {
				if h.tensors[i].name == "model.layers.0.mlp.up_proj.weight" {
					h.tensors[i].dtype, h.tensors[i].shape = "U8", []int64{192, 32}
					h.tensors[i].data = h.tensors[i].data[:192*32]
				}
			}
		}, want: `"model.layers.0.mlp.up_proj.weight_scale" is missing`},
		{name: "truncated shard", after: func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, want: "truncated"},
		{name: "header lies about offsets", after: func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			data, _ := os.ReadFile(p)
			// Grow the first tensor's end offset by 4: the header then
			// claims more bytes than its dtype and shape hold.
			sf, err := parseSafetensors(p, data)
			if err != nil {
				t.Fatal(err)
			}
			first := sf.Tensors[0]
			data = bytes.Replace(data, []byte(fmt.Sprintf(`"data_offsets":[0,%d]`, len(first.Data))), []byte(fmt.Sprintf(`"data_offsets":[0,%d]`, len(first.Data)+4)), 1)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "data_offsets"},
		{name: "header size past the end", after: func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			data, _ := os.ReadFile(p)
			data[7] = 0x7f
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "header size"},
		{name: "index names a tensor its shard lacks", edit: func(h *hfCheckpoint) { h.shards = 2 }, after: func(dir string) {
			p := filepath.Join(dir, "model.safetensors.index.json")
			data, _ := os.ReadFile(p)
			data = bytes.Replace(data, []byte(`"weight_map": {`), []byte(`"weight_map": {"model.layers.9.ghost.weight": "model-00001-of-00002.safetensors", `), 1)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: `"model.layers.9.ghost.weight"`},
		{name: "no config", after: func(dir string) { os.Remove(filepath.Join(dir, "config.json")) }, want: "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := good()
			if tc.edit != nil {
				tc.edit(h)
			}
			dir := t.TempDir()
			h.write(t, dir)
			if tc.after != nil {
				tc.after(dir)
			}
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.gguf")
			fresh := filepath.Join(outDir, "fresh.gguf")
			if err := os.WriteFile(out, []byte("previous model"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{out, fresh} {
				_, err := ConvertFile(dir, path, Options{})
				if err == nil {
					t.Fatalf("converted a broken checkpoint")
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q does not say %q", err, tc.want)
				}
			}
			if b, _ := os.ReadFile(out); string(b) != "previous model" {
				t.Errorf("existing OUT was changed")
			}
			entries, _ := os.ReadDir(outDir)
			if len(entries) != 1 {
				t.Errorf("output folder holds %d files, want only the previous OUT", len(entries))
			}
		})
	}
}

// TestOutTypeAndVocabPadding: a bad --outtype is refused before anything is
// read; a vocabulary shorter than vocab_size is padded as llama.cpp pads it
// ([PAD<id>], type unused); config.json's bos_token_id fills in a BOS the
// tokenizer config lacks; chat_template.jinja is read when
// tokenizer_config.json has no template.
func TestOutTypeAndVocabPadding(t *testing.T) {
	if _, _, _, err := Convert(t.TempDir(), Options{OutType: "q4_0"}); err == nil || !strings.Contains(err.Error(), `"q4_0"`) {
		t.Errorf("outtype q4_0: error %v", err)
	}
	dir := t.TempDir()
	v := tokenizer.ByteLevelVocab()
	tj, tc := qwenTokenizerFiles(v, "")
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), tj)
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), tc)
	delete(tc, "chat_template") // newer checkpoints keep it in chat_template.jinja
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), tc)
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(testTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	hp := hparams{path: "config.json", m: map[string]any{"vocab_size": jsonNumber(len(v.Tokens) + 3), "bos_token_id": jsonNumber(5)}}
	meta, n, err := readVocab(dir, hp, "qwen35")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(v.Tokens)+3 {
		t.Errorf("vocab size %d", n)
	}
	got := map[string]any{}
	for _, m := range meta {
		got[m.key] = m.value
	}
	toks := got["tokenizer.ggml.tokens"].([]string)
	types := got["tokenizer.ggml.token_type"].([]int32)
	last := len(v.Tokens) + 2
	if len(toks) != n || toks[last] != fmt.Sprintf("[PAD%d]", last) || types[last] != tokenizer.TypeUnused {
		t.Errorf("padding: %d tokens, last %q type %d", len(toks), toks[len(toks)-1], types[len(types)-1])
	}
	if got["tokenizer.ggml.bos_token_id"] != uint32(5) {
		t.Errorf("bos from config.json: %v", got["tokenizer.ggml.bos_token_id"])
	}
	if got["tokenizer.chat_template"] != testTemplate {
		t.Errorf("chat template from chat_template.jinja: %v", got["tokenizer.chat_template"])
	}
}

func jsonNumber(n int) json.Number { return json.Number(fmt.Sprint(n)) }

// TestRealQwen3Tokenizer reads the real Qwen3 tokenizer.json and
// tokenizer_config.json (engine/tokenizer's fixtures) with Qwen3's
// config.json vocab_size of 151936: the 151,669 tokens are padded as
// llama.cpp pads them, and the special tokens are the ids Qwen3's released
// config.json gives (eos 151645 <|im_end|>, pad 151643 <|endoftext|>).
func TestRealQwen3Tokenizer(t *testing.T) {
	const fixtures = "../tokenizer/testdata/qwen3/"
	gz, err := os.ReadFile(fixtures + "tokenizer.json.gz")
	if err != nil {
		t.Skip("fixture missing:", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := os.ReadFile(fixtures + "tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tc, 0o644); err != nil {
		t.Fatal(err)
	}
	hp := hparams{path: "config.json", m: map[string]any{"vocab_size": jsonNumber(151936), "bos_token_id": jsonNumber(151643), "eos_token_id": jsonNumber(151645)}}
	meta, n, err := readVocab(dir, hp, "qwen35")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, m := range meta {
		got[m.key] = m.value
	}
	toks := got["tokenizer.ggml.tokens"].([]string)
	if n != 151936 || len(toks) != n || toks[151669] != "[PAD151669]" || toks[151668] != "</think>" {
		t.Errorf("%d tokens; [151668] = %q, [151669] = %q", len(toks), toks[151668], toks[151669])
	}
	for key, want := range map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.eos_token_id": uint32(151645), "tokenizer.ggml.padding_token_id": uint32(151643),
		"tokenizer.ggml.bos_token_id":  uint32(151643), // from config.json: tokenizer_config.json has none
		"tokenizer.ggml.add_bos_token": false,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if m, _ := got["tokenizer.ggml.merges"].([]string); len(m) != 151387 {
		t.Errorf("%d merges, want 151387", len(m))
	}
	if s, _ := got["tokenizer.chat_template"].(string); !strings.Contains(s, "<|im_start|>") {
		t.Errorf("chat template missing or wrong: %.80q", s)
	}
}
