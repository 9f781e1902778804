package speculative

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

var (
	fitOnce   sync.Once
	fitPath   string
	fitReport FitReport
	fitErr    error
)

// fittedStories fits a head for stories260K once per test binary (on
// fitTokens generated tokens) and returns the file's path.
func fittedStories(t testing.TB) (string, FitReport) {
	t.Helper()
	fitOnce.Do(func() {
		f, err := gguf.Open(storiesPath)
		if err != nil {
			fitErr = err
			return
		}
		defer f.Close()
		m, err := model.Load(f, model.Options{KVType: tensor.F16, Pool: testPool()})
		if err != nil {
			fitErr = err
			return
		}
		w, rep, err := FitMTP(f, m, FitOptions{Tokens: fitTokens, Seed: 3})
		if err != nil {
			fitErr = err
			return
		}
		dir, err := osMkdirTemp()
		if err != nil {
			fitErr = err
			return
		}
		fitPath = filepath.Join(dir, "stories260K-mtp.gguf")
		fitReport = rep
		fitErr = w.WriteFile(fitPath)
	})
	if fitErr != nil {
		t.Fatal(fitErr)
	}
	return fitPath, fitReport
}

const fitTokens = 4096

func TestFitMTPStories(t *testing.T) {
	path, rep := fittedStories(t)
	t.Logf("%+v: %.1f%% of the variance explained", rep, 100*(1-rep.Residual/rep.Variance))
	if rep.Tokens != fitTokens || rep.Pairs != fitTokens {
		t.Errorf("fitted on %d tokens, %d pairs; asked for %d", rep.Tokens, rep.Pairs, fitTokens)
	}
	if !(rep.Residual < 0.5*rep.Variance) {
		t.Errorf("the fit explains little: residual %.4g of variance %.4g", rep.Residual, rep.Variance)
	}
	orig := openModel(t, storiesPath, tensor.F16)
	m := openModel(t, path, tensor.F16)
	if m.MTP() == nil || m.Hyper().Layers != orig.Hyper().Layers {
		t.Fatalf("fitted file: head %v, %d layers (original %d)", m.MTP() != nil, m.Hyper().Layers, orig.Hyper().Layers)
	}
	// the trunk is untouched: same greedy text
	prompt := []int32{1, 403, 407}
	if a, b := plainDecode(t, orig, prompt, 30, 64, sample.Params{}), plainDecode(t, m, prompt, 30, 64, sample.Params{}); !slices.Equal(a, b) {
		t.Fatalf("the fitted file decodes differently:\n%v\n%v", a, b)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	var prompts [][]int32
	freq := map[int32]int{}
	const n = 48
	for range 8 {
		p := []int32{1, int32(rng.IntN(m.Hyper().Vocab))}
		prompts = append(prompts, p)
		for _, tok := range plainDecode(t, orig, p, n, len(p)+n, sample.Params{}) {
			freq[tok]++
		}
	}
	// Depth 1 (one draft per step): how often the head's argmax is the
	// target's. The best constant guess (the most frequent token of the
	// greedy text) is the baseline a useless head cannot beat by much.
	best := 0
	for _, c := range freq {
		best = max(best, c)
	}
	baseline := float64(best) / float64(len(prompts)*n)
	s, _, err := Measure(m, Config{Mode: "linear", Steps: 1, TopK: 1, VerifyNodes: 1, Drafters: []string{"mtp"}}, prompts, n)
	if err != nil {
		t.Fatal(err)
	}
	rate := float64(s.Accepted) / float64(s.Drafted)
	t.Logf("depth 1: %d of %d drafts accepted (%.1f%%; the best constant guess %.1f%%)", s.Accepted, s.Drafted, 100*rate, 100*baseline)
	if rate < 2*baseline || rate < 0.15 {
		t.Errorf("the fitted head's drafts are accepted at %.1f%% (best constant guess %.1f%%)", 100*rate, 100*baseline)
	}
	for _, cfg := range []Config{
		{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{"mtp"}},
		{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp"}},
	} {
		s, toks, err := Measure(m, cfg, prompts, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %d/%d/%d: %d of %d drafted accepted, %.3f target steps per token", cfg.Mode, cfg.Steps, cfg.TopK, cfg.VerifyNodes,
			s.Accepted, s.Drafted, float64(s.TargetSteps)/float64(toks))
		if s.TargetSteps >= toks {
			t.Errorf("%s: no step saved", cfg.Mode)
		}
	}
}

func TestCholeskySolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const n, m = 7, 3
	G := make([]float64, n*n)
	for i := range G {
		G[i] = rng.NormFloat64()
	}
	A := make([]float64, n*n) // GᵀG + I
	for i := range n {
		for j := range n {
			for k := range n {
				A[i*n+j] += G[k*n+i] * G[k*n+j]
			}
		}
		A[i*n+i]++
	}
	X := make([]float64, n*m)
	for i := range X {
		X[i] = rng.NormFloat64()
	}
	B := make([]float64, n*m)
	for i := range n {
		for j := range n {
			for c := range m {
				B[i*m+c] += A[i*n+j] * X[j*m+c]
			}
		}
	}
	if err := choleskySolve(slices.Clone(A), B, n, m); err != nil {
		t.Fatal(err)
	}
	for i := range X {
		if math.Abs(B[i]-X[i]) > 1e-9 {
			t.Fatalf("x[%d] = %v, want %v", i, B[i], X[i])
		}
	}
	if err := choleskySolve([]float64{1, 2, 2, 1}, []float64{1, 1}, 2, 1); err == nil {
		t.Error("an indefinite matrix was factored")
	}
}

// osMkdirTemp is a directory for the package's fitted model; TestMain
// removes it.
func osMkdirTemp() (string, error) {
	dir, err := os.MkdirTemp("", "speculative-fit-")
	fitDir = dir
	return dir, err
}

var fitDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if fitDir != "" {
		os.RemoveAll(fitDir)
	}
	os.Exit(code)
}
