package gpu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// Greedy agreement with the CPU engine on files and prompts no other test
// uses, on the matrix path the engine picks (the tensor cores where the
// device has them, with the engine's own thresholds: products of
// mmCoopMinVectors rows or more and attention calls of attCoopMinTokens
// tokens or more, so every prompt is at least that long and its prefill
// runs there; decode steps stay on the scalar shaders, as in use).
//
// The files and prompts come from a seed, EDGELLMD_AGREE_SEED (agreeSeed
// by default, what CI runs), and EDGELLMD_AGREE_PROMPTS prompts per file
// (1 by default): a person reruns it with a fresh seed and more prompts
// for the figure in docs/performance/gpu.md, e.g. on Mesa 26 lavapipe
//
//	go test -c -o bin/gpu.test ./engine/gpu
//	cd engine/gpu && EDGELLMD_REQUIRE_GPU=1 EDGELLMD_REQUIRE_COOPMAT=1 EDGELLMD_AGREE_SEED=2026 EDGELLMD_AGREE_PROMPTS=6 \
//	    ../../bin/mesa26-root/run ../../bin/gpu.test -test.run 'TestModelAgreement$' -test.v -test.timeout 60m
//
// EDGELLMD_AGREE_ATTENTION=scalar keeps attention off the tensor cores
// (the products stay there); f16 keeps attention_cm but rounds its query
// rows and weights to F16 once instead of splitting them into high and low
// parts, splitq and splitp split only one of them: what each rounding
// costs.

// agreeSeed is the seed CI runs; the synthetic model tests use 1, 9 and 10.
const agreeSeed = 31

// agreeTokens is how many tokens each prompt is continued by.
const agreeTokens = 32

// agreeMinTokens is the fewest tokens compared over which the share of
// identical ones is held to issue 31's 97%: CI's 224 are too few to judge
// a rate (one prompt of the W4A4 file, whose FP4 activations turn any
// difference into flipped values, has held 6 near-ties of its 32 tokens
// on Mesa 22.3 and the other five none), EDGELLMD_AGREE_PROMPTS=5
// compares 1,120. Every divergence is held to the near-tie rule whatever
// the count.
const agreeMinTokens = 1000

// agreeCounts sums one file's (or a whole run's) comparison.
type agreeCounts struct {
	prompts, tokens int
	same            int     // positions where the GPU's top token is the CPU's
	beforeFirst     int     // tokens identical before each prompt's first divergence
	ties            int     // divergences at a near-tie (nearTie)
	worstTie        float64 // the largest CPU margin at a divergence, as a share of its near-tie bound
	worstLogit      float64 // the largest |GPU-CPU| logit over the largest |logit|, at any position
	coop, scalar    int64
	prefillCoop     int64 // the prompts' passes' multiply-adds by path
	prefillScalar   int64
}

func (a *agreeCounts) add(b agreeCounts) {
	a.prompts += b.prompts
	a.tokens += b.tokens
	a.same += b.same
	a.beforeFirst += b.beforeFirst
	a.ties += b.ties
	a.worstTie = max(a.worstTie, b.worstTie)
	a.worstLogit = max(a.worstLogit, b.worstLogit)
	a.coop += b.coop
	a.scalar += b.scalar
	a.prefillCoop += b.prefillCoop
	a.prefillScalar += b.prefillScalar
}

func (a agreeCounts) String() string {
	share := func(c, s int64) float64 {
		if c+s == 0 {
			return 0
		}
		return float64(c) / float64(c+s)
	}
	return fmt.Sprintf("%d prompts, %d tokens: %d identical (%.2f%%), %d identical before the first divergence (%.2f%%), %d divergences (the largest CPU margin at one %.2g of its near-tie bound), all near-ties unless reported; largest |GPU-CPU| logit %.2g of the largest; tensor-core share of the multiply-adds %.3f in the prompts' passes, %.3f in all",
		a.prompts, a.tokens, a.same, 100*float64(a.same)/float64(max(a.tokens, 1)), a.beforeFirst, 100*float64(a.beforeFirst)/float64(max(a.tokens, 1)),
		a.tokens-a.same, a.worstTie, a.worstLogit, share(a.prefillCoop, a.prefillScalar), share(a.coop, a.scalar))
}

