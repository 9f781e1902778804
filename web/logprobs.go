package web

import (
	"sync"

	"github.com/edgellmd/edgellmd/engine"
)

// OpenAI's log-probability objects: chat's choices[].logprobs.content[]
// and the legacy completions' choices[].logprobs.

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal []tokenLogprob `json:"refusal"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func byteList(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// chatLogprobOf is one output token's entry.
func chatLogprobOf(t engine.Token) tokenLogprob {
	e := tokenLogprob{Token: string(t.Piece), Logprob: t.Logprob, Bytes: byteList(t.Piece), TopLogprobs: []topLogprob{}}
	for _, a := range t.Top {
		e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: string(a.Piece), Logprob: a.Logprob, Bytes: byteList(a.Piece)})
	}
	return e
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// add appends one token at byte offset off of the completion's text.
func (c *completionLogprobs) add(t engine.Token, off int) {
	c.Tokens = append(c.Tokens, string(t.Piece))
	c.TokenLogprobs = append(c.TokenLogprobs, t.Logprob)
	top := map[string]float32{}
	for _, a := range t.Top {
		if _, dup := top[string(a.Piece)]; !dup {
			top[string(a.Piece)] = a.Logprob
		}
	}
	c.TopLogprobs = append(c.TopLogprobs, top)
	c.TextOffset = append(c.TextOffset, off)
}

// logprobQueue carries the output tokens' log-probabilities from the
// engine worker to the response: a stream attaches those pending to its
// next chunk (they are pushed before the text of their token is, so they
// never come later than it), a whole answer takes them all at the end. Nil
// when the request did not ask for them.
type logprobQueue struct {
	mu      sync.Mutex
	pending []engine.Token
	offset  int // bytes of output before pending[0] (completions' text_offset)
}

func (q *logprobQueue) push(t engine.Token) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.pending = append(q.pending, t)
	q.mu.Unlock()
}

func (q *logprobQueue) take() (toks []engine.Token, offset int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	toks, offset = q.pending, q.offset
	q.pending = nil
	for _, t := range toks {
		q.offset += len(t.Piece)
	}
	return toks, offset
}

// takeChat returns the pending entries as chat logprobs; nil when the
// request did not ask for them, an empty list when none are pending.
func (q *logprobQueue) takeChat() *chatLogprobs {
	if q == nil {
		return nil
	}
	toks, _ := q.take()
	lp := &chatLogprobs{Content: []tokenLogprob{}}
	for _, t := range toks {
		lp.Content = append(lp.Content, chatLogprobOf(t))
	}
	return lp
}

// takeCompletion returns the pending entries as completion logprobs.
func (q *logprobQueue) takeCompletion() *completionLogprobs {
	if q == nil {
		return nil
	}
	toks, off := q.take()
	lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, t := range toks {
		lp.add(t, off)
		off += len(t.Piece)
	}
	return lp
}
