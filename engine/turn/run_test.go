package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
)

// script plays the model: call i emits the tokens of turns[i] and then
// the end-of-generation token, keeping Submit's contract (MaxTokens,
// ErrStop ends with "stop"); it reports cached prompt tokens.
type script struct {
	p      *Pipeline
	turns  []string
	cached int
	calls  []engine.Request
	// produced counts the tokens generated, the end-of-turn token
	// included (it is counted, not emitted).
	produced int
	// failEarly, when set, fails every generation before the prompt is
	// reached (as a full queue does).
	failEarly error
}

func (s *script) source(ctx context.Context, req engine.Request, emit func(engine.Token) error) (engine.Result, error) {
	tok := s.p.tok
	text := s.turns[len(s.calls)]
	s.calls = append(s.calls, req)
	res := engine.Result{Prompt: req.Prompt, FinishReason: "length", CachedTokens: s.cached}
	defer func() { s.produced += len(res.Tokens) }()
	if s.failEarly != nil {
		return engine.Result{Prompt: req.Prompt}, s.failEarly
	}
	if req.OnPrefix != nil {
		req.OnPrefix(s.cached)
	}
	for _, id := range append(tok.Encode(text, false, true), tok.Vocab().EOS) {
		if req.MaxTokens > 0 && len(res.Tokens) == req.MaxTokens {
			return res, nil
		}
		res.Tokens = append(res.Tokens, id)
		if tok.IsEOG(id) {
			res.FinishReason = "stop"
			return res, nil
		}
		if err := emit(engine.Token{ID: id, Piece: tok.Piece(id)}); err != nil {
			if errors.Is(err, engine.ErrStop) {
				res.FinishReason = "stop"
				return res, nil
			}
			return res, err
		}
	}
	return res, nil
}

// Run says how a turn ended as every API needs it: the finish (length
// before tool calls before a stop string before stop), the stop string,
// the usage with the cached prompt tokens and the reasoning's tokens
// (counted by tokenizing the reasoning text, independently of how the
// model's tokens fell), and the deltas as the parser splits them.
func TestRunResult(t *testing.T) {
	thinkOn := true
	user := []chat.Message{{Role: "user", Content: chat.TextContent("Weather in Oslo?")}}
	weather, err := ParseChatTool(0, json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
	for _, c := range []struct {
		name      string
		req       Request
		out       string
		finish    Finish
		stopSeq   string
		content   string
		reasoning string
		calls     int
	}{
		{"reasoning then text", Request{Messages: user, Reasoning: &thinkOn}, "<think>\nIt rains there.\n</think>\n\nRain.", FinishStop, "", "Rain.", "It rains there.", 0},
		{"a stop string", Request{Messages: user, Reasoning: &thinkOn, Stop: []string{"ai"}}, "<think>\nsure\n</think>\n\nRain all day.", FinishStopSequence, "ai", "R", "sure", 0},
		{"a call", Request{Messages: user, Reasoning: &thinkOn, Tools: []Tool{weather}, ParallelToolCalls: true}, "<think>\nlook it up\n</think>\n\n" + call, FinishToolCalls, "", "", "look it up", 1},
		{"cut by max_tokens", Request{Messages: user, Reasoning: &thinkOn, MaxTokens: 3}, "<think>\nIt rains there, all day long.\n</think>\n\nRain.", FinishLength, "", "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &script{turns: []string{c.out}, cached: 1 << 20}
			p := qwenPipeline(t, Options{Source: sc.source})
			sc.p = p
			plan, err := p.Plan(&c.req)
			if err != nil {
				t.Fatal(err)
			}
			var deltas []Delta
			tokens := 0
			plan.OnToken = func(engine.Token) { tokens++ }
			res, err := p.Run(context.Background(), plan, func(ds []Delta) { deltas = append(deltas, ds...) })
			if err != nil {
				t.Fatal(err)
			}
			msg := chat.Assemble(deltas)
			if res.Finish != c.finish || res.StopSequence != c.stopSeq {
				t.Errorf("finish %q %q, want %q %q", res.Finish, res.StopSequence, c.finish, c.stopSeq)
			}
			if msg.Content.Text != c.content || len(msg.ToolCalls) != c.calls {
				t.Errorf("content %q, %d calls; want %q, %d", msg.Content.Text, len(msg.ToolCalls), c.content, c.calls)
			}
			u := res.Usage
			if u.PromptTokens != len(plan.Prompt) || u.CachedTokens != len(plan.Prompt) {
				t.Errorf("prompt %d cached %d, want %d and the engine's count capped at it", u.PromptTokens, u.CachedTokens, len(plan.Prompt))
			}
			if u.OutputTokens != sc.produced {
				t.Errorf("%d output tokens, the engine made %d", u.OutputTokens, sc.produced)
			}
			if c.reasoning != "" {
				if msg.ReasoningContent == nil || strings.TrimSpace(*msg.ReasoningContent) != c.reasoning {
					t.Fatalf("reasoning %v, want %q", msg.ReasoningContent, c.reasoning)
				}
				want := len(p.tok.Encode(*msg.ReasoningContent, false, false))
				if u.ReasoningTokens != want {
					t.Errorf("%d reasoning tokens, the reasoning text is %d", u.ReasoningTokens, want)
				}
			}
			if res.Engine.TimedTokens != tokens || (tokens > 0 && res.Engine.FirstToken.IsZero()) {
				t.Errorf("%d tokens timed, %d emitted", res.Engine.TimedTokens, tokens)
			}
		})
	}
}

