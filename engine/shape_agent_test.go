package engine

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The trained qwen35-agent model writes tool calls in the trace's style:
// the lazy call grammar below (the Qwen3 template's JSON inside
// <tool_call>, one bash tool) constrains them once it opens one.
const agentModel = "../testdata/qwen35-agent/qwen35-agent-f16.gguf"

const agentCallGBNF = `root ::= "\n{\"name\": \"bash\", \"arguments\": {\"command\": \"" chars "\"}}\n</tool_call>"
chars ::= ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])*
`

func agentPrompts(t testing.TB) [][]int32 {
	t.Helper()
	f, err := os.Open("../testdata/qwen35-agent/chat_prompts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]int32
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var p struct {
			IDs []int32 `json:"prompt_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.IDs)
	}
	return out
}

type agentRun struct {
	tokens          [][]int32
	steps, drafted  int
	accepted, calls int
	filtered        int64
}

// runAgent decodes every prompt greedily under the lazy call grammar with
// tree MTP drafting (noFilter: forbidden drafts verified anyway), or
// without drafting when cfg is off.
func runAgent(t *testing.T, e *Engine, prompts [][]int32, cfg speculative.Config, noFilter bool, n int) agentRun {
	t.Helper()
	g, err := grammar.ParseGBNF(agentCallGBNF)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetDraft(cfg); err != nil {
		t.Fatal(err)
	}
	var r agentRun
	for _, p := range prompts {
		if d := e.lastSlot().drafter(cfg); d != nil {
			d.NoFilter = noFilter
		}
		res, text, _ := runShaped(t, e, Request{Prompt: p, MaxTokens: n, Constraint: &Constraint{Grammar: g, Trigger: "<tool_call>"}})
		r.tokens = append(r.tokens, res.Tokens)
		r.steps += int(res.Spec.TargetSteps)
		r.drafted += int(res.Spec.Drafted)
		r.accepted += int(res.Spec.Accepted)
		if e.lastSlot().spec != nil && cfg.Enabled() {
			r.filtered += e.lastSlot().spec.Stats().Filtered // since the request's Begin
		}
		for i := 0; i+len("<tool_call>") <= len(text); i++ {
			if text[i:i+len("<tool_call>")] == "<tool_call>" {
				r.calls++
			}
		}
	}
	return r
}

// On a model that really writes tool calls, greedy output under the call
// grammar is the same without drafting, with filtered tree drafting and
// with unfiltered tree drafting; filtering never verifies a draft the
// grammar forbids, so it accepts at least as large a share.
func TestGrammarDraftingOnAgentModel(t *testing.T) {
	e, err := Load(agentModel, Options{Threads: 2, KVType: tensor.F16, ContextLen: 2048, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompts := agentPrompts(t)
	tree := speculative.Config{Mode: "tree", Steps: 4, TopK: 4, VerifyNodes: 16, Drafters: []string{"mtp"}}
	plain := runAgent(t, e, prompts, speculative.Config{}, false, 96)
	filtered := runAgent(t, e, prompts, tree, false, 96)
	unfiltered := runAgent(t, e, prompts, tree, true, 96)
	for i := range prompts {
		if !slices.Equal(filtered.tokens[i], plain.tokens[i]) || !slices.Equal(unfiltered.tokens[i], plain.tokens[i]) {
			t.Fatalf("prompt %d: drafting changed the greedy output under the grammar", i)
		}
	}
	if plain.calls == 0 {
		t.Fatal("the model wrote no tool call: the grammar constrained nothing")
	}
	if unfiltered.filtered != 0 || filtered.filtered == 0 {
		t.Errorf("filtered nodes: %d with filtering, %d without", filtered.filtered, unfiltered.filtered)
	}
	rate := func(r agentRun) float64 { return float64(r.accepted) / float64(max(r.drafted, 1)) }
	t.Logf("%d calls; filtered: %d steps, %d/%d drafts accepted (%.3f), %d nodes filtered; unfiltered: %d steps, %d/%d (%.3f)",
		plain.calls, filtered.steps, filtered.accepted, filtered.drafted, rate(filtered), filtered.filtered,
		unfiltered.steps, unfiltered.accepted, unfiltered.drafted, rate(unfiltered))
	if rate(filtered) < rate(unfiltered) {
		t.Errorf("filtering lowered the acceptance rate: %.3f < %.3f", rate(filtered), rate(unfiltered))
	}
}

// lastSlot is the slot a lone client's next request takes (the last one
// used).
func (e *Engine) lastSlot() *seq {
	idle := e.seqs.Idle()
	return e.slots[idle[len(idle)-1].Index]
}
