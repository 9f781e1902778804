package web

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// deltaQueue carries deltas from the engine worker (which must never wait
// on a client) to the handler goroutine that writes them. It is unbounded:
// a slow reader costs memory for its own text, not time for everyone.
type deltaQueue struct {
	mu     sync.Mutex
	items  []queued
	closed bool
	ready  chan struct{} // signalled when items or closed change
}

// queued is a delta, the end of a choice (with n > 1) and its outcome,
// or the cached prompt tokens (turn.Plan.OnPrefix).
type queued struct {
	d      chat.Delta
	end    *turn.Result
	cached *int
}

func newDeltaQueue() *deltaQueue { return &deltaQueue{ready: make(chan struct{}, 1)} }

func (q *deltaQueue) push(ds []chat.Delta) {
	if len(ds) == 0 {
		return
	}
	q.mu.Lock()
	for _, d := range ds {
		q.items = append(q.items, queued{d: d})
	}
	q.mu.Unlock()
	q.signal()
}

// pushEnd marks the end of a choice.
func (q *deltaQueue) pushEnd(out turn.Result) {
	q.mu.Lock()
	q.items = append(q.items, queued{end: &out})
	q.mu.Unlock()
	q.signal()
}

// pushCached passes on the cached prompt tokens.
func (q *deltaQueue) pushCached(cached int) {
	q.mu.Lock()
	q.items = append(q.items, queued{cached: &cached})
	q.mu.Unlock()
	q.signal()
}

func (q *deltaQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *deltaQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take waits for deltas and returns them all; closed reports that no more
// will come.
func (q *deltaQueue) take() (items []queued, closed bool) {
	for {
		q.mu.Lock()
		items, closed = q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		if len(items) > 0 || closed {
			return items, closed
		}
		<-q.ready
	}
}

// sseWriter writes server-sent events, one JSON object per data line,
// flushing each.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // the first write error: the client is gone
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.flush()
	return s
}

// namedEvent is an event with an "event:" line, as the Anthropic and
// OpenAI Responses streams name each event by its type.
type namedEvent struct {
	name string
	data any
}

// event writes v as one event; a namedEvent gets its name line, and a
// []any is written as its events in turn.
func (s *sseWriter) event(v any) {
	if s.err != nil {
		return
	}
	var name string
	switch e := v.(type) {
	case []any:
		for _, x := range e {
			s.event(x)
		}
		return
	case namedEvent:
		name, v = e.name, e.data
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	buf := make([]byte, 0, len(data)+len(name)+16)
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, s.err = s.w.Write(buf); s.err == nil {
		s.flush()
	}
}

func (s *sseWriter) done() {
	if s.err != nil {
		return
	}
	if _, s.err = s.w.Write([]byte("data: [DONE]\n\n")); s.err == nil {
		s.flush()
	}
}

func (s *sseWriter) flush() {
	if err := s.rc.Flush(); err != nil && s.err == nil {
		s.err = err
	}
}

// streamFormat makes the SSE chunks of one streamed response.
type streamFormat struct {
	first func() any                                        // the chunk that opens the stream, or nil
	delta func(chat.Delta) any                              // the chunk of one delta ([]any: several)
	end   func(out turn.Result) (finish string, last []any) // the closing chunks
	// fail gives the events of an error after the stream began; nil: the
	// OpenAI error body as a data line.
	fail func(ae *apiError) []any
	// noDone leaves out OpenAI's closing "data: [DONE]" (the Anthropic
	// and Responses streams end with their own last event).
	noDone bool
	// more are the plans of the choices after the first (n > 1), run one
	// after another; choiceEnd gives the events that end each choice (end
	// then gives those that end the stream, with the choices' outcomes
	// added up).
	more      []*genPlan
	choiceEnd func(out turn.Result) []any
	// cached, when set, gets the first choice's cached prompt tokens
	// before first is called (Anthropic's message_start splits its
	// usage by them); it is not called when the turn fails before the
	// engine reaches the prompt.
	cached func(n int)
}

// stream runs the generation and writes its deltas as server-sent events
// as they come. The response begins with the first delta (or the end), as
// llama.cpp's server does, so an error before it, such as a full queue,
// is answered with its own status; one after it is sent as an error event
// before [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, plan *genPlan, f streamFormat) {
	rec := recordOf(r.Context())
	q := newDeltaQueue()
	var out turn.Result
	var genErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer q.close()
		defer func() {
			if v := recover(); v != nil {
				genErr = turn.ErrPanic
				s.log.Error().Interface("panic", v).Str("stack", string(debug.Stack())).Msg("panic in generation")
			}
		}()
		if f.cached != nil {
			plan.OnPrefix = q.pushCached
		}
		for i, pl := range append([]*genPlan{plan}, f.more...) {
			o, err := s.generate(r.Context(), pl, q.push)
			out = addChoice(out, o, i)
			if genErr = err; err != nil {
				return
			}
			if f.choiceEnd != nil {
				q.pushEnd(o)
			}
		}
	}()

	var sse *sseWriter
	begin := func() {
		if sse == nil {
			sse = startSSE(w)
			if f.first != nil {
				sse.event(f.first())
			}
		}
	}
	for {
		items, closed := q.take()
		for _, it := range items {
			if it.cached != nil {
				f.cached(*it.cached)
				continue
			}
			begin()
			if it.end != nil {
				sse.event(f.choiceEnd(*it.end))
				continue
			}
			sse.event(f.delta(it.d))
		}
		if closed {
			break
		}
	}
	<-finished
	s.recordOutcome(rec, out)
	if genErr != nil {
		if sse == nil {
			writeError(w, r, genErr)
			return
		}
		ae := toAPIError(r.Context(), genErr)
		rec.err = ae.Message
		if f.fail != nil {
			sse.event(f.fail(ae))
		} else {
			sse.event(ae.body())
		}
		if !f.noDone {
			sse.done()
		}
		return
	}
	begin()
	finish, last := f.end(out)
	rec.finish = finish
	for _, c := range last {
		sse.event(c)
	}
	if !f.noDone {
		sse.done()
	}
	if sse.err != nil {
		rec.err = "writing the stream: " + sse.err.Error()
	}
}