// greedyAgreement continues each prompt by n greedy tokens on the CPU
// engine, and runs the GPU over the same positions, fed the CPU's tokens
// (so that one divergence does not hide the positions after it): at each
// position the largest |GPU-CPU| logit must be within tol of the largest
// |logit|, and where the GPU's top token is not the CPU's, the CPU's own
// top-1/top-2 margin must be a near-tie for tol (nearTie,
// TestModelKQuantFiles' rule); anywhere else it is an error. walk says
// tol is a block-quantization one, taken per prompt at its chain's
// length (tolChain).
func greedyAgreement(t *testing.T, name string, cpu, gm model.Model, prompts [][]int32, n int, tol float64, walk bool) agreeCounts {
	t.Helper()
	d := testDevice(t)
	V := cpu.Hyper().Vocab
	var c agreeCounts
	for pi, p := range prompts {
		c.prompts++
		tol := tol
		if walk {
			tol = tolChain(tol, len(p)+n)
		}
		want := make([]int32, n)
		cpuLogits := make([][]float32, n)
		st := cpu.NewState(len(p) + n + 1)
		lg := make([]float32, V)
		if err := cpu.Forward(st, model.ChainBatch(p, 0, false), lg); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			cpuLogits[i] = append([]float32(nil), lg...)
			want[i] = argmax(lg)
			if i < n-1 {
				if err := cpu.Forward(st, model.ChainBatch([]int32{want[i]}, st.Len(), false), lg); err != nil {
					t.Fatal(err)
				}
			}
		}
		gs := gm.NewState(len(p) + n + 1)
		m0 := d.MatMulMACs()
		if err := gm.Forward(gs, model.ChainBatch(p, 0, false), lg); err != nil {
			t.Fatal(err)
		}
		m1 := d.MatMulMACs()
		c.prefillCoop += m1.CoopMat - m0.CoopMat
		c.prefillScalar += m1.Scalar - m0.Scalar
		diverged := false
		for i := range n {
			c.tokens++
			if d, s := maxAbsDiff(lg, cpuLogits[i]); s > 0 {
				c.worstLogit = max(c.worstLogit, d/s)
				if !(d <= tol*s) {
					t.Errorf("%s prompt %d (%d tokens) token %d: largest |GPU-CPU| logit %.3g of the largest, over the tolerance %.3g", name, pi, len(p), i, d/s, tol)
				}
			}
			if got := argmax(lg); got == want[i] {
				c.same++
				if !diverged {
					c.beforeFirst++
				}
			} else {
				diverged = true
				margin, bound, tie := nearTie(cpuLogits[i], tol)
				if !tie {
					t.Errorf("%s prompt %d (%d tokens) token %d: GPU %d, CPU %d by a CPU margin of %.3g (near-tie bound %.3g)", name, pi, len(p), i, got, want[i], margin, bound)
				} else {
					c.ties++
					c.worstTie = max(c.worstTie, margin/bound)
					t.Logf("%s prompt %d (%d tokens) token %d: a near-tie (CPU margin %.3g, bound %.3g): GPU %d, CPU %d", name, pi, len(p), i, margin, bound, got, want[i])
				}
			}
			if i < n-1 {
				if err := gm.Forward(gs, model.ChainBatch([]int32{want[i]}, gs.Len(), false), lg); err != nil {
					t.Fatal(err)
				}
			}
		}
		m2 := d.MatMulMACs()
		c.coop += m2.CoopMat - m0.CoopMat
		c.scalar += m2.Scalar - m0.Scalar
	}
	return c
}

