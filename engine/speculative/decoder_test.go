package speculative

import (
	"flag"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

type namedConfig struct {
	name string
	cfg  Config
}

// issueConfigs are the configurations the issue names. A model without an
// MTP head drafts with the suffix drafter where the MTP head is asked for.
func issueConfigs(hasMTP bool) []namedConfig {
	mtp := []string{"mtp"}
	if !hasMTP {
		mtp = []string{"suffix"}
	}
	return []namedConfig{
		{"off", Config{Mode: "off"}},
		{"linear3", Config{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: mtp}},
		{"tree8/2/16", Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: mtp}},
		{"tree6/8/32", Config{Mode: "tree", Steps: 6, TopK: 8, VerifyNodes: 32, Drafters: mtp}},
		{"suffix", Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"suffix"}}},
		{"mtp+suffix", Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}},
	}
}

// drawPrompt draws random tokens, or a random chunk repeated after a
// random lead-in (so that the suffix drafter has something to find).
func drawPrompt(t *rapid.T, vocab int, bos int32) []int32 {
	tok := rapid.Int32Range(0, int32(vocab-1))
	var p []int32
	if bos >= 0 {
		p = append(p, bos)
	}
	p = append(p, rapid.SliceOfN(tok, 0, 8).Draw(t, "lead")...)
	if rapid.Bool().Draw(t, "repeat") {
		chunk := rapid.SliceOfN(tok, 1, 6).Draw(t, "chunk")
		for range rapid.IntRange(2, 5).Draw(t, "times") {
			p = append(p, chunk...)
		}
		p = append(p, chunk[:rapid.IntRange(0, len(chunk)-1).Draw(t, "part")]...)
	}
	if len(p) == 0 {
		p = append(p, tok.Draw(t, "one"))
	}
	return p
}

// checkGreedyEqualsPlain: for random prompts, output lengths and context
// limits, every configuration's greedy output is plain greedy decoding's,
// token for token. Decoders live across the draws, so the suffix drafter
// also drafts from earlier requests.
func checkGreedyEqualsPlain(t *testing.T, m model.Model, bos int32, checks, maxTokens int) {
	limitChecks(t, checks)
	hp := m.Hyper()
	cfgs := issueConfigs(m.MTP() != nil)
	decs := make([]*Decoder, len(cfgs))
	for i, c := range cfgs {
		d, err := New(m, c.cfg, hp.Context)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		decs[i] = d
	}
	var total [6]Stats
	rapid.Check(t, func(rt *rapid.T) {
		prompt := drawPrompt(rt, hp.Vocab, bos)
		n := rapid.IntRange(1, maxTokens).Draw(rt, "tokens")
		ctxLen := len(prompt) + n - 1 + rapid.IntRange(0, 6).Draw(rt, "slack")
		want := plainDecode(t, m, prompt, n, ctxLen, sample.Params{})
		for i, c := range cfgs {
			got := specDecode(t, m, decs[i], prompt, n, ctxLen, sample.Params{})
			if !slices.Equal(got, want) {
				rt.Fatalf("%s: prompt %v: speculative output\n%v\ndiffers from plain greedy\n%v", c.name, prompt, got, want)
			}
			s := decs[i].Stats()
			total[i].TargetSteps += s.TargetSteps
			total[i].Drafted += s.Drafted
			total[i].Accepted += s.Accepted
		}
	})
	for i, c := range cfgs {
		s := total[i]
		t.Logf("%-11s target steps %5d  drafted %6d  accepted %5d", c.name, s.TargetSteps, s.Drafted, s.Accepted)
		// the MTP head always drafts; the suffix drafter only where text
		// repeats (TestSuffixDrafterAccepts makes sure it does)
		if m.MTP() != nil && slices.Contains(c.cfg.Drafters, "mtp") && s.Drafted == 0 {
			t.Errorf("%s: the MTP head never drafted", c.name)
		}
	}
}

// The numbers of checks keep each test to a few seconds on the shared
// machine; -rapid.checks=N overrides them.

func TestGreedyEqualsPlainStories(t *testing.T) {
	for _, tc := range []struct {
		kv     tensor.DType
		checks int
	}{{tensor.F16, 30}, {tensor.F32, 15}} {
		t.Run(tc.kv.String(), func(t *testing.T) {
			checkGreedyEqualsPlain(t, openModel(t, storiesPath, tc.kv), 1, tc.checks, 40)
		})
	}
	t.Run("F16-fitted-head", func(t *testing.T) {
		path, _ := fittedStories(t)
		checkGreedyEqualsPlain(t, openModel(t, path, tensor.F16), 1, 15, 40)
	})
}

func TestGreedyEqualsPlainQwen35MTP(t *testing.T) {
	for _, tc := range []struct {
		kv     tensor.DType
		checks int
	}{{tensor.F16, 10}, {tensor.F32, 8}} {
		t.Run(tc.kv.String(), func(t *testing.T) {
			checkGreedyEqualsPlain(t, synthMTP(t, 5, tc.kv), -1, tc.checks, 24)
		})
	}
}

