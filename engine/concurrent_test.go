package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/batch"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Several requests at once, through the scheduler: at temperature 0 each
// gives exactly the tokens it gives alone (its steps share forward passes
// with the others'), with drafting off and on; one cancelled mid-way
// leaves the others unchanged; passes did serve several sequences.
func TestConcurrentRequestsEqualAlone(t *testing.T) {
	for _, path := range []string{stories, qwen35Tiny(t)} {
		for _, draft := range []speculative.Config{{}, {Mode: "tree", Steps: 4, TopK: 2, VerifyNodes: 8, Drafters: []string{"mtp", "suffix"}}} {
			t.Run(path[len(path)-12:]+"/"+draft.String(), func(t *testing.T) {
				e, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 512, MaxSequences: 4, PrefillChunk: 16, Draft: draft, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				alone, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 512, MaxSequences: 1, Draft: draft, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer alone.Close()
				V := e.model.Hyper().Vocab
				rng := rand.New(rand.NewPCG(11, 12))
				reqs := make([]Request, 6)
				for i := range reqs {
					prompt := randPrompt(rng, 5+rng.IntN(60), V)
					reqs[i] = Request{Prompt: prompt, MaxTokens: 10 + rng.IntN(30), IgnoreEOS: true, Sample: sample.Params{}}
				}
				concurrentEqualAlone(t, e, alone, reqs, draft)
				st := e.BatchStats()
				shared := int64(0)
				for size, c := range st.BySize[1:] {
					shared += c * int64(size+2)
				}
				if shared == 0 || st.PrefillChunks == 0 {
					t.Fatalf("no pass served several sequences: %+v", st)
				}
				t.Logf("%d passes, by size %v, %d prefill chunks", st.Passes, st.BySize[:6], st.PrefillChunks)
			})
		}
	}
}

// concurrentEqualAlone submits reqs at once to e through a scheduler and
// checks that each gives the tokens it gives alone on alone; the last is
// cancelled after its 3rd token and must stop within the step after it
// (a verify step emits up to draft.Steps+1 tokens) with a prefix of its
// tokens alone.
func concurrentEqualAlone(t *testing.T, e, alone *Engine, reqs []Request, draft speculative.Config) {
	t.Helper()
	s := startScheduler(t, e, 16)
	n := len(reqs)
	want := make([][]int32, n)
	for i := range reqs {
		r, err := alone.Generate(context.Background(), reqs[i], func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r.Tokens
	}
	got := make([][]int32, n)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			k := 0
			r, err := s.Submit(ctx, reqs[i], func(Token) error {
				if k++; i == n-1 && k == 3 {
					cancel() // a client that leaves mid-stream
				}
				return nil
			})
			if err != nil && !(i == n-1 && errors.Is(err, context.Canceled)) {
				t.Error(err)
			}
			got[i] = r.Tokens
		}()
	}
	wg.Wait()
	for i := range n - 1 {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("request %d: %v together, %v alone", i, got[i], want[i])
		}
	}
	limit := 4
	if draft.Enabled() {
		limit = 3 + draft.Steps
	}
	if k := len(got[n-1]); k > limit || !slices.Equal(got[n-1], want[n-1][:k]) {
		t.Fatalf("the cancelled request: %v, alone %v", got[n-1], want[n-1])
	}
}

