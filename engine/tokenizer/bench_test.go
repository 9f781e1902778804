package tokenizer

import (
	"strings"
	"testing"
)

// benchPrompt is the longest ChatML conversation of the reference file
// (22,720 tokens, special tokens inline), as a rendered agent prompt.
func benchPrompt(b *testing.B) (string, int) {
	var best refCase
	for _, c := range qwenReference(b) {
		if strings.HasPrefix(c.Source, "chatml:") && len(c.IDs) > len(best.IDs) {
			best = c
		}
	}
	return best.Text, len(best.IDs)
}

// BenchmarkEncodeQwen encodes a ~23k-token agent prompt. "warm" reuses the
// word cache, as the daemon does from the second request on; "cold" starts
// every iteration with an empty cache.
func BenchmarkEncodeQwen(b *testing.B) {
	tok := qwenTokenizer(b)
	text, n := benchPrompt(b)
	for _, warm := range []bool{true, false} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			tok.Encode(text, false, true)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if !warm {
					b.StopTimer()
					tok.cache = newWordCache(cacheWords)
					b.StartTimer()
				}
				if got := len(tok.Encode(text, false, true)); got != n {
					b.Fatalf("got %d tokens, want %d", got, n)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(n)/sec, "tokens/s")
			b.ReportMetric(sec*1e3*20000/float64(n), "ms/20k-tokens")
		})
	}
}

// BenchmarkEncodeStories encodes the TinyStories prompts (SentencePiece path).
func BenchmarkEncodeStories(b *testing.B) {
	tok := storiesTokenizer(b)
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside. ", 50)
	n := len(tok.Encode(text, true, false))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true, false)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