// limitChecks sets rapid's number of checks for one test unless the
// command line set it.
func limitChecks(t *testing.T, n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if set || f == nil {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}

// selfRepeatingPrompt is the model's own greedy text from a seed token,
// then that text again up to half of it: the model continues what it read
// and the suffix drafter has seen it.
func selfRepeatingPrompt(t testing.TB, m model.Model, start []int32, n int) []int32 {
	text := plainDecode(t, m, start, n, len(start)+n, sample.Params{})
	p := slices.Concat(start, text, start, text[:n/2])
	return p
}

// TestSuffixDrafterAccepts: where text repeats, the suffix drafter's
// tokens are accepted and fewer target passes than tokens are needed, with
// the output still plain greedy decoding's. Repeats are either in the
// prompt (stories260K continues a text it has read; the random qwen35 does
// not) or across requests (the same prompt again: the drafter has seen the
// earlier output).
func TestSuffixDrafterAccepts(t *testing.T) {
	stories := openModel(t, storiesPath, tensor.F16)
	synth := synthMTP(t, 5, tensor.F16)
	cases := []struct {
		name     string
		m        model.Model
		prompt   []int32
		requests int
	}{
		{"stories260K/in-prompt", stories, selfRepeatingPrompt(t, stories, []int32{1, 403}, 48), 1},
		{"stories260K/same-request", stories, []int32{1, 77, 300}, 2},
		{"qwen35-synth-mtp/same-request", synth, []int32{17, 42, 99}, 2},
	}
	for _, tc := range cases {
		for _, c := range issueConfigs(tc.m.MTP() != nil)[1:] {
			if slices.Equal(c.cfg.Drafters, []string{"mtp"}) {
				continue // the random MTP head is not expected to be accepted
			}
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				const n = 40
				ctxLen := len(tc.prompt) + n
				d, err := New(tc.m, c.cfg, ctxLen)
				if err != nil {
					t.Fatal(err)
				}
				want := plainDecode(t, tc.m, tc.prompt, n, ctxLen, sample.Params{})
				for r := range tc.requests {
					got := specDecode(t, tc.m, d, tc.prompt, n, ctxLen, sample.Params{})
					if !slices.Equal(got, want) {
						t.Fatalf("request %d: output differs from plain greedy:\n%v\n%v", r, got, want)
					}
				}
				s := d.Stats()
				t.Logf("%d tokens in %d target steps, %d of %d drafted accepted", n, s.TargetSteps, s.Accepted, s.Drafted)
				if s.Accepted == 0 || s.TargetSteps >= n-1 {
					t.Errorf("drafts were not accepted: %+v for %d tokens", s, n)
				}
			})
		}
	}
}

// TestNewErrors: a config asking only for an MTP head the model lacks, an
// invalid config, and a bad context length are refused.
func TestNewErrors(t *testing.T) {
	m := openModel(t, storiesPath, tensor.F16)
	for _, tc := range []struct {
		cfg    Config
		ctxLen int
	}{
		{Config{Mode: "tree", Steps: 4, TopK: 2, VerifyNodes: 8, Drafters: []string{"mtp"}}, 64},
		{Config{Mode: "tree", Steps: 0, TopK: 2, VerifyNodes: 8, Drafters: []string{"suffix"}}, 64},
		{Config{Mode: "off"}, 0},
	} {
		if _, err := New(m, tc.cfg, tc.ctxLen); err == nil {
			t.Errorf("New(%+v, %d) accepted", tc.cfg, tc.ctxLen)
		}
	}
	d, err := New(m, Config{Mode: "off"}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetConfig(Config{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{"mtp"}}); err == nil {
		t.Error("SetConfig accepted an MTP-only config for a model without a head")
	}
	if d.Config().Mode != "off" {
		t.Error("a refused SetConfig changed the config")
	}
	st := m.NewState(8)
	if _, err := d.Step(st, 5, 0, sample.New(sample.Params{})); err == nil {
		t.Error("Step with no room accepted")
	}
	if _, err := d.Step(st, 9999, 4, sample.New(sample.Params{})); err == nil {
		t.Error("Step with a token outside the vocabulary accepted")
	}
}

// TestStepAllocs: a greedy tree step in steady state allocates nothing.
func TestStepAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    model.Model
	}{
		{"stories260K", openModel(t, storiesPath, tensor.F16)},
		{"qwen35-synth-mtp", synthMTP(t, 5, tensor.F16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			cfg := Config{Mode: "tree", Steps: 6, TopK: 2, VerifyNodes: 8, Drafters: []string{"mtp", "suffix"}}
			prompt := selfRepeatingPrompt(t, m, []int32{1, 30}, 24)
			ctxLen := len(prompt) + 400
			d, err := New(m, cfg, ctxLen)
			if err != nil {
				t.Fatal(err)
			}
			hp := m.Hyper()
			st := m.NewState(ctxLen)
			lg, hid := make([]float32, hp.Vocab), make([]float32, hp.Embd)
			if err := m.ForwardHidden(st, model.ChainBatch(prompt, 0, false), lg, hid); err != nil {
				t.Fatal(err)
			}
			d.Begin(prompt, hid)
			smp := sample.New(sample.Params{})
			pending := sample.Argmax(lg)
			step := func() {
				toks, err := d.Step(st, pending, min(9, ctxLen-st.Len()), smp)
				if err != nil {
					t.Fatal(err)
				}
				pending = toks[len(toks)-1]
			}
			for range 20 { // warm the buffers up
				step()
			}
			if a := testing.AllocsPerRun(50, step); a > 0 {
				t.Errorf("%.1f allocations per greedy step", a)
			}
		})
	}
}