// agreeDevice puts the test device on its cooperative-matrix path with the
// engine's own thresholds where it has one (a failure without one under
// EDGELLMD_REQUIRE_COOPMAT=1), and leaves it on the scalar path elsewhere
// (Mesa 22.3: the same check of the scalar shaders).
func agreeDevice(t *testing.T) (d *Device, coop, attScalar bool) {
	t.Helper()
	d = testDevice(t)
	if !d.Info().CoopMat {
		if requireCoopMat() {
			t.Fatalf("EDGELLMD_REQUIRE_COOPMAT=1 and %s has no cooperative matrices", d.Info().Name)
		}
		return d, false, false
	}
	t.Cleanup(func() {
		if err := d.SetMatMul(MatMulAuto); err != nil {
			t.Error(err)
		}
	})
	if err := d.SetMatMul(MatMulCoopMat); err != nil {
		t.Fatal(err)
	}
	if d.coopMin != mmCoopMinVectors || d.attCoopMin != attCoopMinTokens {
		t.Fatalf("the device's thresholds are %d and %d, not the engine's %d and %d", d.coopMin, d.attCoopMin, mmCoopMinVectors, attCoopMinTokens)
	}
	switch a := os.Getenv("EDGELLMD_AGREE_ATTENTION"); a {
	case "":
	case "scalar":
		// The products on the tensor cores, attention on attention.comp
		// (F32): what attention_cm's F16 roundings cost in agreement.
		d.attCoopMin = 0
		t.Cleanup(func() { d.attCoopMin = attCoopMinTokens })
		t.Logf("EDGELLMD_AGREE_ATTENTION=scalar: attention off the tensor cores")
		attScalar = true
	case "f16", "splitq", "splitp":
		// attention_cm with the query rows and weights rounded to F16
		// once (f16) or only one of them split: what each rounding costs
		d.attSplit = map[string]uint32{"f16": 0, "splitq": attSplitQ, "splitp": attSplitP}[a]
		t.Cleanup(func() { d.attSplit = attSplitAll })
		t.Logf("EDGELLMD_AGREE_ATTENTION=%s: attention_cm's SPLIT %d", a, d.attSplit)
	default:
		t.Fatalf("EDGELLMD_AGREE_ATTENTION=%q: want scalar, f16, splitq, splitp or nothing", a)
	}
	return d, true, attScalar
}

// agreeEnv reads EDGELLMD_AGREE_SEED and EDGELLMD_AGREE_PROMPTS.
func agreeEnv(t *testing.T) (seed uint64, prompts int) {
	seed, prompts = agreeSeed, 1
	if s := os.Getenv("EDGELLMD_AGREE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EDGELLMD_AGREE_SEED=%q: want an unsigned integer", s)
		}
		seed = v
	}
	if s := os.Getenv("EDGELLMD_AGREE_PROMPTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("EDGELLMD_AGREE_PROMPTS=%q: want a count of prompts", s)
		}
		prompts = v
	}
	return seed, prompts
}

// agreePromptLen is a prompt length from the prefill's tensor-core
// threshold up to twice it.
func agreePromptLen(rng *rand.Rand) int {
	lo := max(mmCoopMinVectors, attCoopMinTokens)
	return lo + rng.IntN(lo+1)
}

