package quantize

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// matrices returns every 2-D weight of the file at path, decoded to F32,
// with NVFP4 weights multiplied by their `<name>.scale`.
func matrices(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if !isMatrix(ti) {
			continue
		}
		v := make([]float32, ti.Elems())
		if err := tensor.DequantizeRow(ti.Type, v, f.TensorData(ti)); err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		if ti.Type == tensor.NVFP4 {
			base := strings.TrimSuffix(ti.Name, ".weight")
			st, ok := f.Tensor(base + ".scale")
			if !ok {
				t.Fatalf("%s has no .scale", ti.Name)
			}
			s := make([]float32, 1)
			if err := tensor.DequantizeRow(st.Type, s, f.TensorData(st)); err != nil {
				t.Fatal(err)
			}
			for k := range v {
				v[k] *= s[0]
			}
		}
		out[ti.Name] = v
	}
	return out
}

// relErr is the relative RMS error of got against want over the matrices
// both have that are NVFP4 in nv (the ones quantize converts).
func relErr(got, want map[string][]float32, names []string) float64 {
	var num, den float64
	for _, n := range names {
		g, w := got[n], want[n]
		for k := range w {
			d := float64(g[k]) - float64(w[k])
			num += d * d
			den += float64(w[k]) * float64(w[k])
		}
	}
	return math.Sqrt(num / den)
}

// TestKQuantSource quantizes a Q4_K_M file made by llama-quantize to NVFP4
// (through llama.cpp's decoding of its blocks) and measures what that adds
// against quantizing the same weights from their F16 source: the relative
// RMS error of each file's quantized matrices against the F16 weights.
// The figures are docs/performance/kquants.md's.
func TestKQuantSource(t *testing.T) {
	dir := t.TempDir()
	f16 := filepath.Join(dir, "f16.gguf")
	if err := synth.Write(f16, synth.Options{Arch: "qwen35", Size: "kquant", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	q4km := "../../testdata/kquant/synth-kquant-Q4_K_M.gguf"
	fromF16, fromQ4 := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	repA, err := QuantizeFile(f16, fromF16, Options{Type: tensor.NVFP4})
	if err != nil {
		t.Fatal(err)
	}
	repB, err := QuantizeFile(q4km, fromQ4, Options{Type: tensor.NVFP4})
	if err != nil {
		t.Fatal(err)
	}
	if len(repA.Quantized) != len(repB.Quantized) {
		t.Fatalf("quantized %d matrices from F16, %d from Q4_K_M (kept: %v)", len(repA.Quantized), len(repB.Quantized), repB.Kept)
	}
	truth, a, b, k := matrices(t, f16), matrices(t, fromF16), matrices(t, fromQ4), matrices(t, q4km)
	names := repA.Quantized
	eA, eB, eK := relErr(a, truth, names), relErr(b, truth, names), relErr(k, truth, names)
	t.Logf("relative RMS error against the F16 weights, %d matrices: NVFP4 from F16 %.4f, Q4_K_M itself %.4f, NVFP4 from Q4_K_M %.4f (%.2fx from F16)",
		len(names), eA, eK, eB, eB/eA)
	if !(eB > eA) || math.IsNaN(eB) || eB > eA+eK {
		t.Errorf("NVFP4 from Q4_K_M: error %.4f, want above NVFP4 from F16 (%.4f) and at most that plus Q4_K_M's own (%.4f)", eB, eA, eK)
	}
}
