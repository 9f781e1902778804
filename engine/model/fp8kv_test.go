package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// fp8Spec is the synthetic qwen35 model with FP8 KV scales in its metadata:
// blocks 3 and 7 are attention, 8 the MTP block. Keys after k_norm are
// O(1), so these scales put them around code values 10-300, where the
// scale decides which codes are used (scale 1 would leave most of them in
// the coarse low range).
func fp8Spec() (synthSpec, []float32, []float32) {
	k := []float32{1, 1, 1, 0.0125, 1, 1, 1, 0.02, 0.015}
	v := []float32{1, 1, 1, 0.004, 1, 1, 1, 0.006, 0.005}
	s := defaultSpec()
	s.extraKV = map[string]any{kvKScaleKey: k, kvVScaleKey: v}
	return s, k, v
}

// TestFP8KVMatchesReference holds the FP8 cache against the float64
// reference that stores the same E4M3 values (x/scale rounded to E4M3,
// times scale): what remains is F32 arithmetic, so the bound is the F32
// path's (2e-5), loosened to 1e-4 for the rare key or value whose float32
// and float64 forms round to neighbouring codes. The reference with
// unrounded K and V must differ by far more, or the test would not see
// the FP8 rounding (or the scales) at all.
func TestFP8KVMatchesReference(t *testing.T) {
	spec, ks, vs := fp8Spec()
	sm := buildSynth(t, spec, 1)
	m := sm.load(t, tensor.E4M3)
	V := m.Hyper().Vocab
	rng := rand.New(rand.NewPCG(2, 3))
	for _, tc := range []struct {
		name            string
		prefill, decode int
	}{
		{"decode", 1, 12},
		{"prefill", 9, 4},
		{"long-prefill", 70, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, exact := newRef(sm), newRef(sm)
			ref.fp8, ref.kScale, ref.vScale = true, ks, vs
			toks := randTokens(rng, tc.prefill+tc.decode, V)
			st := m.NewState(len(toks))
			got := make([]float32, tc.prefill*V)
			if err := m.Forward(st, ChainBatch(toks[:tc.prefill], 0, true), got); err != nil {
				t.Fatal(err)
			}
			for i := tc.prefill; i < len(toks); i++ {
				row := make([]float32, V)
				if err := m.Forward(st, ChainBatch(toks[i:i+1], i, false), row); err != nil {
					t.Fatal(err)
				}
				got = append(got, row...)
			}
			var worstExact float64
			for i, tok := range toks {
				want, _ := ref.forward(int(tok), i)
				unrounded, _ := exact.forward(int(tok), i)
				if d := relDiff(got[i*V:(i+1)*V], want); d > 1e-4 || math.IsNaN(d) {
					t.Errorf("token %d: FP8-KV logits differ from the FP8 reference by %.3g (relative)", i, d)
				}
				if i > 0 { // token 0 attends to itself only: softmax weight 1
					worstExact = max(worstExact, relDiff(got[i*V:(i+1)*V], unrounded))
				}
			}
			if worstExact < 1e-3 {
				t.Errorf("FP8-KV logits are within %.3g of the unrounded reference: the test cannot see FP8 rounding", worstExact)
			}
		})
	}
}

