package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

const stories = "../testdata/models/stories260K.gguf"

func loadStories(t *testing.T) *Engine { return loadStoriesSeqs(t, 0) }

// loadStoriesSeqs loads stories260K with seqs sequence slots (0: the
// default).
func loadStoriesSeqs(t *testing.T, seqs int) *Engine {
	t.Helper()
	e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, MaxSequences: seqs, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func startScheduler(t *testing.T, e *Engine, depth int) *Scheduler {
	t.Helper()
	s := NewScheduler(e, depth)
	runScheduler(t, s)
	return s
}

// runScheduler runs s's worker until the end of the test.
func runScheduler(t *testing.T, s *Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// watchQueue returns await, which waits until s's queue holds n
// requests, looking every millisecond (a test's poll, not
// synchronisation: the queue has no one to tell).
func watchQueue(t *testing.T, s *Scheduler) (await func(n int)) {
	return func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second) // fails the test
		for s.Waiting() != n {
			if time.Now().After(deadline) {
				t.Fatalf("the queue never held %d requests (Waiting %d)", n, s.Waiting())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// holdWorker submits a request whose first token blocks the worker until
// release is called (at the latest when the test ends) and returns once
// the worker is inside it; first receives the request's error.
func holdWorker(t *testing.T, s *Scheduler, prompt []int32) (release func(), first <-chan error) {
	hold := make(chan struct{})
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // runs before the worker is stopped
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 4, IgnoreEOS: true}, func(Token) error {
			once.Do(func() { close(started) })
			<-hold
			return nil
		})
		errc <- err
	}()
	<-started
	return release, errc
}

func TestSchedulerQueueFullAndFIFO(t *testing.T) {
	e := loadStoriesSeqs(t, 1)
	s := NewScheduler(e, 1)
	await := watchQueue(t, s)
	runScheduler(t, s)
	prompt := e.Tokenizer().Encode("Once upon a time", true, false)

	// The first request holds the worker until released.
	release, first := holdWorker(t, s, prompt)
	// One request fits the queue behind it...
	second := make(chan Result, 1)
	go func() {
		r, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true}, func(Token) error { return nil })
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	await(1)
	// ...a third does not.
	if _, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1}, func(Token) error { return nil }); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request: %v, want ErrQueueFull", err)
	}
	if s.Running() != 1 {
		t.Fatalf("Running = %d, want 1", s.Running())
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-second; len(r.Tokens) != 3 {
		t.Fatalf("second request got %d tokens", len(r.Tokens))
	}
}

// TestSchedulerCancelFreesQueueSlot: requests whose clients leave while
// they wait (their contexts cancelled) return at once and give their queue
// slots back at once, not when they reach the front: with one request
// running and the queue full of such requests, a new one is queued.
func TestSchedulerCancelFreesQueueSlot(t *testing.T) {
	e := loadStoriesSeqs(t, 1)
	s := NewScheduler(e, 2)
	await := watchQueue(t, s)
	runScheduler(t, s)
	prompt := e.Tokenizer().Encode("Once upon a time", true, false)
	release, first := holdWorker(t, s, prompt)

	var left []chan error
	var cancels []context.CancelFunc
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		errc := make(chan error, 1)
		left = append(left, errc)
		go func() {
			_, err := s.Submit(ctx, Request{Prompt: prompt, MaxTokens: 2}, func(Token) error { return nil })
			errc <- err
		}()
		await(i + 1)
	}
	for i, cancel := range cancels {
		cancel()
		select {
		case err := <-left[i]:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled request %d: %v, want context.Canceled", i, err)
			}
		case <-time.After(10 * time.Second): // fails the test; not synchronisation
			t.Fatalf("cancelled request %d still waits for its turn (Waiting %d)", i, s.Waiting())
		}
		if got, want := s.Waiting(), 1-i; got != want {
			t.Errorf("after cancelling request %d: Waiting = %d, want %d", i, got, want)
		}
	}

	third := make(chan error, 1)
	go func() {
		r, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true}, func(Token) error { return nil })
		if err == nil && len(r.Tokens) != 3 {
			err = fmt.Errorf("%d tokens, want 3", len(r.Tokens))
		}
		third <- err
	}()
	await(1)
	if s.Waiting() != 1 || s.Running() != 1 {
		t.Errorf("third request queued: Waiting %d, Running %d; want 1, 1", s.Waiting(), s.Running())
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-third; err != nil {
		t.Fatalf("third request: %v", err)
	}
	if s.Waiting() != 0 {
		t.Errorf("Waiting = %d at the end", s.Waiting())
	}
}

func TestSchedulerCancelStopsWithinAStep(t *testing.T) {
	e := loadStories(t)
	s := startScheduler(t, e, 4)
	prompt := e.Tokenizer().Encode("Once upon a time", true, false)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := s.Submit(ctx, Request{Prompt: prompt, MaxTokens: 500, IgnoreEOS: true}, func(Token) error {
		n++
		if n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(res.Tokens) > 6 {
		t.Fatalf("generated %d tokens after cancelling at 5", len(res.Tokens))
	}
}

func TestGenerateErrStopEndsWithStop(t *testing.T) {
	e := loadStories(t)
	prompt := e.Tokenizer().Encode("Once upon a time", true, false)
	n := 0
	res, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 50, IgnoreEOS: true}, func(Token) error {
		n++
		if n == 3 {
			return ErrStop
		}
		return nil
	})
	if err != nil || res.FinishReason != "stop" || len(res.Tokens) != 3 {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestSchedulerStoppedRefuses(t *testing.T) {
	e := loadStories(t)
	s := NewScheduler(e, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	if _, err := s.Submit(context.Background(), Request{Prompt: []int32{1}}, func(Token) error { return nil }); !errors.Is(err, ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
}
