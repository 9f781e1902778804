package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Parity with llama.cpp on the qwen35 architecture: the synthetic models of
// testdata/qwen35 (at the repository root) are regenerated with
// synth.Build, checked against the sha256 llama.cpp ran, and decoded
// greedily; every token must equal llama.cpp's golden continuation, for an
// F16 KV cache (llama.cpp's default, flash attention on) and an F32 one
// (flash attention off). See testdata/qwen35/README.md for how the goldens
// and the per-position logit margins were made.

const parityDir = "../../testdata/qwen35"

type parityModel struct {
	Name    string `json:"name"`
	Options struct {
		Arch string `json:"arch"`
		Size string `json:"size"`
		Type string `json:"type"`
		MTP  bool   `json:"mtp"`
		Seed uint64 `json:"seed"`
	} `json:"options"`
	Tokenizer string            `json:"tokenizer"` // relative to the repository root; "" = built-in
	SHA256    string            `json:"sha256"`
	Bytes     int64             `json:"bytes"`
	Goldens   map[string]string `json:"goldens"` // KV cache type ("f16kv", "f32kv") -> golden file
	Margins   map[string]string `json:"margins"` // same keys -> llama.cpp's top-1 minus top-2 logit margins
}

// parityGolden is one line of a golden file made by golden.mjs.
type parityGolden struct {
	Prompt       string  `json:"prompt"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
}

func parityJSONL(t *testing.T, path string, each func(line []byte) error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if err := each(line); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

func parityGoldens(t *testing.T, path string) []parityGolden {
	t.Helper()
	var out []parityGolden
	parityJSONL(t, path, func(line []byte) error {
		var g parityGolden
		err := json.Unmarshal(line, &g)
		out = append(out, g)
		return err
	})
	if len(out) == 0 {
		t.Fatalf("%s: no goldens", path)
	}
	return out
}

// parityMargins reads a margins file: one {"prompt", "margins"} line per
// golden line, then a summary line (skipped).
func parityMargins(t *testing.T, path string) [][]float64 {
	t.Helper()
	var out [][]float64
	parityJSONL(t, path, func(line []byte) error {
		var m struct {
			Prompt  *string   `json:"prompt"`
			Margins []float64 `json:"margins"`
		}
		err := json.Unmarshal(line, &m)
		if m.Prompt != nil {
			out = append(out, m.Margins)
		}
		return err
	})
	return out
}

// paritySynth regenerates a golden model in memory and checks its bytes.
func paritySynth(t *testing.T, pm parityModel) *gguf.File {
	t.Helper()
	opt := synth.Options{Arch: pm.Options.Arch, Size: pm.Options.Size, Type: pm.Options.Type,
		MTP: pm.Options.MTP, Seed: pm.Options.Seed}
	if pm.Tokenizer != "" {
		opt.TokenizerJSON = filepath.Join("..", "..", filepath.FromSlash(pm.Tokenizer))
	}
	w, err := synth.Build(opt)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != pm.SHA256 || int64(buf.Len()) != pm.Bytes {
		t.Fatalf("regenerated %s is sha256 %s (%d bytes), but llama.cpp ran %s (%d bytes): the goldens do not apply",
			pm.Name, got, buf.Len(), pm.SHA256, pm.Bytes)
	}
	f, err := gguf.Parse("synth "+pm.Name, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// parityGreedy prefills prompt as chains of at most chunk tokens (0: one
// chain) and then decodes n tokens one at a time, taking the argmax. It also
// returns the top-1 minus top-2 logit margin at each step.
func parityGreedy(t *testing.T, m Model, prompt []int32, n, chunk int) (tokens []int32, margins []float64) {
	t.Helper()
	st := m.NewState(len(prompt) + n + 1)
	logits := make([]float32, m.Hyper().Vocab)
	if chunk <= 0 {
		chunk = len(prompt)
	}
	for i := 0; i < len(prompt); i += chunk {
		end := min(i+chunk, len(prompt))
		if err := m.Forward(st, ChainBatch(prompt[i:end], st.Len(), false), logits); err != nil {
			t.Fatal(err)
		}
	}
	b := ChainBatch([]int32{0}, 0, false)
	for len(tokens) < n {
		best, second := 0, -1
		for i, v := range logits {
			if v > logits[best] {
				best, second = i, best
			} else if i != best && (second < 0 || v > logits[second]) {
				second = i
			}
		}
		tokens = append(tokens, int32(best))
		margins = append(margins, float64(logits[best]-logits[second]))
		b.Tokens[0], b.Pos[0] = int32(best), int32(st.Len())
		if err := m.Forward(st, b, logits); err != nil {
			t.Fatal(err)
		}
	}
	return tokens, margins
}

func TestQwen35LlamaCppParity(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(parityDir, "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Models []parityModel `json:"models"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("models.json: %v", err)
	}
	pool := tensor.NewPool(2)
	defer pool.Close()
	for _, pm := range list.Models {
		t.Run(pm.Name, func(t *testing.T) {
			f := paritySynth(t, pm)
			for _, kv := range []struct {
				name string
				typ  tensor.DType
			}{{"f16kv", tensor.F16}, {"f32kv", tensor.F32}} {
				file, ok := pm.Goldens[kv.name]
				if !ok {
					continue
				}
				t.Run(kv.name, func(t *testing.T) {
					m, err := Load(f, Options{KVType: kv.typ, Pool: pool})
					if err != nil {
						t.Fatal(err)
					}
					goldens := parityGoldens(t, filepath.Join(parityDir, file))
					margins := parityMargins(t, filepath.Join(parityDir, pm.Margins[kv.name]))
					minMargin, maxDiff := math.Inf(1), 0.0
					for gi, g := range goldens {
						// One prefill chain as llama.cpp's golden run did; with the
						// F32 cache also the prompt in chains of 5, which must not
						// change a thing.
						chunks := []int{0}
						if kv.typ == tensor.F32 {
							chunks = append(chunks, 5)
						}
						for _, chunk := range chunks {
							got, ours := parityGreedy(t, m, g.PromptTokens, len(g.Tokens), chunk)
							for i, mg := range ours {
								minMargin = math.Min(minMargin, mg)
								if gi < len(margins) && i < len(margins[gi]) && got[i] == g.Tokens[i] {
									maxDiff = math.Max(maxDiff, math.Abs(mg-margins[gi][i]))
								}
							}
							for i := range g.Tokens {
								if got[i] != g.Tokens[i] {
									margin := -1.0
									if gi < len(margins) && i < len(margins[gi]) {
										margin = margins[gi][i]
									}
									t.Errorf("%q (prefill chunk %d): token %d is %d, llama.cpp has %d (its top-1 minus top-2 logit margin there: %.4f)\n got  %v\n want %v",
										g.Prompt, chunk, i, got[i], g.Tokens[i], margin, got, g.Tokens)
									break
								}
							}
						}
					}
					t.Logf("smallest top-1 minus top-2 logit margin here %.4f; largest difference from llama.cpp's margin at a position %.5f",
						minMargin, maxDiff)
				})
			}
		})
	}
}
