package web

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

// A model that reasons writes its <think> block freely; response_format
// holds from after "</think>": the engine's first run has no constraint
// and stops at "</think>", the second continues after the template's
// "\n\n" under the grammar. With thinking off the grammar holds at once.
func TestResponseFormatAfterReasoning(t *testing.T) {
	tok := qwen3Tokenizer(t)
	for _, thinking := range []bool{true, false} {
		turns := []string{"<think>\nThe user wants JSON.\n</think>\n\n", `{"a": 1}`}
		if !thinking {
			turns = turns[1:]
		}
		src := &scriptedSource{tok: tok, turns: turns}
		ts := scriptedServer(t, qwenTemplate(t, "qwen3"), src)
		body := map[string]any{"model": "test-model", "messages": []any{map[string]any{"role": "user", "content": "Answer in JSON."}},
			"response_format": map[string]any{"type": "json_object"}}
		if !thinking {
			body["chat_template_kwargs"] = map[string]any{"enable_thinking": false}
		}
		data, _ := json.Marshal(body)
		c := ts.client()
		got, err := c.Chat.Completions.New(context.Background(), userChat(""), option.WithRequestBody("application/json", data))
		if err != nil {
			t.Fatal(err)
		}
		m := got.Choices[0].Message
		var rc struct {
			ReasoningContent string `json:"reasoning_content"`
		}
		json.Unmarshal([]byte(m.RawJSON()), &rc)
		if m.Content != `{"a": 1}` {
			t.Fatalf("thinking %v: content %q", thinking, m.Content)
		}
		if !thinking {
			if len(src.calls) != 1 || src.calls[0].Constraint == nil {
				t.Fatalf("thinking off: %d engine runs, constraint %v", len(src.calls), src.calls[0].Constraint)
			}
			continue
		}
		if rc.ReasoningContent != "The user wants JSON." {
			t.Fatalf("reasoning %q", rc.ReasoningContent)
		}
		if len(src.calls) != 2 || src.calls[0].Constraint != nil || src.calls[1].Constraint == nil {
			t.Fatalf("%d engine runs; want a free reasoning run, then a constrained one", len(src.calls))
		}
		want := append(append(slices.Clone(src.calls[0].Prompt), src.res[0].Tokens...), tok.Encode("\n\n", false, true)...)
		if !slices.Equal(src.calls[1].Prompt, want) {
			t.Fatalf("the constrained run's prompt ends %q", tok.Decode(src.calls[1].Prompt[len(src.calls[0].Prompt):]))
		}
	}
	// response_format with a forced tool call: a 400.
	src := &scriptedSource{tok: tok, turns: []string{"x"}}
	ts := scriptedServer(t, qwenTemplate(t, "qwen3"), src)
	code, _, b := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[`+bashTool+`],"tool_choice":"required","response_format":{"type":"json_object"}}`)
	if code != 400 {
		t.Fatalf("response_format with tool_choice required: %d %s", code, b)
	}
}