// A long prompt arriving while others decode, with the per-pass token
// budget on (engine.decode_slowdown): its chunks are cut to what the
// budget allows (any size from the piece floor up, as the passes measure),
// and every request, the long one and the decoding ones, gives exactly
// the tokens and log-probabilities (bit for bit) it gives alone,
// prefilled in whole chunks of PrefillChunk; the snapshot published
// mid-prompt is at its position (a later request restores it and gives the
// same again).
func TestPrefillBudgetKeepsOutput(t *testing.T) {
	for _, c := range []struct {
		path string
		kv   tensor.DType
	}{{stories, tensor.F16}, {stories, tensor.E4M3}, {qwen35Tiny(t), tensor.F16}} {
		t.Run(c.path[len(c.path)-12:]+"/"+c.kv.String(), func(t *testing.T) {
			opt := Options{Threads: 1, KVType: c.kv, ContextLen: 2048, MaxSequences: 3, PrefillChunk: 128, DecodeSlowdown: 1.5,
				CacheMaxBytes: 64 << 20, Log: zerolog.Nop()}
			e, err := Load(c.path, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			opt.MaxSequences, opt.DecodeSlowdown = 1, 0 // the same chunks (and publish stops), whole
			alone, err := Load(c.path, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer alone.Close()
			s := startScheduler(t, e, 16)
			V := e.model.Hyper().Vocab
			rng := rand.New(rand.NewPCG(21, 22))
			reqs := []Request{
				{Prompt: randPrompt(rng, 12, V), MaxTokens: 60, IgnoreEOS: true, Logprobs: true},
				{Prompt: randPrompt(rng, 20, V), MaxTokens: 60, IgnoreEOS: true, Logprobs: true},
				{Prompt: randPrompt(rng, 480, V), MaxTokens: 8, IgnoreEOS: true, Logprobs: true, PublishAt: []int{200}},
			}
			type out struct {
				tokens   []int32
				logprobs []float32
			}
			collect := func(o *out) func(Token) error {
				return func(tk Token) error { o.logprobs = append(o.logprobs, tk.Logprob); return nil }
			}
			want := make([]out, len(reqs))
			for i, r := range reqs {
				res, err := alone.Generate(context.Background(), r, collect(&want[i]))
				if err != nil {
					t.Fatal(err)
				}
				want[i].tokens = res.Tokens
			}
			got := make([]out, len(reqs))
			longDone := make(chan struct{}) // the long prompt's first token: its prefill is over
			decoding := make(chan struct{}, 2)
			var wg sync.WaitGroup
			run := func(i int, hook func(k int)) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					emit := collect(&got[i])
					res, err := s.Submit(context.Background(), reqs[i], func(tk Token) error {
						hook(len(got[i].logprobs) + 1)
						return emit(tk)
					})
					if err != nil {
						t.Error(err)
					}
					got[i].tokens = res.Tokens
				}()
			}
			for i := range 2 {
				run(i, func(k int) {
					if k == 5 { // decoding: hold here until the long prompt is in, so that every chunk runs beside them
						decoding <- struct{}{}
						<-longDone
					}
				})
			}
			<-decoding
			<-decoding
			run(2, func(k int) {
				if k == 1 {
					close(longDone)
				}
			})
			wg.Wait()
			for i := range reqs {
				if !slices.Equal(got[i].tokens, want[i].tokens) || !slices.Equal(got[i].logprobs, want[i].logprobs) {
					t.Fatalf("request %d: %v %v beside the others,\n%v %v alone", i, got[i].tokens, got[i].logprobs, want[i].tokens, want[i].logprobs)
				}
			}
			st := e.BatchStats()
			if st.BudgetedChunks == 0 {
				t.Fatalf("no chunk was cut by the budget: %+v", st)
			}
			t.Logf("%d prefill chunks (%d cut by the budget) for %d prompt tokens", st.PrefillChunks, st.BudgetedChunks, st.PrefillTokens)
			if cs, _ := e.CacheStats(); cs.Published != 1 {
				t.Fatalf("published %d snapshots, want 1", cs.Published)
			}
			var again out
			res, err := e.Generate(context.Background(), reqs[2], collect(&again))
			if err != nil || res.CachedTokens != 200 || !slices.Equal(res.Tokens, want[2].tokens) || !slices.Equal(again.logprobs, want[2].logprobs) {
				t.Fatalf("from the cache: %d cached tokens, %v %v (%v); alone %v", res.CachedTokens, res.Tokens, again.logprobs, err, want[2])
			}
		})
	}
}

// Prefill in pieces of the chunks (as the budget cuts them) computes every
// token as the whole chunks do: the last logits are bit for bit the same,
// for every KV type, with pieces of batch.MinPrefillChunk tokens or more, each
// marked with its chunk's length (model.Batch.Chunk) as the engine sends
// them. Two cuts show what the floor and the mark keep: one-token pieces
// over an F32 cache, and over an F16 cache unmarked pieces of fewer than 64
// tokens of a larger chunk, do change the logits. (With its floor set to
// one token this test passes over F16 and FP8, and with two over F32; the
// floor is 4 for speed, see batch.MinPrefillChunk.)
func TestPrefillPiecesExact(t *testing.T) {
	for _, path := range []string{stories, qwen35Tiny(t)} {
		for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
			t.Run(path[len(path)-12:]+"/"+kv.String(), func(t *testing.T) {
				e, err := Load(path, Options{Threads: 1, KVType: kv, ContextLen: 1024, MaxSequences: 1, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m := e.base
				V := m.Hyper().Vocab
				rng := rand.New(rand.NewPCG(7, 8))
				prompt := randPrompt(rng, 300, V)
				const chunk = 128 // chunks of 128, 128, 44
				run := func(piece func(start, n int) int, marked bool) []float32 {
					st := m.NewState(1024)
					logits := make([]float32, V)
					for ref := 0; ref < len(prompt); ref += chunk {
						end := min(ref+chunk, len(prompt))
						for start := ref; start < end; {
							k := piece(start, end-start)
							b := model.ChainBatch(prompt[start:start+k], start, false)
							if marked {
								b.Chunk = end - ref // as the engine sends a piece
							}
							if err := m.Forward(st, b, logits); err != nil {
								t.Fatal(err)
							}
							start += k
						}
					}
					return logits
				}
				whole := run(func(_, n int) int { return n }, false)
				for try := range 4 {
					got := run(func(_, n int) int { // a cut as the budget's: pieces of the floor or more
						lo := batch.MinPrefillChunk
						switch {
						case n < 2*lo:
							return n
						case try == 0:
							return lo
						}
						return lo + rng.IntN(n-2*lo+1)
					}, true)
					if !slices.Equal(got, whole) {
						t.Fatalf("pieces (try %d): logits differ from whole chunks", try)
					}
				}
				// Without Chunk a piece of fewer than 64 tokens (engine/model's
				// tiledQueries) of an F16 chunk attends by the one-row path.
				unmarked := run(func(_, n int) int { return min(n, 32) }, false)
				if kv == tensor.F16 && slices.Equal(unmarked, whole) {
					t.Fatal("pieces of 32 of F16 chunks of 128 without Batch.Chunk give the same logits: does Chunk still matter?")
				}
				// One-token pieces over an F32 cache attend by the one-token path.
				if kv == tensor.F32 && slices.Equal(run(func(_, n int) int { return 1 }, true), whole) {
					t.Fatal("one-token pieces over an F32 cache give the chunks' logits: is batch.MinPrefillChunk still needed?")
				}
			})
		}
	}
}
