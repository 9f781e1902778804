//go:build wip_model

package gpu

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The GPU model against the CPU engine (its reference) and llama.cpp's
// goldens, on the Vulkan device the tests find (lavapipe in CI).
//
// Tolerances. The GPU computes in float32 like the CPU, but sums in other
// orders (parallel reductions), and its attention and activations do not
// round as ggml-cpu's kernels do (ggml rounds Q and the softmax
// accumulator to F16 in flash attention; the GPU keeps float32). So logits
// differ by float32 noise carried through the layers, not by bits. Greedy
// tokens must still be identical wherever the CPU's top-1/top-2 margin is
// not itself within that noise, which on these models (margins of whole
// units: synth.go's headRowSpread) is every position the goldens cover.

const storiesPath = "../../testdata/models/stories260K.gguf"

type goldenLine struct {
	Prompt       string  `json:"prompt"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
}

func readGolden(t testing.TB, path string) []goldenLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var g goldenLine
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, g)
	}
	return out
}

// loadPair loads a GGUF file as a CPU model and its GPU twin.
func loadPair(t testing.TB, path string, kv tensor.DType, act tensor.NVFP4Activations) (cpu, gm model.Model) {
	t.Helper()
	d := testDevice(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pool := tensor.NewPool(2)
	pool.SetNVFP4Activations(act)
	t.Cleanup(pool.Close)
	if cpu, err = model.Load(f, model.Options{KVType: kv, Pool: pool}); err != nil {
		t.Fatal(err)
	}
	if gm, err = Load(d, cpu, act); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gm.(*gpuModel).Close)
	return cpu, gm
}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// greedy prefills prompt as one chain and decodes n tokens one at a time.
func greedy(t testing.TB, m model.Model, st model.State, prompt []int32, n int) []int32 {
	t.Helper()
	lg := make([]float32, m.Hyper().Vocab)
	if err := m.Forward(st, model.ChainBatch(prompt, st.Len(), false), lg); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for len(out) < n {
		tok := argmax(lg)
		out = append(out, tok)
		if len(out) == n {
			break
		}
		if err := m.Forward(st, model.ChainBatch([]int32{tok}, st.Len(), false), lg); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// maxAbsDiff is max_i |a_i-b_i| and max_i |b_i|.
func maxAbsDiff(a, b []float32) (diff, scale float64) {
	for i := range a {
		diff = max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	return diff, scale
}

func TestModelStoriesGolden(t *testing.T) {
	golden := readGolden(t, "../../testdata/golden/stories260K-greedy64.jsonl")
	for _, kv := range []tensor.DType{tensor.F16, tensor.F32} {
		_, gm := loadPair(t, storiesPath, kv, tensor.NVFP4ActQ8)
		st := gm.NewState(512)
		for _, g := range golden {
			st.Reset()
			got := greedy(t, gm, st, g.PromptTokens, len(g.Tokens))
			if !slices.Equal(got, g.Tokens) {
				t.Errorf("KV %v, prompt %q: GPU tokens\n%v\nllama.cpp\n%v", kv, g.Prompt, got, g.Tokens)
			}
		}
	}
}

// teacherForced compares the logits of every position of a fixed sequence,
// run as one chain with all logits, then token by token.
func teacherForced(t *testing.T, cpu, gm model.Model, seq []int32, relTol float64) {
	t.Helper()
	V := cpu.Hyper().Vocab
	n := len(seq)
	want := make([]float32, n*V)
	if err := cpu.Forward(cpu.NewState(n+1), model.ChainBatch(seq, 0, true), want); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n*V)
	if err := gm.Forward(gm.NewState(n+1), model.ChainBatch(seq, 0, true), got); err != nil {
		t.Fatal(err)
	}
	step := make([]float32, n*V)
	st := gm.NewState(n + 1)
	for i, tok := range seq {
		if err := gm.Forward(st, model.ChainBatch([]int32{tok}, i, false), step[i*V:(i+1)*V]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		w := want[i*V : (i+1)*V]
		for name, g := range map[string][]float32{"batch": got[i*V : (i+1)*V], "step": step[i*V : (i+1)*V]} {
			d, s := maxAbsDiff(g, w)
			if d > relTol*s {
				t.Errorf("%s position %d: max |GPU-CPU| logit %.3g, max |logit| %.3g (tolerance %.1g of it)", name, i, d, s, relTol)
			}
		}
	}
}

func TestModelStoriesLogits(t *testing.T) {
	golden := readGolden(t, "../../testdata/golden/stories260K-greedy64.jsonl")
	seq := append(append([]int32{}, golden[0].PromptTokens...), golden[0].Tokens[:40]...)
	for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
		cpu, gm := loadPair(t, storiesPath, kv, tensor.NVFP4ActQ8)
		// float32 noise through 5 layers, plus F16-rounded Q and softmax
		// accumulator on the CPU side (F16 KV): 1e-3 of the largest logit
		// is ten times what the F32 runs show.
		teacherForced(t, cpu, gm, seq, 1e-3)
	}
}

// TestModelTreeMatchesChain: a tree batch gives each node the logits a
// chain along its root path gives, and Commit(path) leaves the state a
// chain would.
func TestModelTreeMatchesChain(t *testing.T) {
	for _, path := range []string{storiesPath, synthFile(t, "tiny", "F32", true)} {
		_, gm := loadPair(t, path, tensor.F16, tensor.NVFP4ActQ8)
		V := gm.Hyper().Vocab
		prompt := []int32{1, 5, 9, 14, 3, 22}
		nodes := []int32{7, 11, 12, 19, 4, 8, 30}
		parent := []int32{-1, 0, 0, 1, 2, 2, 4}
		st := gm.NewState(64)
		lg := make([]float32, V)
		if err := gm.Forward(st, model.ChainBatch(prompt, 0, false), lg); err != nil {
			t.Fatal(err)
		}
		depth := func(i int) int32 {
			d := int32(0)
			for j := parent[i]; j >= 0; j = parent[j] {
				d++
			}
			return d
		}
		b := model.Batch{Tokens: nodes, Parent: parent, Pos: make([]int32, len(nodes)), Logits: make([]bool, len(nodes))}
		for i := range nodes {
			b.Pos[i] = int32(len(prompt)) + depth(i)
			b.Logits[i] = true
		}
		tree := make([]float32, len(nodes)*V)
		if err := gm.Forward(st, b, tree); err != nil {
			t.Fatal(err)
		}
		for i := range nodes {
			var chain []int32
			for j := int32(i); j >= 0; j = parent[j] {
				chain = append([]int32{nodes[j]}, chain...)
			}
			seq := append(append([]int32{}, prompt...), chain...)
			all := make([]float32, len(seq)*V)
			if err := gm.Forward(gm.NewState(64), model.ChainBatch(seq, 0, true), all); err != nil {
				t.Fatal(err)
			}
			d, s := maxAbsDiff(tree[i*V:(i+1)*V], all[(len(seq)-1)*V:])
			// Same device, same kernels; only the attention's and the
			// DeltaNet's batch layout differ: float32 noise.
			if d > 1e-4*s {
				t.Errorf("%s node %d: |tree - chain| %.3g of max %.3g", filepath.Base(path), i, d, s)
			}
		}
		// commit root -> 2 -> 5 and decode one token: as a chain would
		if err := st.Commit([]int{0, 2, 5}); err != nil {
			t.Fatal(err)
		}
		if st.Len() != len(prompt)+3 {
			t.Fatalf("after Commit: %d tokens, want %d", st.Len(), len(prompt)+3)
		}
		next := make([]float32, V)
		if err := gm.Forward(st, model.ChainBatch([]int32{9}, st.Len(), false), next); err != nil {
			t.Fatal(err)
		}
		cs := gm.NewState(64)
		want := make([]float32, V)
		seq := append(append([]int32{}, prompt...), nodes[0], nodes[2], nodes[5], 9)
		if err := gm.Forward(cs, model.ChainBatch(seq, 0, false), want); err != nil {
			t.Fatal(err)
		}
		if d, s := maxAbsDiff(next, want); d > 1e-4*s {
			t.Errorf("%s after Commit: |committed - chain| %.3g of max %.3g", filepath.Base(path), d, s)
		}
		if err := st.Commit([]int{0}); err == nil {
			t.Error("Commit without a pending batch accepted")
		}
	}
}

// TestModelSnapshot: a snapshot taken on the GPU restores to the same next
// logits on the GPU (bit for bit: same kernels) and, within float32 noise,
// on the CPU; a CPU snapshot restores on the GPU.
func TestModelSnapshot(t *testing.T) {
	for _, path := range []string{storiesPath, synthFile(t, "tiny", "F32", false)} {
		for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
			cpu, gm := loadPair(t, path, kv, tensor.NVFP4ActQ8)
			V := gm.Hyper().Vocab
			prompt := []int32{1, 5, 9, 14, 3, 22, 7, 8}
			st := gm.NewState(32)
			lg := make([]float32, V)
			if err := gm.Forward(st, model.ChainBatch(prompt, 0, false), lg); err != nil {
				t.Fatal(err)
			}
			sn, err := st.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			next := func(m model.Model, s model.State) []float32 {
				out := make([]float32, V)
				if err := m.Forward(s, model.ChainBatch([]int32{12}, s.Len(), false), out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			a := next(gm, st)
			st2 := gm.NewState(32)
			if err := st2.Restore(sn); err != nil {
				t.Fatal(err)
			}
			if b := next(gm, st2); !slices.Equal(a, b) {
				d, _ := maxAbsDiff(a, b)
				t.Errorf("%s KV %v: GPU restore differs from the original by %.3g", filepath.Base(path), kv, d)
			}
			cs := cpu.NewState(32)
			if err := cs.Restore(sn); err != nil {
				t.Fatalf("CPU restore of a GPU snapshot: %v", err)
			}
			if d, s := maxAbsDiff(next(cpu, cs), a); d > 1e-3*s {
				t.Errorf("%s KV %v: CPU from GPU snapshot: %.3g of %.3g", filepath.Base(path), kv, d, s)
			}
			// and back: a CPU snapshot on the GPU
			cs.Reset()
			if err := cpu.Forward(cs, model.ChainBatch(prompt, 0, false), lg); err != nil {
				t.Fatal(err)
			}
			csn, err := cs.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			st3 := gm.NewState(32)
			if err := st3.Restore(csn); err != nil {
				t.Fatal(err)
			}
			if d, s := maxAbsDiff(next(gm, st3), a); d > 1e-3*s {
				t.Errorf("%s KV %v: GPU from CPU snapshot: %.3g of %.3g", filepath.Base(path), kv, d, s)
			}
		}
	}
}

// synthFile writes a synthetic qwen35 model (engine/quantize's generator,
// whose files llama.cpp runs) once per test binary.
var synthFiles = map[string]string{}

func synthFile(t testing.TB, size, typ string, mtp bool) string {
	t.Helper()
	key := size + typ
	if mtp {
		key += "-mtp"
	}
	if p, ok := synthFiles[key]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "edgellmd-gpu-synth")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, key+".gguf")
	if err := quantize.WriteSynth(p, quantize.SynthOptions{Size: size, Type: typ, MTP: mtp, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	synthFiles[key] = p
	return p
}

// nvfp4File quantizes a file to NVFP4 as `edgellmd quantize` does.
func nvfp4File(t testing.TB, src string) string {
	t.Helper()
	dst := src + ".nvfp4.gguf"
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	if _, err := quantize.QuantizeFile(src, dst, quantize.Options{Type: tensor.NVFP4}); err != nil {
		t.Fatal(err)
	}
	return dst
}

var qwenPrompts = [][]int32{{1, 2, 3, 4, 5}, {17, 40, 3, 9, 60, 2, 2, 81}, {250, 11, 9}, {5}}

func TestModelQwen35Synth(t *testing.T) {
	cases := []struct {
		typ string
		kv  tensor.DType
		act tensor.NVFP4Activations
		mtp bool
	}{
		{"F32", tensor.F32, tensor.NVFP4ActQ8, false},
		{"F16", tensor.F16, tensor.NVFP4ActQ8, true},
		{"Q8_0", tensor.F16, tensor.NVFP4ActQ8, false},
		{"Q8_0", tensor.E4M3, tensor.NVFP4ActQ8, false},
		{"NVFP4", tensor.F16, tensor.NVFP4ActQ8, true},
		{"NVFP4", tensor.F16, tensor.NVFP4ActFP4, false},
		{"BF16", tensor.F32, tensor.NVFP4ActQ8, false},
	}
	for _, c := range cases {
		var path string
		if c.typ == "NVFP4" {
			path = nvfp4File(t, synthFile(t, "tiny", "F32", c.mtp))
		} else {
			path = synthFile(t, "tiny", c.typ, c.mtp)
		}
		cpu, gm := loadPair(t, path, c.kv, c.act)
		for _, p := range qwenPrompts {
			want := greedy(t, cpu, cpu.NewState(64), p, 24)
			got := greedy(t, gm, gm.NewState(64), p, 24)
			if !slices.Equal(got, want) {
				t.Errorf("%s KV %v act %d prompt %v: GPU %v, CPU %v", c.typ, c.kv, c.act, p, got, want)
			}
		}
		seq := append(append([]int32{}, qwenPrompts[1]...), 3, 30, 31, 200, 7, 7, 1, 90)
		teacherForced(t, cpu, gm, seq, 2e-3)
		if c.mtp {
			mtpParity(t, cpu, gm, seq)
		}
	}
}

// mtpParity runs the MTP head on the same tokens and hidden states on
// both engines.
func mtpParity(t *testing.T, cpu, gm model.Model, seq []int32) {
	t.Helper()
	hp := cpu.Hyper()
	n := len(seq)
	hid := make([]float32, n*hp.Embd)
	lg := make([]float32, n*hp.Vocab)
	if err := cpu.ForwardHidden(cpu.NewState(n), model.ChainBatch(seq, 0, true), lg, hid); err != nil {
		t.Fatal(err)
	}
	ghid := make([]float32, n*hp.Embd)
	if err := gm.ForwardHidden(gm.NewState(n), model.ChainBatch(seq, 0, true), lg, ghid); err != nil {
		t.Fatal(err)
	}
	if d, s := maxAbsDiff(ghid, hid); d > 1e-3*s {
		t.Errorf("hidden states: |GPU-CPU| %.3g of %.3g", d, s)
	}
	// the head on tokens seq[1:] after hidden states of seq[:n-1]
	want := make([]float32, (n-1)*hp.Vocab)
	got := make([]float32, (n-1)*hp.Vocab)
	if err := cpu.MTP().Forward(cpu.MTP().NewState(n), model.ChainBatch(seq[1:], 0, true), hid, want, nil); err != nil {
		t.Fatal(err)
	}
	if err := gm.MTP().Forward(gm.MTP().NewState(n), model.ChainBatch(seq[1:], 0, true), hid, got, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n-1; i++ {
		V := hp.Vocab
		if d, s := maxAbsDiff(got[i*V:(i+1)*V], want[i*V:(i+1)*V]); d > 2e-3*s {
			t.Errorf("MTP position %d: |GPU-CPU| %.3g of %.3g", i, d, s)
		}
		if argmax(got[i*hp.Vocab:(i+1)*hp.Vocab]) != argmax(want[i*hp.Vocab:(i+1)*hp.Vocab]) {
			t.Errorf("MTP position %d: GPU drafts %d, CPU %d", i, argmax(got[i*hp.Vocab:(i+1)*hp.Vocab]), argmax(want[i*hp.Vocab:(i+1)*hp.Vocab]))
		}
	}
}

// TestModelSpeculative: speculative decoding on the GPU gives plain greedy
// decoding's tokens, with the MTP head and the suffix drafter.
func TestModelSpeculative(t *testing.T) {
	_, gm := loadPair(t, synthFile(t, "tiny", "F32", true), tensor.F16, tensor.NVFP4ActQ8)
	const n, ctxLen = 40, 96
	for _, cfg := range []speculative.Config{
		{Mode: "off"},
		{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{"mtp", "suffix"}},
		{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}},
	} {
		for _, p := range qwenPrompts {
			want := greedy(t, gm, gm.NewState(ctxLen), p, n)
			d, err := speculative.New(gm, cfg, ctxLen)
			if err != nil {
				t.Fatal(err)
			}
			got := specGPU(t, gm, d, p, n, ctxLen)
			if !slices.Equal(got, want) {
				t.Errorf("%s prompt %v:\nspeculative %v\nplain       %v", cfg, p, got, want)
			}
		}
	}
}

func specGPU(t *testing.T, m model.Model, d *speculative.Decoder, prompt []int32, n, ctxLen int) []int32 {
	t.Helper()
	hp := m.Hyper()
	st := m.NewState(ctxLen)
	lg, hid := make([]float32, hp.Vocab), make([]float32, hp.Embd)
	if err := m.ForwardHidden(st, model.ChainBatch(prompt, 0, false), lg, hid); err != nil {
		t.Fatal(err)
	}
	d.Begin(prompt, hid)
	smp := sample.New(sample.Params{})
	out := []int32{smp.Pick(lg)}
	for len(out) < n {
		toks, err := d.Step(st, out[len(out)-1], ctxLen-st.Len(), smp)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toks...)
	}
	return out[:n]
}

func TestModelErrors(t *testing.T) {
	_, gm := loadPair(t, storiesPath, tensor.F16, tensor.NVFP4ActQ8)
	V := gm.Hyper().Vocab
	st := gm.NewState(8)
	lg := make([]float32, V)
	if err := gm.Forward(st, model.ChainBatch([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, false), lg); err == nil {
		t.Error("a batch larger than the state accepted")
	}
	if err := gm.Forward(st, model.ChainBatch([]int32{int32(V)}, 0, false), lg); err == nil {
		t.Error("a token outside the vocabulary accepted")
	}
	if err := gm.Forward(st, model.ChainBatch([]int32{1, 2}, 0, false), lg[:0]); err == nil {
		t.Error("no room for logits accepted")
	}
	if err := st.Truncate(3); err == nil {
		t.Error("Truncate past the end accepted")
	}
}

// TestModelQwen35Agent: the really trained qwen35 model (F16 weights, F16
// KV): greedy tokens on the GPU equal the CPU engine's over its held-out
// chat prompts, and tree drafting with its MTP head accepts the same
// tokens on both engines.
func TestModelQwen35Agent(t *testing.T) {
	const path = "../../testdata/qwen35-agent/qwen35-agent-f16.gguf"
	f, err := os.Open("../../testdata/qwen35-agent/chat_prompts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var prompts [][]int32
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var p struct {
			PromptIDs []int32 `json:"prompt_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.PromptIDs)
	}
	if len(prompts) == 0 {
		t.Fatal("no chat prompts")
	}
	cpu, gm := loadPair(t, path, tensor.F16, tensor.NVFP4ActQ8)
	const n, ctxLen = 32, 1024
	cfg := speculative.Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp"}}
	for i, p := range prompts {
		want := greedy(t, cpu, cpu.NewState(ctxLen), p, n)
		got := greedy(t, gm, gm.NewState(ctxLen), p, n)
		if !slices.Equal(got, want) {
			t.Errorf("chat prompt %d: GPU %v\nCPU %v", i, got, want)
		}
		var stats [2]speculative.Stats
		for j, m := range []model.Model{cpu, gm} {
			d, err := speculative.New(m, cfg, ctxLen)
			if err != nil {
				t.Fatal(err)
			}
			toks := specGPU(t, m, d, p, n, ctxLen)
			if !slices.Equal(toks, want) {
				t.Errorf("chat prompt %d engine %d: tree drafting gives %v, greedy %v", i, j, toks, want)
			}
			stats[j] = d.Stats()
		}
		if stats[0].Accepted != stats[1].Accepted || stats[0].TargetSteps != stats[1].TargetSteps {
			t.Errorf("chat prompt %d: MTP accepted %d in %d steps on the CPU, %d in %d on the GPU", i, stats[0].Accepted, stats[0].TargetSteps, stats[1].Accepted, stats[1].TargetSteps)
		}
	}
}
