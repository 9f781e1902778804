package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// benchModelQ8 is `synth --size bench --type Q8_0 --seed 1` (245 MB), written
// once under os.TempDir() (engine/model's benchmark shares it).
func benchModelQ8(b *testing.B) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), "edgellmd-synth-bench-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err != nil {
		if err := quantize.WriteSynth(path, quantize.SynthOptions{Size: "bench", Type: "Q8_0", Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return path
}

// BenchmarkConcurrentDecode: N requests at once through the scheduler, each
// a 32-token prompt and 32 greedy tokens, on the bench model. tok/s is the
// aggregate output rate; tpot-ms the median time per output token of a
// request.
func BenchmarkConcurrentDecode(b *testing.B) {
	path := benchModelQ8(b)
	for _, threads := range []int{1, 2} {
		e, err := Load(path, Options{Threads: threads, KVType: tensor.F16, ContextLen: 1024, MaxSequences: 8, Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		s := NewScheduler(e, 16)
		ctx, stop := context.WithCancel(context.Background())
		go s.Run(ctx)
		for _, n := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("threads=%d/seqs=%d", threads, n), func(b *testing.B) {
				var tokens int
				var tpots []time.Duration
				t0 := time.Now()
				for it := 0; it < b.N; it++ {
					var wg sync.WaitGroup
					var mu sync.Mutex
					for i := range n {
						wg.Add(1)
						go func() {
							defer wg.Done()
							prompt := BenchPrompt(32)
							prompt[1] = int32(3 + (100+7*i+31*it)%250) // distinct prompts (the bench model has 283 tokens)
							var first, last time.Time
							k := 0
							_, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 32, IgnoreEOS: true}, func(Token) error {
								now := time.Now()
								if k == 0 {
									first = now
								}
								last = now
								k++
								return nil
							})
							if err != nil {
								b.Error(err)
							}
							mu.Lock()
							tokens += k
							if k > 1 {
								tpots = append(tpots, last.Sub(first)/time.Duration(k-1))
							}
							mu.Unlock()
						}()
					}
					wg.Wait()
				}
				el := time.Since(t0)
				slices.Sort(tpots)
				b.ReportMetric(float64(tokens)/el.Seconds(), "tok/s")
				if len(tpots) > 0 {
					b.ReportMetric(float64(tpots[len(tpots)/2].Microseconds())/1000, "tpot-ms")
				}
			})
		}
		stop()
		<-s.Done()
		e.Close()
	}
}

// BenchmarkDecodeBesidePrefill: the TPOT of two decoding requests alone,
// and while a 2,048-token prompt arrives and is prefilled in chunks
// (Options.PrefillChunk 256 and 32) in the same passes; prefill-s is how
// long that prompt took.
func BenchmarkDecodeBesidePrefill(b *testing.B) {
	path := benchModelQ8(b)
	for _, chunk := range []int{256, 32} {
		e, err := Load(path, Options{Threads: 2, KVType: tensor.F16, ContextLen: 4096, MaxSequences: 4, PrefillChunk: chunk, Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		s := NewScheduler(e, 16)
		ctx, stop := context.WithCancel(context.Background())
		go s.Run(ctx)
		for _, long := range []bool{false, true} {
			b.Run(fmt.Sprintf("chunk=%d/long-prompt=%v", chunk, long), func(b *testing.B) {
				benchBesidePrefill(b, s, long)
			})
		}
		stop()
		<-s.Done()
		e.Close()
	}
}

func benchBesidePrefill(b *testing.B, s *Scheduler, long bool) {
	var tpots []time.Duration
	var prefill time.Duration
	for it := 0; it < b.N; it++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prompt := BenchPrompt(16)
				prompt[1] = int32(3 + (60+i+7*it)%250)
				var times []time.Time
				_, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 48, IgnoreEOS: true}, func(Token) error {
					times = append(times, time.Now())
					return nil
				})
				if err != nil {
					b.Error(err)
				}
				mu.Lock()
				for k := 1; k < len(times); k++ {
					tpots = append(tpots, times[k].Sub(times[k-1]))
				}
				mu.Unlock()
			}()
		}
		if long {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(20 * time.Millisecond) // while the others decode
				prompt := BenchPrompt(2048)
				prompt[1] = int32(3 + (200+it)%250)
				t0 := time.Now()
				if _, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1}, func(Token) error { return nil }); err != nil {
					b.Error(err)
				}
				mu.Lock()
				prefill += time.Since(t0)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if len(tpots) == 0 {
		b.Fatal("no tokens")
	}
	slices.Sort(tpots)
	b.ReportMetric(float64(tpots[len(tpots)/2].Microseconds())/1000, "tpot-p50-ms")
	b.ReportMetric(float64(tpots[len(tpots)*9/10].Microseconds())/1000, "tpot-p90-ms")
	b.ReportMetric(float64(tpots[len(tpots)-1].Microseconds())/1000, "tpot-max-ms")
	if long {
		b.ReportMetric(prefill.Seconds()/float64(b.N), "prefill-s")
	}
}