// TestModelAgreement: see the top of this file. Synthetic qwen35 files
// (tiny) of the seed in F16, Q8_0 and NVFP4 (edgellmd quantize's) with
// W4A8 and W4A4, F16 and E4M3 caches, each with the tolerance
// TestModelQwen35Synth and TestModelCoopMat derive for it, on random
// token prompts; stories260K on new English prompts; qwen35-agent on
// windows of the MLPerf agentic trace's held-out conversations that end
// where the assistant answers (never chat_prompts.jsonl's), both with
// kqModelTol's count for their own attention layers (F32 or F16 weights:
// no activations quantized).
func TestModelAgreement(t *testing.T) {
	_, coop, attScalar := agreeDevice(t)
	seed, nPrompts := agreeEnv(t)
	t.Logf("seed %d, %d prompts per file, %d tokens each, cooperative matrices %v", seed, nPrompts, agreeTokens, coop)
	dir := t.TempDir()
	var total agreeCounts
	// check runs one file; coopWeights says its products have tile shaders
	// (stories260K's F32 ones do not: only its attention runs there).
	check := func(name string, cpu, gm model.Model, prompts [][]int32, tol float64, walk, coopWeights bool) {
		c := greedyAgreement(t, name, cpu, gm, prompts, agreeTokens, tol, walk)
		if walk {
			t.Logf("%s (tolerance %.3g up to %d positions, by tolChain past them): %v", name, tol, tolChainPositions, c)
		} else {
			t.Logf("%s (tolerance %.3g): %v", name, tol, c)
		}
		if coop && (coopWeights || !attScalar) && c.prefillCoop == 0 {
			t.Errorf("%s: nothing of the prompts' passes ran on cooperative matrices", name)
		}
		total.add(c)
	}

	// Synthetic qwen35 files of the seed.
	rng := rand.New(rand.NewPCG(seed, 31))
	synthPath := func(typ string) string {
		p := filepath.Join(dir, typ+".gguf")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if err := synth.Write(p, synth.Options{Size: "tiny", Type: typ, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nvfp4 := filepath.Join(dir, "nvfp4.gguf")
	if _, err := quantize.QuantizeFile(synthPath("F32"), nvfp4, quantize.Options{Type: tensor.NVFP4}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		kv         tensor.DType
		act        tensor.NVFP4Activations
		tol        float64
		walk       bool // a block-quantization tolerance (tolChain)
	}{
		{"F16", synthPath("F16"), tensor.F16, tensor.NVFP4ActQ8, tolF16Cache, false},
		{"F16", synthPath("F16"), tensor.E4M3, tensor.NVFP4ActQ8, tolE4M3Cache, false},
		{"Q8_0", synthPath("Q8_0"), tensor.F16, tensor.NVFP4ActQ8, tolBlockQuant, true},
		{"NVFP4 W4A8", nvfp4, tensor.F16, tensor.NVFP4ActQ8, tolBlockQuant, true},
		{"NVFP4 W4A4", nvfp4, tensor.E4M3, tensor.NVFP4ActFP4, tolFP4, true},
	} {
		cpu, gm := loadPair(t, c.path, c.kv, c.act)
		V := cpu.Hyper().Vocab
		var prompts [][]int32
		for range nPrompts {
			p := make([]int32, agreePromptLen(rng))
			for i := range p {
				p[i] = int32(rng.IntN(V))
			}
			prompts = append(prompts, p)
		}
		check(fmt.Sprintf("synthetic qwen35 tiny seed %d %s KV %v", seed, c.name, c.kv), cpu, gm, prompts, c.tol, c.walk, true)
	}

	// stories260K on English prompts of the seed.
	{
		cpu, gm := loadPair(t, storiesPath, tensor.F16, tensor.NVFP4ActQ8)
		tok := fileTokenizer(t, storiesPath)
		var prompts [][]int32
		for range nPrompts {
			n := agreePromptLen(rng)
			p := tok.Encode(storiesPrompt(rng, n), true, false)
			if len(p) < n {
				t.Fatalf("a stories prompt of %d tokens, want %d", len(p), n)
			}
			prompts = append(prompts, p[:n])
		}
		check("stories260K KV F16", cpu, gm, prompts, kqModelTol(cpu.Hyper(), 0), false, false)
	}

	// qwen35-agent on the MLPerf trace's held-out conversations.
	{
		const path = "../../testdata/qwen35-agent/qwen35-agent-f16.gguf"
		cpu, gm := loadPair(t, path, tensor.F16, tensor.NVFP4ActQ8)
		prompts := agentWindows(t, rng, fileTokenizer(t, path), nPrompts)
		check("qwen35-agent KV F16", cpu, gm, prompts, kqModelTol(cpu.Hyper(), 0), false, true)
	}
	t.Logf("all files: %v", total)
	if total.tokens >= agreeMinTokens && total.same*100 < 97*total.tokens {
		t.Errorf("%d of %d tokens identical, under 97%%", total.same, total.tokens)
	}
}

func fileTokenizer(t *testing.T, path string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
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
	return tok
}

// storiesSentences are the pieces of the stories260K prompts: TinyStories'
// words, in sentences that no golden file holds.
var storiesSentences = []string{
	"The little fox found a red ball under the old tree.",
	"Mia and her dad went to the park on a sunny day.",
	"A small bird sang a happy song to the sleepy cat.",
	"Ben wanted to build a big castle out of sand.",
	"The rain made a puddle, and the duck jumped in it.",
	"Lily had a blue hat that her grandma made for her.",
	"One day, a kind dog saw a boy who was sad.",
	"The frog did not like the cold water in the pond.",
	"Tom shared his cookies with his friend Sam.",
	"The moon was bright, and the stars were shining.",
	"Sue lost her toy car, so she looked everywhere.",
	"A big bear lived in a cave near the river.",
	"The girl said thank you and gave her mom a hug.",
	"They ran to the garden to see the pretty flowers.",
}

// storiesPrompt strings sentences in the seed's order until the text is
// surely n tokens long (stories260K's vocabulary has about 3 letters a
// token); the caller cuts it to n.
func storiesPrompt(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < 4*n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(storiesSentences[rng.IntN(len(storiesSentences))])
	}
	return b.String()
}

// agentWindows draws n windows of the agentic trace (bench/testdata, the
// MLPerf Edge agentic dataset): a held-out conversation of qwen35-agent's
// training (its README: conversations 16-20) up to a tool result, written
// as the Qwen3 template writes it and ending in the assistant's
// generation prompt, as chat_prompts.jsonl's are (those five windows are
// never drawn), cut to its last agreePromptLen tokens.
func agentWindows(t *testing.T, rng *rand.Rand, tok *tokenizer.Tokenizer, n int) [][]int32 {
	t.Helper()
	type call struct {
		Function struct{ Name, Arguments string } `json:"function"`
	}
	type record struct {
		Conv      string `json:"conversation_id"`
		Turn      int    `json:"turn"`
		Role      string `json:"role"`
		Content   string `json:"content"`
		Reasoning string `json:"reasoning_content"`
		ToolCalls []call `json:"tool_calls"`
		Results   []struct {
			Content string `json:"content"`
		} `json:"tool_results"`
	}
	f, err := os.Open("../../bench/testdata/agentic_coding_2.5h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var convs []string
	byConv := map[string][]record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if _, ok := byConv[r.Conv]; !ok {
			convs = append(convs, r.Conv)
		}
		byConv[r.Conv] = append(byConv[r.Conv], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(convs) != 20 {
		t.Fatalf("%d conversations in the trace, want 20", len(convs))
	}
	used := map[string]bool{}
	cp, err := os.ReadFile("../../testdata/qwen35-agent/chat_prompts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cp)), "\n") {
		var p struct{ Name string }
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		used[p.Name] = true
	}
	render := func(r record) string {
		switch r.Role {
		case "tool":
			var parts []string
			for _, res := range r.Results {
				parts = append(parts, "<tool_response>\n"+res.Content+"\n</tool_response>")
			}
			return "<|im_start|>user\n" + strings.Join(parts, "\n") + "<|im_end|>\n"
		case "assistant":
			s := "<|im_start|>assistant\n" + r.Content
			for _, c := range r.ToolCalls {
				s += "\n<tool_call>\n{\"name\": \"" + c.Function.Name + "\", \"arguments\": " + c.Function.Arguments + "}\n</tool_call>"
			}
			return s + "<|im_end|>\n"
		default:
			return "<|im_start|>" + r.Role + "\n" + r.Content + "<|im_end|>\n"
		}
	}
	var out [][]int32
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			t.Fatalf("%d windows of the held-out conversations drawn, %d asked for", len(out), n)
		}
		conv := convs[15+rng.IntN(5)]
		recs := byConv[conv]
		i := rng.IntN(len(recs))
		name := fmt.Sprintf("%s#turn%d", conv, recs[i].Turn)
		if recs[i].Role != "tool" || used[name] {
			continue
		}
		used[name] = true
		want := agreePromptLen(rng)
		text := "<|im_start|>assistant\n"
		var p []int32
		for j := i; j >= 0 && len(p) < want; j-- {
			text = render(recs[j]) + text
			p = tok.Encode(text, false, true)
		}
		if len(p) < want {
			continue
		}
		t.Logf("qwen35-agent prompt %d: the last %d tokens of %s", len(out), want, name)
		out = append(out, p[len(p)-want:])
	}
	return out
}
