package calib

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// greedyMatches decodes each golden prompt greedily with W4A8 activations
// (llama.cpp's CPU arithmetic for NVFP4) and checks every token is
// llama.cpp's.
func greedyMatches(t *testing.T, path, goldenPath string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := tensor.NewPool(1)
	defer pool.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	logits := make([]float32, m.Hyper().Vocab)
	sc := bufio.NewScanner(in)
	n := 0
	for sc.Scan() {
		var g struct {
			PromptTokens []int32 `json:"prompt_tokens"`
			Tokens       []int32 `json:"tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		st := m.NewState(len(g.PromptTokens) + len(g.Tokens) + 1)
		if err := m.Forward(st, model.ChainBatch(g.PromptTokens, 0, false), logits); err != nil {
			t.Fatal(err)
		}
		for i, want := range g.Tokens {
			best := 0
			for j := range logits {
				if logits[j] > logits[best] {
					best = j
				}
			}
			if int32(best) != want {
				t.Fatalf("golden %d token %d: %d, llama.cpp %d", n, i, best, want)
			}
			if err := m.Forward(st, model.ChainBatch([]int32{want}, st.Len(), false), logits); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no goldens")
	}
}

const storiesCalibSHA = "c1ba21794d50d95138b258a37f3024dab44b01a77ab0aedc9ea6633b514f8da8"

// calibTokens tokenizes the {"text": ...} lines of a calibration JSONL the
// way `quantize --calib` does (BOS, no special-token parsing).
func calibTokens(t *testing.T, model, path string) [][]int32 {
	t.Helper()
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := tokenizer.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out [][]int32
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var line struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		out = append(out, tok.Encode(line.Text, true, false))
	}
	return out
}

func f32At(t *testing.T, f *gguf.File, name string) float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	b := f.TensorData(ti)
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// Calibrated NVFP4 stories260K: every NVFP4 weight gets an input scale and
// every layer FP8 KV scales; the file is byte for byte the one llama.cpp
// ran (it loads the input scales and ignores our metadata), and its greedy
// tokens are llama.cpp's. Layer 0's input and V ranges are recomputed here
// independently in float64: layer 0 sees each token's normed embedding,
// whatever its position, and V has no RoPE.
func TestCalibratedStoriesNVFP4(t *testing.T) {
	const in = "../../testdata/models/stories260K.gguf"
	prompts := calibTokens(t, in, "../../testdata/nvfp4/calib-stories.jsonl")
	out := filepath.Join(t.TempDir(), "calib.gguf")
	srcFile, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Run(srcFile, prompts, 1)
	srcFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := quantize.QuantizeFile(in, out, quantize.Options{Type: tensor.NVFP4, Calib: cal})
	if err != nil {
		t.Fatal(err)
	}
	if rep.InputScales != len(rep.Quantized) || rep.KVScales != 5 {
		t.Fatalf("%d input scales for %d NVFP4 weights, KV scales for %d layers (want 5)", rep.InputScales, len(rep.Quantized), rep.KVScales)
	}
	if got := fileSHA(t, out); got != storiesCalibSHA {
		t.Fatalf("calibrated file has sha256 %s, llama.cpp ran %s", got, storiesCalibSHA)
	}
	greedyMatches(t, out, "../../testdata/nvfp4/stories260K-nvfp4-calib-greedy64.jsonl")

	// The independent reference for layer 0.
	src, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	row := func(name string, r, cols int) []float64 {
		ti, _ := src.Tensor(name)
		vals := make([]float32, cols)
		rb := int64(4 * cols)
		if err := tensor.DequantizeRow(ti.Type, vals, src.TensorData(ti)[int64(r)*rb:int64(r+1)*rb]); err != nil {
			t.Fatal(err)
		}
		out := make([]float64, cols)
		for i, v := range vals {
			out[i] = float64(v)
		}
		return out
	}
	emb, _ := src.Tensor("token_embd.weight")
	E := int(emb.Shape[0])
	norm := row("blk.0.attn_norm.weight", 0, E)
	wv, _ := src.Tensor("blk.0.attn_v.weight")
	vRows := int(wv.Shape[1])
	eps, _ := src.GetFloat("llama.attention.layer_norm_rms_epsilon")
	var inAmax, vAmax float64
	for _, p := range prompts {
		for _, tok := range p {
			x := row("token_embd.weight", int(tok), E)
			var ss float64
			for _, v := range x {
				ss += v * v
			}
			s := 1 / math.Sqrt(ss/float64(E)+eps)
			for i := range x {
				x[i] *= s * norm[i]
				inAmax = math.Max(inAmax, math.Abs(x[i]))
			}
			for r := 0; r < vRows; r++ {
				w := row("blk.0.attn_v.weight", r, E)
				var d float64
				for i := range w {
					d += w[i] * x[i]
				}
				vAmax = math.Max(vAmax, math.Abs(d))
			}
		}
	}
	g, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	close := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-5*want {
			t.Errorf("%s = %g, the float64 reference gives %g", what, got, want)
		}
	}
	for _, w := range []string{"attn_q", "attn_k", "attn_v"} {
		close("blk.0."+w+".input_scale", float64(f32At(t, g, "blk.0."+w+".input_scale")), inAmax/(6*448))
	}
	vs, ok := g.GetFloat32s("edgellmd.kv_cache.v_scale")
	if !ok || len(vs) != 5 {
		t.Fatalf("edgellmd.kv_cache.v_scale = %v", vs)
	}
	close("v_scale[0]", float64(vs[0]), vAmax/448)
	if ks, _ := g.GetFloat32s("edgellmd.kv_cache.k_scale"); len(ks) != 5 || ks[0] <= 0 || ks[0] == 1 {
		t.Errorf("edgellmd.kv_cache.k_scale = %v", ks)
	}
	for _, name := range rep.Quantized {
		if base := strings.TrimSuffix(name, ".weight"); f32At(t, g, base+".input_scale") <= 0 {
			t.Errorf("%s.input_scale is not positive", base)
		}
	}
}
