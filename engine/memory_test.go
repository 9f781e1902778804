package engine

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/slots"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The admission arithmetic (slots.Size) is engine/model's: a state's KV rows
// and recurrent state, as its snapshot counts them, and what allocating a
// state for more tokens really costs.
func TestStateSizeMatchesModel(t *testing.T) {
	mtp := filepath.Join(t.TempDir(), "qwen35-tiny-mtp.gguf")
	if err := synth.Write(mtp, synth.Options{Size: "tiny", Seed: 5, MTP: true}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{stories, qwen35Tiny(t), mtp} {
		for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
			t.Run(filepath.Base(path)+"/"+kv.String(), func(t *testing.T) {
				e, err := Load(path, Options{Threads: 1, KVType: kv, ContextLen: 4096, MaxSequences: 1, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				z := e.size
				const n = 5
				st := e.base.NewState(64)
				logits := make([]float32, e.base.Hyper().Vocab)
				if err := e.base.Forward(st, model.ChainBatch(BenchPrompt(n), 0, false), logits); err != nil {
					t.Fatal(err)
				}
				sn, err := st.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				var rec int64
				if sn.Recurrent != nil {
					rec = sn.Recurrent.Bytes()
				}
				if kvb := sn.Bytes() - rec; kvb != n*z.KVPerToken || rec != z.Recurrent {
					t.Fatalf("snapshot of %d tokens: KV %d bytes, recurrent %d; slots.Size says %d and %d", n, kvb, rec, n*z.KVPerToken, z.Recurrent)
				}
				// What a state of more tokens allocates beyond a smaller one: its KV rows.
				grow := allocated(func() { e.base.NewState(2048) }) - allocated(func() { e.base.NewState(1024) })
				// (within 2% and 64 KiB: size classes, and other goroutines' allocations)
				if want := 1024 * z.KVPerToken; !near(grow, want) {
					t.Fatalf("1024 more tokens allocate %d bytes; slots.Size says %d", grow, want)
				}
				if head := e.base.MTP(); head != nil {
					grow := allocated(func() { head.NewState(2048) }) - allocated(func() { head.NewState(1024) })
					if want := 1024 * z.MTPPerToken; want == 0 || !near(grow, want) {
						t.Fatalf("MTP head: 1024 more tokens allocate %d bytes; slots.Size says %d", grow, want)
					}
				} else if z.MTPPerToken != 0 {
					t.Fatalf("no MTP head, but %d MTP bytes per token", z.MTPPerToken)
				}
				t.Logf("%d KV bytes per token, %d recurrent, %d MTP per token", z.KVPerToken, z.Recurrent, z.MTPPerToken)
			})
		}
	}
}

func near(got, want int64) bool {
	return math.Abs(float64(got-want)) <= 0.02*float64(want)+64<<10
}

// allocated is the heap bytes fn allocates.
func allocated(fn func()) int64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return int64(b.TotalAlloc - a.TotalAlloc)
}

// A budget that holds two sequences but not three: three requests at once
// run two at a time (the third waits for memory, then runs once one has
// ended), each with exactly the tokens it gives alone; a request whose
// state alone exceeds the budget fails with a MemoryError naming sizes.
func TestAdmissionByMemory(t *testing.T) {
	for _, path := range []string{stories, qwen35Tiny(t)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			alone, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, MaxSequences: 1, MemoryBudget: -1, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			defer alone.Close()
			// Each request holds 256 tokens (a state granule): 2.5 of them fit.
			const prompt, maxTokens = 40, 216
			budget := alone.size.Bytes(slots.StateGranule) * 5 / 2
			e, err := Load(path, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, MaxSequences: 4, PrefillChunk: 16, MemoryBudget: budget, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.MemoryStats().BudgetBytes; got != budget {
				t.Fatalf("budget %d, want %d", got, budget)
			}
			s := NewScheduler(e, 16)
			runScheduler(t, s)

			rng := rand.New(rand.NewPCG(3, 4))
			V := e.model.Hyper().Vocab
			const n = 3
			reqs := make([]Request, n)
			want := make([][]int32, n)
			for i := range reqs {
				reqs[i] = Request{Prompt: randPrompt(rng, prompt, V), MaxTokens: maxTokens, IgnoreEOS: true, Sample: sample.Params{}}
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
					first := true
					r, err := s.Submit(context.Background(), reqs[i], func(Token) error {
						if first { // the running ones hold their memory until the third waits
							first = false
							deadline := time.Now().Add(20 * time.Second) // fails the test
							for e.MemoryStats().MemoryWaits == 0 {
								if time.Now().After(deadline) {
									return errors.New("no request waited for memory")
								}
								time.Sleep(time.Millisecond)
							}
						}
						return nil
					})
					if err != nil {
						t.Error(err)
					}
					got[i] = r.Tokens
				}()
			}
			wg.Wait()
			for i := range n {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("request %d: %v under the budget, %v alone", i, got[i], want[i])
				}
			}
			st, bs := e.MemoryStats(), e.BatchStats()
			if st.PeakRunning != 2 || st.PeakInUseBytes > budget || st.PeakWaitingForMemory != 1 || st.MemoryWaits != 1 || st.WaitingForMemory != 0 || st.Running != 0 {
				t.Fatalf("stats %+v (budget %d)", st, budget)
			}
			for size, c := range bs.BySize[2:] {
				if c > 0 {
					t.Fatalf("%d passes served %d sequences under a budget of two: %v", c, size+3, bs.BySize)
				}
			}

			// Never fits: 30 + 1500 tokens of state (and a whole context).
			for _, big := range []Request{{Prompt: randPrompt(rng, 30, V), MaxTokens: 1500}, {Prompt: randPrompt(rng, 30, V)}} {
				_, err := s.Submit(context.Background(), big, func(Token) error { return nil })
				var me *MemoryError
				if !errors.Is(err, ErrMemory) || !errors.Is(err, ErrContextFull) || !errors.As(err, &me) || me.NeedBytes <= budget || me.BudgetBytes != budget ||
					!strings.Contains(err.Error(), "engine.memory_budget") {
					t.Fatalf("a request larger than the budget: %v", err)
				}
				t.Log(err)
				// Generate outside the scheduler says the same.
				if _, err := e.Generate(context.Background(), big, func(Token) error { return nil }); !errors.Is(err, ErrMemory) {
					t.Fatalf("Generate: %v", err)
				}
			}
			if st := e.MemoryStats(); st.InUseBytes > budget {
				t.Fatalf("after all: %+v", st)
			}
		})
	}
}

