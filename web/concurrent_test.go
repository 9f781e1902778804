package web

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Several agents at once through the official client: four streamed chat
// requests generate together (engine.max_sequences 4) and each, at
// temperature 0, streams exactly what it gives alone.
func TestConcurrentStreams(t *testing.T) {
	eng, err := engine.Load(storiesPath, engine.Options{Threads: 1, KVType: tensor.F16, MaxSequences: 4, PrefillChunk: 32, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	together := startServer(t, eng, 8, Options{})
	alone := storiesServer(t, 8, Options{})
	params := func(i int) openai.ChatCompletionNewParams {
		p := userChat(fmt.Sprintf("Tell me story number %d about a cat and a dog.", i))
		p.MaxTokens = openai.Int(int64(20 + 7*i))
		p.Temperature = openai.Float(0)
		return p
	}
	const n = 4
	want := make([]string, n)
	for i := range n {
		c := alone.client()
		got, err := c.Chat.Completions.New(context.Background(), params(i))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = got.Choices[0].Message.Content
	}
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := together.client()
			s := c.Chat.Completions.NewStreaming(context.Background(), params(i))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Error(err)
				return
			}
			got[i] = acc.Choices[0].Message.Content
		}()
	}
	wg.Wait()
	for i := range n {
		if got[i] != want[i] {
			t.Errorf("request %d together: %q; alone: %q", i, got[i], want[i])
		}
	}
	st := eng.BatchStats()
	if st.Passes == 0 || st.BySize[0] == st.Passes {
		t.Errorf("no pass served several sequences: %+v", st)
	}
}
