package engine

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// qwen35Tiny writes synth.Build's tiny hybrid model (byte-level vocab) to
// a temporary file.
func qwen35Tiny(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35-tiny.gguf")
	if err := synth.Write(path, synth.Options{Size: "tiny", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadWithCache(t *testing.T, path string, cacheBytes int64) *Engine {
	t.Helper()
	e, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, CacheMaxBytes: cacheBytes, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// greedyRun generates n tokens of prompt greedily; it checks that
// Request.OnPrefix is called once, before the first token, with the
// cached prompt tokens that the result reports.
func greedyRun(t *testing.T, e *Engine, prompt []int32, publish []int, n int) Result {
	t.Helper()
	prefixCalls, prefix, tokens := 0, -1, 0
	res, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: n, IgnoreEOS: true,
		Sample: sample.Params{Temperature: 0}, PublishAt: publish,
		OnPrefix: func(cached int) {
			prefixCalls++
			prefix = cached
			if tokens > 0 {
				t.Errorf("OnPrefix after %d tokens", tokens)
			}
		}}, func(Token) error { tokens++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if prefixCalls != 1 || prefix != res.CachedTokens {
		t.Errorf("OnPrefix called %d times with %d cached tokens; the result says %d", prefixCalls, prefix, res.CachedTokens)
	}
	return res
}

func randPrompt(rng *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + rng.IntN(vocab-3))
	}
	return p
}

// genPrompt stands for a chat template's generation prompt: the tokens at
// the end of a turn's prompt that the next turn's prompt does not repeat.
var genPrompt = []int32{7, 8, 9}

// TestCacheAgentTurns runs several simulated agent conversations (each turn
// is the previous turn's prompt up to its stable boundary, plus a recorded
// answer and a tool result, plus the generation prompt) on an engine with
// the prefix cache and on one without: at temperature 0 the outputs are the
// same, and from the second turn on the warm engine restores exactly the
// previous turn's stable boundary.
func TestCacheAgentTurns(t *testing.T) {
	for _, path := range []string{stories, qwen35Tiny(t)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			warm := loadWithCache(t, path, 1<<30)
			cold := loadWithCache(t, path, 0)
			V := warm.model.Hyper().Vocab
			rng := rand.New(rand.NewPCG(1, 2))
			for conv := 0; conv < 3; conv++ {
				var history []int32
				prevBoundary := 0
				for turn := 0; turn < 4; turn++ {
					history = append(history, randPrompt(rng, 20+rng.IntN(90), V)...)
					prompt := append(slices.Clone(history), genPrompt...)
					boundary := len(history)
					w := greedyRun(t, warm, prompt, []int{boundary}, 12)
					c := greedyRun(t, cold, prompt, []int{boundary}, 12)
					if !slices.Equal(w.Tokens, c.Tokens) {
						t.Errorf("conversation %d turn %d: warm output %v, cold %v", conv, turn, w.Tokens, c.Tokens)
					}
					if c.CachedTokens != 0 {
						t.Errorf("cache off, but %d cached tokens", c.CachedTokens)
					}
					// An attention-only model may also restore whole pages
					// beyond the boundary; a hybrid restores the boundary.
					if w.CachedTokens < prevBoundary || (warm.Arch() == "qwen35" && w.CachedTokens != prevBoundary) {
						t.Errorf("conversation %d turn %d: %d cached tokens, previous boundary %d", conv, turn, w.CachedTokens, prevBoundary)
					}
					prevBoundary = boundary
				}
			}
			st, _ := warm.CacheStats()
			if st.Hits == 0 || st.HitTokens == 0 || st.Published == 0 {
				t.Errorf("cache stats %+v", st)
			}
		})
	}
}

// TestCacheSharedPrefix: two prompts sharing a published prefix (a system
// prompt) both restore it.
func TestCacheSharedPrefix(t *testing.T) {
	e := loadWithCache(t, qwen35Tiny(t), 1<<30)
	V := e.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(3, 4))
	system := randPrompt(rng, 150, V)
	a := append(slices.Clone(system), randPrompt(rng, 40, V)...)
	b := append(slices.Clone(system), randPrompt(rng, 50, V)...)
	if r := greedyRun(t, e, a, []int{len(system)}, 4); r.CachedTokens != 0 {
		t.Errorf("first prompt: %d cached tokens", r.CachedTokens)
	}
	if r := greedyRun(t, e, b, []int{len(system)}, 4); r.CachedTokens != len(system) {
		t.Errorf("second prompt: %d cached tokens, want the shared %d", r.CachedTokens, len(system))
	}
	// A prompt equal to a published prefix leaves one token to prefill.
	if r := greedyRun(t, e, system, nil, 4); r.CachedTokens != 0 {
		t.Errorf("prompt = published prefix: %d cached tokens, want 0 (the snapshot ends at the last token)", r.CachedTokens)
	}
}

// TestCacheBudget: the cache stays within its budget over many turns,
// evicting the least recently used snapshots.
func TestCacheBudget(t *testing.T) {
	path := qwen35Tiny(t)
	probe := loadWithCache(t, path, 1<<30)
	V := probe.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(5, 6))
	p := randPrompt(rng, 200, V)
	greedyRun(t, probe, p, []int{len(p)}, 1)
	one, _ := probe.CacheStats()
	budget := 3 * one.Bytes
	e := loadWithCache(t, path, budget)
	for i := 0; i < 10; i++ {
		p := randPrompt(rng, 200, V)
		greedyRun(t, e, p, []int{100, 200}, 2)
		if st, _ := e.CacheStats(); st.Bytes > budget {
			t.Fatalf("after %d requests the cache holds %d bytes, budget %d", i+1, st.Bytes, budget)
		}
	}
	if st, _ := e.CacheStats(); st.Evicted == 0 || st.Entries == 0 {
		t.Errorf("stats %+v: want evictions and some entries", st)
	}
}