// A big request that waits for memory is passed by at most MaxSequences
// later ones that fit; then nothing starts before it. The test runs the
// scheduler's dispatch itself, at the points it chooses (no Run loop).
func TestAdmissionFairness(t *testing.T) {
	probe := loadStoriesSeqs(t, 1)
	// Budget: four granules; a small request holds one, the big one three.
	budget := probe.size.Bytes(4 * slots.StateGranule)
	if probe.size.Recurrent != 0 {
		t.Fatal("stories260K has recurrent state?")
	}
	e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, ContextLen: 2048, MaxSequences: 3, MemoryBudget: budget, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := NewScheduler(e, 16)
	await := watchQueue(t, s)
	V := e.model.Hyper().Vocab
	rng := rand.New(rand.NewPCG(5, 6))
	type fr struct {
		name                    string
		prompt                  []int32
		started, release, ended chan struct{}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	submit := func(name string, maxTokens int) *fr {
		r := &fr{name: name, prompt: randPrompt(rng, 10, V), started: make(chan struct{}), release: make(chan struct{}), ended: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(r.ended)
			first := true
			_, err := s.Submit(context.Background(), Request{Prompt: r.prompt, MaxTokens: maxTokens, IgnoreEOS: true}, func(Token) error {
				if first {
					first = false
					close(r.started)
					<-r.release // holds its slot and memory
				}
				return ErrStop
			})
			if err != nil {
				t.Error(name, err)
			}
		}()
		return r
	}
	queued := func(r *fr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for el := s.queue.Front(); el != nil; el = el.Next() {
			if &el.Value.(*job).req.Prompt[0] == &r.prompt[0] {
				return true
			}
		}
		return false
	}
	// dispatch runs the scheduler's dispatch once the queue holds n, then
	// checks who started and who waits.
	dispatch := func(n int, start []*fr, wait ...*fr) {
		t.Helper()
		await(n)
		s.dispatch()
		for _, r := range start {
			if queued(r) {
				t.Fatalf("%s still waits", r.name)
			}
			<-r.started
		}
		for _, r := range wait {
			if !queued(r) {
				t.Fatalf("%s started; it should wait", r.name)
			}
		}
	}
	finish := func(r *fr) { close(r.release); <-r.ended }

	a := submit("a", 100)
	dispatch(1, []*fr{a})
	b := submit("b", 100)
	dispatch(1, []*fr{b})
	big := submit("big", 700) // 3 granules beside a's and b's 2: waits
	dispatch(1, nil, big)
	if st := e.MemoryStats(); st.WaitingForMemory != 1 || st.MemoryWaits != 1 {
		t.Fatalf("%+v", st)
	}
	c := submit("c", 100) // fits: passes the big one (1 of 3)
	dispatch(2, []*fr{c}, big)
	finish(a)
	d := submit("d", 100) // a's slot and state: passes (2 of 3)
	dispatch(2, []*fr{d}, big)
	finish(b)
	f := submit("f", 100) // passes (3 of 3)
	dispatch(2, []*fr{f}, big)
	finish(c)
	g := submit("g", 100) // would fit, but the big one has been passed enough
	dispatch(2, nil, big, g)
	finish(d) // now the big one fits beside f: it starts, g waits
	dispatch(2, []*fr{big}, g)
	finish(f)
	dispatch(1, []*fr{g})
	if st := e.MemoryStats(); st.InUseBytes > budget || st.WaitingForMemory != 0 || st.MemoryWaits != 2 {
		t.Fatalf("%+v (budget %d)", st, budget)
	}
	finish(big)
	finish(g)
	s.wg.Wait()
}
