package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

const stories = "../testdata/models/stories260K.gguf"

func loadStories(t *testing.T) *Engine {
	t.Helper()
	e, err := Load(stories, Options{Threads: 1, KVType: tensor.F16, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func startScheduler(t *testing.T, e *Engine, depth int) *Scheduler {
	t.Helper()
	s := NewScheduler(e, depth)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

func TestSchedulerQueueFullAndFIFO(t *testing.T) {
	e := loadStories(t)
	s := startScheduler(t, e, 1)
	prompt := e.Tokenizer().Encode("Once upon a time", true, false)

	// The first request holds the worker inside emit until released.
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		_, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 4, IgnoreEOS: true}, func(Token) error {
			once.Do(func() { close(started) })
			<-release
			return nil
		})
		first <- err
	}()
	<-started
	// One request fits the queue behind it...
	second := make(chan Result, 1)
	go func() {
		r, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true}, func(Token) error { return nil })
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	for s.Waiting() != 1 {
		time.Sleep(time.Millisecond) // polling a counter, not synchronising work
	}
	// ...a third does not.
	if _, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 1}, func(Token) error { return nil }); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request: %v, want ErrQueueFull", err)
	}
	if s.Running() != 1 {
		t.Fatalf("Running = %d, want 1", s.Running())
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-second; len(r.Tokens) != 3 {
		t.Fatalf("second request got %d tokens", len(r.Tokens))
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
