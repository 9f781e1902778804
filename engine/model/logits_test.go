package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// storiesLogitTokens is the sequence whose logits llama.cpp recorded: the
// first golden prompt, its greedy continuation, and a few more tokens.
var storiesLogitTokens = []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
	338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261,
	370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333,
	415, 426, 13, 438, 310, 439, 419, 357, 336, 12, 40, 50}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// runLogits feeds toks the way testdata/tools/logits.mjs does and returns
// the logits rows from first on.
func runLogits(t *testing.T, m Model, toks []int32, mode string, first int) []float32 {
	t.Helper()
	V := m.Hyper().Vocab
	st := m.NewState(len(toks))
	var rows []float32
	if mode == "batch" {
		rows = make([]float32, len(toks)*V)
		if err := m.Forward(st, ChainBatch(toks, 0, true), rows); err != nil {
			t.Fatal(err)
		}
	} else {
		h := len(toks) / 2
		lg := make([]float32, V)
		if err := m.Forward(st, ChainBatch(toks[:h], 0, false), lg); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, lg...)
		for i := h; i < len(toks); i++ {
			if err := m.Forward(st, ChainBatch(toks[i:i+1], i, false), lg); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, lg...)
		}
	}
	return rows[first*V:]
}

// qwen35LogitTokens is the sequence for the qwen35 logits: golden prompts
// and continuations of testdata/qwen35 strung together.
var qwen35LogitTokens = []int32{72, 101, 108, 108, 111, 44, 271, 269, 108, 100, 33, 104, 236, 24, 105, 197, 93,
	236, 105, 84, 259, 32, 113, 117, 105, 99, 107, 32, 98, 114, 111, 119, 110, 32, 102, 111, 120, 32, 106, 117, 109,
	112, 115, 278, 118, 261, 258, 32, 108, 97, 122, 121, 32, 100, 111, 103, 46, 49, 170, 197, 236, 128, 81, 34, 124,
	79, 110, 99, 101, 32, 117, 112}

// qwen35TinySHA256 is the sha256 of the synthetic model the qwen35 logits
// were recorded on: synth.Build tiny, seed 9, with MTP.
const qwen35TinySHA256 = "cdae40bb48d3247892be6d8bb5f1f554d2e31d30c5fee2ea8ff2d585438176f5"

// openTinyQwen35 regenerates that model in memory.
func openTinyQwen35(t *testing.T, kv tensor.DType) Model {
	t.Helper()
	w, err := synth.Build(synth.Options{Size: "tiny", Seed: 9, MTP: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(buf.Bytes()); hex.EncodeToString(sum[:]) != qwen35TinySHA256 {
		t.Fatalf("synth.Build's tiny seed-9 model changed (sha256 %x, the logits were recorded on %s): regenerate testdata/qwen35-tiny-mtp-logits-*.f32 as testdata/README.md says", sum, qwen35TinySHA256)
	}
	f, err := gguf.Parse("qwen35-tiny-mtp.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f, Options{KVType: kv, Pool: testPool(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLogitsMatchLlamaCpp compares raw logits with llama.cpp's: bit for
// bit with Options.SgemmF32 (F32 products of several rows in tinyBLAS's
// order, as llama.cpp runs them), and within a tolerance without it (the
// default: every F32 row in ggml_vec_dot_f32's order whatever the batch; an
// F16 KV cache turns last-bit differences into F16 steps).
func TestLogitsMatchLlamaCpp(t *testing.T) {
	stories := func(t *testing.T, kv tensor.DType) Model { return openModel(t, storiesPath, kv, testPool(t)) }
	cases := []struct {
		name, file string
		open       func(*testing.T, tensor.DType) Model
		toks       []int32
		kv         tensor.DType
		mode       string
		first      int
		tolerance  float64 // with engine/tensor's kernels
	}{
		{"stories/step-f16kv", "stories260K-logits-step-f16kv.f32", stories, storiesLogitTokens, tensor.F16, "step", 0, 3e-2},
		{"stories/step-f32kv-noflash", "stories260K-logits-step-f32kv-nofa.f32", stories, storiesLogitTokens, tensor.F32, "step", 0, 1e-4},
		{"stories/batch-f16kv-tiled", "stories260K-logits-batch-f16kv.f32", stories, storiesLogitTokens, tensor.F16, "batch", 64, 3e-2},
		{"qwen35/step-f16kv", "qwen35-tiny-mtp-logits-step-f16kv.f32", openTinyQwen35, qwen35LogitTokens, tensor.F16, "step", 0, 3e-2},
		{"qwen35/step-f32kv-noflash", "qwen35-tiny-mtp-logits-step-f32kv-nofa.f32", openTinyQwen35, qwen35LogitTokens, tensor.F32, "step", 0, 1e-3},
		{"qwen35/batch-f16kv-tiled", "qwen35-tiny-mtp-logits-batch-f16kv.f32", openTinyQwen35, qwen35LogitTokens, tensor.F16, "batch", 64, 3e-2},
	}
	for _, tc := range cases {
		want := readF32(t, "testdata/"+tc.file)
		for _, exact := range []bool{true, false} {
			name := tc.name + "/vec-dot-f32"
			if exact {
				name = tc.name + "/sgemm-f32"
			}
			t.Run(name, func(t *testing.T) {
				m := tc.open(t, tc.kv)
				if exact {
					m.(*decoder).sgemmF32 = true
				}
				got := runLogits(t, m, tc.toks, tc.mode, tc.first)
				if len(got) != len(want) {
					t.Fatalf("%d logits, llama.cpp has %d", len(got), len(want))
				}
				equal, worst := 0, 0.0
				for i := range got {
					if got[i] == want[i] {
						equal++
					}
					worst = math.Max(worst, math.Abs(float64(got[i])-float64(want[i])))
				}
				t.Logf("%d of %d logits bit-equal, largest difference %.3g", equal, len(got), worst)
				if exact && equal != len(got) {
					t.Errorf("with SgemmF32 only %d of %d logits equal llama.cpp's (largest difference %.3g)", equal, len(got), worst)
				}
				if !exact && worst > tc.tolerance {
					t.Errorf("largest logit difference %.3g exceeds %.3g", worst, tc.tolerance)
				}
			})
		}
	}
}