// Plan.OnPrefix gets the cached prompt tokens once, before the first delta
// reaches the sink, with what the usage says at the end: on a plain answer,
// after reasoning, on a forced call whose markup is ready before the
// engine runs (held until the engine has restored the prompt), on a forced
// call cut by max_tokens before the engine runs (0). A turn that fails
// before the engine reaches the prompt sends nothing. Each runs with the
// template's splitter, which holds a forced call's markup back until the
// model's first token, and with one that passes every text on at once.
func TestRunOnPrefix(t *testing.T) {
	on, off := true, false
	user := []chat.Message{{Role: "user", Content: chat.TextContent("Weather in Oslo?")}}
	weather, err := ParseChatTool(0, json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	forced := ToolChoice{Mode: ToolNamed, Name: "get_weather"}
	args := "{\"city\": \"Oslo\"}}\n</tool_call>"
	for _, c := range []struct {
		name   string
		req    Request
		turns  []string
		cached int
		fail   bool
		want   int // the cached tokens OnPrefix and the usage say; -1: OnPrefix is not called
	}{
		{"text", Request{Messages: user, Reasoning: &off}, []string{"Rain."}, 5, false, 5},
		{"reasoning then a forced call", Request{Messages: user, Reasoning: &on, Tools: []Tool{weather}, ToolChoice: forced},
			[]string{"<think>\nlook it up\n</think>\n\n", args}, 7, false, 7},
		{"a forced call", Request{Messages: user, Reasoning: &off, Tools: []Tool{weather}, ToolChoice: forced}, []string{args}, 9, false, 9},
		{"a forced call cut before the engine", Request{Messages: user, Reasoning: &off, Tools: []Tool{weather}, ToolChoice: forced, MaxTokens: 2},
			nil, 9, false, 0},
		{"a failure before the prompt", Request{Messages: user, Reasoning: &off, Tools: []Tool{weather}, ToolChoice: forced}, []string{args}, 9, true, -1},
	} {
		for _, eager := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/eager=%v", c.name, eager), func(t *testing.T) {
				sc := &script{turns: c.turns, cached: c.cached}
				if c.fail {
					sc.failEarly = engine.ErrQueueFull
				}
				p := qwenPipeline(t, Options{Source: sc.source})
				sc.p = p
				plan, err := p.Plan(&c.req)
				if err != nil {
					t.Fatal(err)
				}
				if eager {
					plan.split = eagerSplit{}
				}
				calls, got, deltas := 0, -1, 0
				plan.OnPrefix = func(cached int) {
					calls++
					got = cached
					if deltas > 0 {
						t.Errorf("OnPrefix after %d deltas", deltas)
					}
				}
				res, err := p.Run(context.Background(), plan, func(ds []Delta) { deltas += len(ds) })
				if c.fail {
					if err == nil || calls != 0 || deltas != 0 {
						t.Errorf("failed turn: error %v, OnPrefix called %d times, %d deltas sent", err, calls, deltas)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if calls != 1 || got != c.want || res.Usage.CachedTokens != c.want {
					t.Errorf("OnPrefix called %d times with %d, usage says %d cached; want %d", calls, got, res.Usage.CachedTokens, c.want)
				}
				if len(c.turns) > 0 && deltas == 0 {
					t.Error("no deltas")
				}
			})
		}
	}
}

// eagerSplit passes every text on as content at once.
type eagerSplit struct{}

func (eagerSplit) Push(text string) []Delta { return []Delta{{Content: text}} }
func (eagerSplit) Finish() []Delta          { return nil }
