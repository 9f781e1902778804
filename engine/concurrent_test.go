package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"

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
				s := startScheduler(t, e, 16)
				V := e.model.Hyper().Vocab
				rng := rand.New(rand.NewPCG(11, 12))
				const n = 6
				reqs := make([]Request, n)
				want := make([][]int32, n)
				for i := range reqs {
					prompt := randPrompt(rng, 5+rng.IntN(60), V)
					reqs[i] = Request{Prompt: prompt, MaxTokens: 10 + rng.IntN(30), IgnoreEOS: true, Sample: sample.Params{}}
					r, err := alone.Generate(context.Background(), reqs[i], func(Token) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					want[i] = r.Tokens
				}
				got := make([][]int32, n)
				var wg sync.WaitGroup
				cancelled := make(chan struct{})
				for i := range reqs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithCancel(context.Background())
						defer cancel()
						k := 0
						r, err := s.Submit(ctx, reqs[i], func(Token) error {
							k++
							if i == n-1 && k == 3 {
								cancel() // a client that leaves mid-stream
								close(cancelled)
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
				<-cancelled
				for i := range n - 1 {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("request %d: %v together, %v alone", i, got[i], want[i])
					}
				}
				if k := len(got[n-1]); k > 4 || !slices.Equal(got[n-1], want[n-1][:k]) {
					t.Fatalf("the cancelled request: %v, alone %v", got[n-1], want[n-1])
				}
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
