package speculative

import (
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// BenchmarkDecodeStories decodes 96 greedy tokens of stories260K, plain
// and speculative with the suffix drafter (the model has no MTP head) or
// with a fitted head (fitted-head).
// in-prompt: the prompt repeats the model's own text; each iteration starts
// a fresh decoder, so nothing is drafted from an earlier output.
// repeat-request: a short prompt asked a second time; the decoder has seen
// the first answer (an agent's retry). tokens/s includes the prefill.
//
//	go test ./engine/speculative/ -run '^$' -bench DecodeStories -benchtime 20x
func BenchmarkDecodeStories(b *testing.B) {
	m := openModel(b, storiesPath, tensor.F16)
	for _, sc := range []struct {
		name   string
		prompt []int32
		warm   bool
	}{
		{"in-prompt", selfRepeatingPrompt(b, m, []int32{1, 403}, 48), false},
		{"repeat-request", []int32{1, 77, 300}, true},
	} {
		b.Run(sc.name, func(b *testing.B) { benchDecode(b, storiesPath, sc.prompt, sc.warm, "suffix") })
	}
	// the head edgellmd draft fit makes (fitted on 4096 tokens), prompts
	// without repetition
	b.Run("fitted-head", func(b *testing.B) {
		path, _ := fittedStories(b)
		benchDecode(b, path, []int32{1, 403, 407}, false, "mtp")
	})
}

func benchDecode(b *testing.B, path string, prompt []int32, warm bool, drafter string) {
	m := openModel(b, path, tensor.F16)
	const n = 96
	ctxLen := len(prompt) + n
	want := plainDecode(b, m, prompt, n, ctxLen, sample.Params{})
	for _, c := range []namedConfig{
		{"off", Config{Mode: "off"}},
		{"linear3", Config{Mode: "linear", Steps: 3, TopK: 1, VerifyNodes: 3, Drafters: []string{drafter}}},
		{"tree8-2-16", Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{drafter}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var steps, drafted, accepted int64
			for b.Loop() {
				b.StopTimer()
				d, err := New(m, c.cfg, ctxLen)
				if err != nil {
					b.Fatal(err)
				}
				if warm && c.cfg.Enabled() {
					specDecode(b, m, d, prompt, n, ctxLen, sample.Params{})
				}
				b.StartTimer()
				var got []int32
				if c.cfg.Enabled() {
					got = specDecode(b, m, d, prompt, n, ctxLen, sample.Params{})
				} else {
					got = plainDecode(b, m, prompt, n, ctxLen, sample.Params{})
				}
				b.StopTimer()
				if !slices.Equal(got, want) {
					b.Fatal("output differs from plain greedy decoding")
				}
				s := d.Stats()
				steps += s.TargetSteps
				drafted += s.Drafted
				accepted += s.Accepted
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
			if steps > 0 {
				b.ReportMetric(float64(steps)/float64(n*b.N), "target_steps/token")
				b.ReportMetric(float64(accepted)/float64(max(drafted, 1)), "accepted/drafted")
			}
		})
	}
}
