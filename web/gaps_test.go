package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// The chat contract's gaps found by trying the server as a new user
// (issue 32), on the trained qwen35-agent model.

const agentModelPath = "../testdata/qwen35-agent/qwen35-agent-f16.gguf"

func agentServer(t *testing.T) *testServer {
	return startServer(t, loadEngine(t, agentModelPath, 0), 4, Options{})
}

// Gap 2: a forced call cut by max_tokens never leaves its markup in the
// content (the cut call is dropped), streamed or not.
func TestCutCallLeavesNoMarkup(t *testing.T) {
	ts := agentServer(t)
	c := ts.client()
	var params map[string]any
	json.Unmarshal([]byte(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`), &params)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: params})}
	for _, maxTokens := range []int64{6, 16, 40} {
		for seed := range int64(10) {
			p := userChat("What is the weather in Paris?")
			p.Tools = tools
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
			p.MaxTokens = openai.Int(maxTokens)
			p.Temperature = openai.Float(0.8)
			p.Seed = openai.Int(seed)
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			content, finish := streamChatContent(t, c, p)
			for _, text := range []string{got.Choices[0].Message.Content, content} {
				if strings.Contains(text, "<tool_call>") || strings.Contains(text, `{"name"`) {
					t.Errorf("max_tokens %d seed %d: content %q holds call markup (finish %s / %s)", maxTokens, seed, text, got.Choices[0].FinishReason, finish)
				}
			}
		}
	}
}

// Gap 1: while a forced call is pending the turn cannot end: a model that
// ends its turn inside its reasoning (never closing </think>) still gets
// its reasoning closed and the call forced after it; only the token limit
// ends such a turn without a call ("length").
func TestForcedCallAfterUnclosedReasoning(t *testing.T) {
	ts := agentServer(t)
	c := ts.client()
	var params map[string]any
	json.Unmarshal([]byte(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`), &params)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "bash",
		Description: openai.String("Run a shell command"), Parameters: params})}
	choices := []openai.ChatCompletionToolChoiceOptionUnionParam{
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "bash"}),
		{OfAuto: openai.String("required")},
	}
	for i, choice := range choices {
		for seed := range int64(12) {
			p := openai.ChatCompletionNewParams{Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("You are a coding agent. Use the bash tool to inspect the repository."),
				openai.UserMessage("Find the failing test in this repository and fix it."),
			}}
			p.Tools = tools
			p.ToolChoice = choice
			p.MaxTokens = openai.Int(300)
			p.Temperature = openai.Float(0.8)
			p.Seed = openai.Int(seed)
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			ch := got.Choices[0]
			if ch.FinishReason == "length" {
				continue
			}
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 {
				t.Errorf("choice %d seed %d: finish %q with %d calls; content %q", i, seed, ch.FinishReason, len(ch.Message.ToolCalls), ch.Message.Content)
			}
		}
	}
}