// TestFP8KVScales: the scales come from the metadata arrays, default to 1,
// and a bad value is an error naming the key.
func TestFP8KVScales(t *testing.T) {
	spec, ks, vs := fp8Spec()
	m := buildSynth(t, spec, 1).load(t, tensor.E4M3).(*decoder)
	for _, li := range []int{3, 7} {
		a := m.layers[li].attn
		if a.kScale != ks[li] || a.vScale != vs[li] {
			t.Errorf("block %d: scales %g, %g, want %g, %g", li, a.kScale, a.vScale, ks[li], vs[li])
		}
	}
	if a := m.mtp.layers[0].attn; a.kScale != ks[8] || a.vScale != vs[8] {
		t.Errorf("MTP block: scales %g, %g, want %g, %g", a.kScale, a.vScale, ks[8], vs[8])
	}
	plain := buildSynth(t, defaultSpec(), 1).load(t, tensor.E4M3).(*decoder)
	if a := plain.layers[3].attn; a.kScale != 1 || a.vScale != 1 {
		t.Errorf("no scales in the file: got %g, %g, want 1, 1", a.kScale, a.vScale)
	}
	for _, c := range []struct {
		name string
		kv   map[string]any
		want string
	}{
		{"zero", map[string]any{kvKScaleKey: []float32{1, 1, 1, 0}}, kvKScaleKey + `"[3]`},
		{"negative", map[string]any{kvVScaleKey: []float32{1, 1, 1, 1, 1, 1, 1, -2}}, kvVScaleKey + `"[7]`},
		{"NaN", map[string]any{kvKScaleKey: []float32{1, 1, 1, float32(math.NaN())}}, "not a positive finite number"},
		{"not floats", map[string]any{kvKScaleKey: "0.5"}, "not an array of FLOAT32"},
	} {
		s := defaultSpec()
		s.extraKV = c.kv
		_, err := Load(buildSynth(t, s, 1).file, Options{KVType: tensor.E4M3, Pool: testPool(t)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load error %v, want %q", c.name, err, c.want)
		}
	}
}

// teacherForced runs each golden prompt and its llama.cpp continuation as
// one chain and returns the logits of every continuation position.
func teacherForced(t *testing.T, m Model, golden []goldenLine) [][]float32 {
	t.Helper()
	V := m.Hyper().Vocab
	var out [][]float32
	for _, g := range golden {
		seq := append(append([]int32{}, g.PromptTokens...), g.Tokens...)
		st := m.NewState(len(seq))
		lg := make([]float32, len(seq)*V)
		if err := m.Forward(st, ChainBatch(seq, 0, true), lg); err != nil {
			t.Fatal(err)
		}
		for i := len(g.PromptTokens) - 1; i < len(seq)-1; i++ {
			out = append(out, lg[i*V:(i+1)*V])
		}
	}
	return out
}

// TestFP8KVStories compares the FP8 cache with the F16 one on stories260K's
// ten golden prompts: greedy agreement (reported; a greedy run that
// diverges once follows another text, so only the prefix before the first
// divergence is a measure of the cache) and, teacher-forced on llama.cpp's
// continuations, top-1 agreement and the logit error.
//
// The logit bound: the F16 cache differs from the F32 one by F16's
// rounding of K and V (relative 2^-11) plus F16 Q and accumulator; E4M3
// rounds with relative error up to 2^-4, 2^7 times F16's. To first order
// the logit error scales with that rounding error, so the FP8 error must
// stay within 2^7 times the F16-vs-F32 error, times 4 for the
// distribution of the rounding errors (E4M3's relative error is spread
// over a whole binade where F16's is not, and the low-magnitude keys fall
// in E4M3's subnormal range). A broken cache (wrong scale, wrong row)
// misses by orders of magnitude.
func TestFP8KVStories(t *testing.T) {
	pool := testPool(t)
	m8 := openModel(t, storiesPath, tensor.E4M3, pool)
	m16 := openModel(t, storiesPath, tensor.F16, pool)
	m32 := openModel(t, storiesPath, tensor.F32, pool)
	golden := readGolden(t, "../../testdata/golden/stories260K-greedy64.jsonl")

	var same, total, prefix, prefixTotal int
	for _, g := range golden {
		n := len(g.Tokens)
		a := greedy(t, m8, m8.NewState(len(g.PromptTokens)+n+1), g.PromptTokens, n)
		b := greedy(t, m16, m16.NewState(len(g.PromptTokens)+n+1), g.PromptTokens, n)
		diverged := false
		for i := range a {
			if a[i] == b[i] {
				same++
				if !diverged {
					prefix++
				}
			} else {
				diverged = true
			}
		}
		total += n
		prefixTotal += n
	}
	t.Logf("greedy FP8 vs F16 KV: %d/%d positions agree (%.1f%%); %d/%d (%.1f%%) before each prompt's first divergence",
		same, total, 100*float64(same)/float64(total), prefix, prefixTotal, 100*float64(prefix)/float64(prefixTotal))

	l8, l16, l32 := teacherForced(t, m8, golden), teacherForced(t, m16, golden), teacherForced(t, m32, golden)
	var top1 int
	var e8, e16, spread float64
	for i := range l8 {
		if argmax(l8[i]) == argmax(l16[i]) {
			top1++
		}
		for j := range l8[i] {
			d8 := float64(l8[i][j] - l16[i][j])
			d16 := float64(l16[i][j] - l32[i][j])
			e8 += d8 * d8
			e16 += d16 * d16
			spread += float64(l16[i][j]) * float64(l16[i][j])
		}
	}
	rms8, rms16 := math.Sqrt(e8/spread), math.Sqrt(e16/spread)
	t.Logf("teacher-forced over %d positions: top-1 FP8 vs F16 %.1f%%; logit error relative to the logits' norm: FP8-F16 %.3g, F16-F32 %.3g (ratio %.0f)",
		len(l8), 100*float64(top1)/float64(len(l8)), rms8, rms16, rms8/rms16)
	if rms8 > 4*128*rms16 {
		t.Errorf("FP8 logit error %.3g exceeds 4*2^7 times the F16 one (%.3g)", rms8, rms16)
	}
	if rms8 == 0 {
		t.Error("FP8 and F16 logits are identical: the FP8 cache is not in use")
	}
	if float64(top1) < 0.9*float64(len(l8)) {
		t.Errorf("teacher-forced top-1 agreement %d/%d is below 90%%", top1, len(l8))
	}
}
