package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
)

// shapeGrammar is a small language with a regular twin, so that outputs are
// checked by Go's regexp, not by the grammar engine that made them.
const shapeGBNF = `root ::= "{\"n\": " num ", \"w\": \"" word "\"}"
num ::= [1-9] [0-9]{0,3}
word ::= [a-z ]{1,12}
`

var shapeRE = regexp.MustCompile(`^\{"n": [1-9][0-9]{0,3}, "w": "[a-z ]{1,12}"\}$`)

func runShaped(t *testing.T, e *Engine, req Request) (Result, string, []Token) {
	t.Helper()
	var text []byte
	var toks []Token
	res, err := e.Generate(context.Background(), req, func(tk Token) error {
		text = append(text, tk.Piece...)
		toks = append(toks, tk)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, string(text), toks
}

// Under a grammar the output is in its language and ends when the
// sentence is complete; greedy output is the same with drafting off,
// linear and tree (draft nodes the grammar forbids are never verified),
// and sampled outputs are in the language at every seed.
func TestGrammarConstrainsAndComposesWithDrafting(t *testing.T) {
	g, err := grammar.ParseGBNF(shapeGBNF)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{stories, qwen35Tiny(t)} {
		t.Run(path[len(path)-20:], func(t *testing.T) {
			plain, spec := loadWithCache(t, path, 0), loadWithCache(t, path, 0)
			V := plain.model.Hyper().Vocab
			rng := rand.New(rand.NewPCG(7, 8))
			configs := []speculative.Config{
				{Mode: "linear", Steps: 4, TopK: 1, VerifyNodes: 4, Drafters: []string{"suffix"}},
				{Mode: "tree", Steps: 6, TopK: 4, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}},
			}
			filtered := int64(0)
			for i := range 6 {
				prompt := randPrompt(rng, 8+rng.IntN(20), V)
				req := Request{Prompt: prompt, MaxTokens: 200, Constraint: &Constraint{Grammar: g}}
				want, wantText, _ := runShaped(t, plain, req)
				if !shapeRE.MatchString(wantText) || want.FinishReason != "stop" {
					t.Fatalf("prompt %d: %q (%s) is not a complete sentence of the grammar", i, wantText, want.FinishReason)
				}
				cfg := configs[i%len(configs)]
				if err := spec.SetDraft(cfg); err != nil {
					t.Fatal(err)
				}
				got, gotText, _ := runShaped(t, spec, req)
				if !slices.Equal(got.Tokens, want.Tokens) {
					t.Fatalf("prompt %d, draft %s: %q, plain decoding %q", i, cfg, gotText, wantText)
				}
				if spec.lastSlot().spec != nil {
					filtered += spec.lastSlot().spec.Stats().Filtered
				}
				// sampling: always in the language
				req.Sample = sample.Params{Temperature: 1.5, Seed: uint64(i)}
				_, text, _ := runShaped(t, spec, req)
				if !shapeRE.MatchString(text) {
					t.Fatalf("prompt %d sampled %q, not in the language", i, text)
				}
				// cut by max_tokens: a prefix, finish "length"
				req.MaxTokens = 3
				res, text, _ := runShaped(t, plain, req)
				if res.FinishReason != "length" || !prefixOfShape(text) {
					t.Fatalf("cut at 3 tokens: %q (%s)", text, res.FinishReason)
				}
			}
			t.Logf("%d draft nodes filtered by the grammar", filtered)
		})
	}
}

// prefixOfShape reports whether s can be extended to a sentence of
// shapeRE (a regexp of the language's prefixes, written out by hand).
func prefixOfShape(s string) bool { return shapePrefixRE.MatchString(s) }

var shapePrefixRE = regexp.MustCompile(`^(?:` + litPrefix(`{"n": `) + `|` + regexp.QuoteMeta(`{"n": `) +
	`[1-9][0-9]{0,3}(?:` + litPrefix(`, "w": "`) + `|` + regexp.QuoteMeta(`, "w": "`) +
	`(?:[a-z ]{0,12}|[a-z ]{1,12}` + litPrefix(`"}`) + `)))$`)

// litPrefix is a regexp of the prefixes of lit, the empty one included.
func litPrefix(lit string) string {
	re := ""
	for i := len(lit) - 1; i >= 0; i-- {
		re = `(?:` + regexp.QuoteMeta(lit[i:i+1]) + re + `)?`
	}
	return re
}

// A lazy grammar leaves the output free until its trigger, constrains what
// follows, and frees it again once the sentence is complete.
func TestLazyGrammarAfterTrigger(t *testing.T) {
	g, err := grammar.ParseGBNF(`root ::= [0-9]{2} ";"` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	e := loadWithCache(t, qwen35Tiny(t), 0)
	V := e.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(1, 9))
	seen := 0
	for i := range 12 {
		req := Request{Prompt: randPrompt(rng, 10, V), MaxTokens: 120, IgnoreEOS: true,
			Sample: sample.Params{Temperature: 1, Seed: uint64(i)}, Constraint: &Constraint{Grammar: g, Trigger: "a"}}
		_, text, _ := runShaped(t, e, req)
		for at := 0; at < len(text); at++ {
			if text[at] != 'a' {
				continue
			}
			rest := text[at+1:]
			if len(rest) >= 3 {
				if !regexp.MustCompile(`^[0-9]{2};`).MatchString(rest) {
					t.Fatalf("seed %d: after the trigger %q, want two digits and ';'", i, rest)
				}
				seen++
				at += 3
			}
		}
	}
	if seen == 0 {
		t.Fatal("the trigger never appeared: the test checked nothing")
	}
}

// Penalties apply along a verified path exactly as in plain decoding:
// greedy output with penalties is the same with drafting on; the
// log-probabilities are those of the shaped distribution and the same
// with drafting.
func TestPenaltiesAndLogprobsWithDrafting(t *testing.T) {
	path := qwen35Tiny(t)
	plain, spec := loadWithCache(t, path, 0), loadWithCache(t, path, 0)
	if err := spec.SetDraft(speculative.Config{Mode: "tree", Steps: 6, TopK: 4, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}); err != nil {
		t.Fatal(err)
	}
	V := plain.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(2, 3))
	for i := range 4 {
		prompt := randPrompt(rng, 12, V)
		pen := sample.Penalties{Presence: 0.5, Frequency: 0.3, Repetition: 1.3, Bias: map[int32]float32{prompt[0]: -5, 40: 2}}
		req := Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true, Penalties: pen, Logprobs: true, TopLogprobs: 3}
		want, _, wantToks := runShaped(t, plain, req)
		got, _, gotToks := runShaped(t, spec, req)
		if !slices.Equal(got.Tokens, want.Tokens) {
			t.Fatalf("prompt %d: with drafting %v, plain %v", i, got.Tokens, want.Tokens)
		}
		noPen := req
		noPen.Penalties = sample.Penalties{}
		if free, _, _ := runShaped(t, plain, noPen); slices.Equal(free.Tokens, want.Tokens) {
			t.Errorf("prompt %d: the penalties changed nothing", i)
		}
		for k := range wantToks {
			w, g := wantToks[k], gotToks[k]
			if len(w.Top) != 3 || w.Top[0].ID != w.ID || w.Top[0].Logprob != w.Logprob || w.Logprob > 0 {
				t.Fatalf("token %d: logprob %v, top %v: greedy picks the most likely token", k, w.Logprob, w.Top)
			}
			if w.Top[1].Logprob > w.Top[0].Logprob || w.Top[2].Logprob > w.Top[1].Logprob {
				t.Fatalf("token %d: top %v not ordered", k, w.Top)
			}
			if math.Abs(float64(w.Logprob-g.Logprob)) > 1e-3 {
				t.Fatalf("token %d: logprob %v with drafting, %v without", k, g.Logprob, w.Logprob)
			}
		}
	}
	bad := Request{Prompt: []int32{5, 6}, Penalties: sample.Penalties{Bias: map[int32]float32{int32(V): 1}}}
	if _, err := plain.Generate(context.Background(), bad, func(Token) error { return nil }); err == nil {
		t.Fatal("a logit_bias token outside the vocabulary was accepted")
	}
}
