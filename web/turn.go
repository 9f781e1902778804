package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// The adapters' way into engine/turn: each maps its JSON to a
// turn.Request, plans it with the server's pipeline (plan), runs it
// (generate, runTurn) and maps the deltas and the turn.Result back to its
// wire format. What stays here is HTTP's: the request's log line and
// metrics, the status page's live view, the logprobs' wire shape.

// genPlan is one choice's generation, ready to run, and the queue its
// output tokens' log-probabilities wait in for the response (nil when the
// request did not ask for them).
type genPlan struct {
	*turn.Plan
	lp *logprobQueue
}

// plan plans t on the server's pipeline.
func (s *Server) plan(t *turn.Request) (*genPlan, error) {
	plan, err := s.pipe.Plan(t)
	if err != nil {
		return nil, err
	}
	g := &genPlan{Plan: plan}
	if t.Sampling.Logprobs {
		g.lp = &logprobQueue{}
	}
	return g, nil
}

// generate runs plan, shown on the status page while it runs. Every delta
// goes to sink as soon as it is known, from the engine worker's goroutine.
func (s *Server) generate(ctx context.Context, plan *genPlan, sink func([]chat.Delta)) (turn.Result, error) {
	live := &liveSeq{start: time.Now(), prompt: len(plan.Prompt)}
	if rec := recordOf(ctx); rec != nil {
		live.id, live.start = rec.id, rec.start
	}
	s.live.add(live)
	defer s.live.remove(live)
	lp := plan.lp
	plan.OnToken = func(t engine.Token) {
		live.token()
		lp.push(t)
	}
	return s.pipe.Run(ctx, plan.Plan, sink)
}

// runTurn generates the answer whole (not streamed).
func (s *Server) runTurn(ctx context.Context, rec *record, plan *genPlan) (chat.Message, turn.Result, error) {
	var deltas []chat.Delta
	res, err := s.generate(ctx, plan, func(ds []chat.Delta) { deltas = append(deltas, ds...) })
	s.recordOutcome(rec, res)
	if err != nil {
		return chat.Message{}, turn.Result{}, err
	}
	return chat.Assemble(deltas), res, nil
}

// beginGeneration starts a chat or completions request: it reads the
// body, decodes it with decode, puts the model and flags on the request's
// log line and checks the model is the one served. promptParam is the
// field that holds the prompt, for errors about it. When ok is false the
// error response has been written.
func beginGeneration[P interface{ gen() *genParams }](s *Server, w http.ResponseWriter, r *http.Request,
	promptParam string, decode func([]byte) (P, error)) (p P, rec *record, ok bool) {
	rec = recordOf(r.Context())
	rec.generation = true
	rec.promptParam = promptParam
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return p, rec, false
	}
	s.tagSession(w, r, body)
	if p, err = decode(body); err != nil {
		writeError(w, r, err)
		return p, rec, false
	}
	g := p.gen()
	rec.model, rec.stream, rec.ignored = g.Model, g.Stream, g.Ignored
	if !s.servesModel(g.Model) {
		writeError(w, r, modelNotFound(g.Model))
		return p, rec, false
	}
	return p, rec, true
}

// decodeJSONBody reads body into v, naming the field of a type mismatch.
func decodeJSONBody(body []byte, v any) error {
	if _, err := decodeObject(body); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError("", err)
	}
	return nil
}

// knownFields lists the body's fields not in known, sorted: accepted and
// ignored, for the request's log line.
func ignoredFields(body []byte, known []string) []string {
	fields, _ := decodeObject(body)
	var out []string
	for k := range fields {
		found := false
		for _, kk := range known {
			found = found || k == kk
		}
		if !found {
			out = append(out, k)
		}
	}
	return out
}

// beginTurn is beginGeneration for the adapters that decode their body
// into a turn.Request themselves.
func (s *Server) beginTurn(w http.ResponseWriter, r *http.Request, rec *record) ([]byte, bool) {
	rec.generation = true
	rec.promptParam = "messages"
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	s.tagSession(w, r, body)
	return body, true
}

// checkModel answers 404 when model is not one this server serves.
func (s *Server) checkModel(w http.ResponseWriter, r *http.Request, model string) bool {
	if !s.servesModel(model) {
		writeError(w, r, modelNotFound(model))
		return false
	}
	return true
}

// rawJSONObject is v's JSON when it is an object, else an error naming field.
func rawJSONObject(field string, v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 || isNull(v) {
		return json.RawMessage(`{}`), nil
	}
	if !isObject(v) {
		return nil, badRequest(field, "%s must be a JSON object", field)
	}
	return v, nil
}

func fieldAt(prefix string, i int, rest string) string {
	return fmt.Sprintf("%s[%d]%s", prefix, i, rest)
}
