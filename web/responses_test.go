package web

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
)

// OpenAI's Go SDK's Responses client against a real server over the
// synthetic qwen35 model, as Codex talks to it.

func weatherFunction(t *testing.T) responses.ToolUnionParam {
	var s map[string]any
	if err := json.Unmarshal([]byte(anthWeatherSchema), &s); err != nil {
		t.Fatal(err)
	}
	tool := responses.ToolParamOfFunction("get_weather", s, true)
	tool.OfFunction.Description = openai.String("The weather in a city")
	return tool
}

func TestResponsesTextMatchesEngine(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	got, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "test-model", MaxOutputTokens: openai.Int(12), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Write a Go function.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, text := referenceGenerate(t, ts, []chat.Message{{Role: "user", Content: chat.TextContent("Write a Go function.")}},
		engine.Request{MaxTokens: 12})
	if got.OutputText() != text {
		t.Errorf("output_text %q, engine %q (%s)", got.OutputText(), text, got.RawJSON())
	}
	u := got.Usage
	if int(u.InputTokens) != len(res.Prompt) || int(u.OutputTokens) != len(res.Tokens) || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		!u.InputTokensDetails.JSON.CachedTokens.Valid() || !u.OutputTokensDetails.JSON.ReasoningTokens.Valid() {
		t.Errorf("usage %s, want %d input and %d output tokens", u.RawJSON(), len(res.Prompt), len(res.Tokens))
	}
	wantStatus := responses.ResponseStatusCompleted
	if res.FinishReason == "length" {
		wantStatus = responses.ResponseStatusIncomplete
		if got.IncompleteDetails.Reason != "max_output_tokens" {
			t.Errorf("incomplete_details %s", got.IncompleteDetails.RawJSON())
		}
	}
	if got.Status != wantStatus || got.Object != "response" || !strings.HasPrefix(got.ID, "resp_") {
		t.Errorf("status %q object %q id %q", got.Status, got.Object, got.ID)
	}
}

// responsesEventOrder checks a stream: sequence numbers 0, 1, 2, ...;
// response.created and response.in_progress first; each output item's
// events between its output_item.added and output_item.done, items one
// after another; a terminal event last.
func responsesEventOrder(t *testing.T, evs []responses.ResponseStreamEventUnion) {
	t.Helper()
	open := int64(-1) // the open item's output_index
	next := int64(0)  // the next item's
	for i, ev := range evs {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d (%s) has sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
		switch {
		case i == 0 && ev.Type != "response.created", i == 1 && ev.Type != "response.in_progress":
			t.Fatalf("event %d is %s", i, ev.Type)
		case i == len(evs)-1:
			if ev.Type != "response.completed" && ev.Type != "response.incomplete" {
				t.Fatalf("the last event is %s", ev.Type)
			}
			if open >= 0 {
				t.Fatalf("item %d never done", open)
			}
		case ev.Type == "response.output_item.added":
			if open >= 0 || ev.OutputIndex != next {
				t.Fatalf("event %d adds item %d while %d is open (next %d)", i, ev.OutputIndex, open, next)
			}
			open = ev.OutputIndex
		case ev.Type == "response.output_item.done":
			if ev.OutputIndex != open {
				t.Fatalf("event %d ends item %d, open %d", i, ev.OutputIndex, open)
			}
			open, next = -1, next+1
		case i > 1:
			if open < 0 || ev.OutputIndex != open {
				t.Fatalf("event %d (%s) for item %d, open %d", i, ev.Type, ev.OutputIndex, open)
			}
		}
	}
}

// Streamed and whole responses agree at temperature 0, with and without
// a forced call.
func TestResponsesStreamEqualsWhole(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	for _, forced := range []bool{false, true} {
		p := responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(60), Temperature: openai.Float(0),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")}}
		if forced {
			p.Tools = []responses.ToolUnionParam{weatherFunction(t)}
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}
			p.Reasoning.Effort = "none"
		}
		whole, err := c.Responses.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		stream := c.Responses.NewStreaming(context.Background(), p)
		var evs []responses.ResponseStreamEventUnion
		var text, args strings.Builder
		for stream.Next() {
			ev := stream.Current()
			evs = append(evs, ev)
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		responsesEventOrder(t, evs)
		final := evs[len(evs)-1].Response
		if text.String() != whole.OutputText() || final.OutputText() != whole.OutputText() {
			t.Errorf("forced %v: streamed text %q (final %q), whole %q", forced, text.String(), final.OutputText(), whole.OutputText())
		}
		if len(final.Output) != len(whole.Output) {
			t.Fatalf("forced %v: %d streamed items, %d whole", forced, len(final.Output), len(whole.Output))
		}
		for i := range whole.Output {
			a, b := final.Output[i], whole.Output[i]
			if a.Type != b.Type || a.Name != b.Name || !sameJSON(json.RawMessage(a.Arguments.OfString), json.RawMessage(b.Arguments.OfString)) {
				t.Errorf("forced %v item %d: streamed %s, whole %s", forced, i, a.RawJSON(), b.RawJSON())
			}
		}
		if forced && (args.Len() == 0 || !sameJSON(json.RawMessage(args.String()), json.RawMessage(whole.Output[len(whole.Output)-1].Arguments.OfString))) {
			t.Errorf("streamed arguments %q, whole %s", args.String(), whole.RawJSON())
		}
		if final.Usage.OutputTokens != whole.Usage.OutputTokens || final.Usage.InputTokens != whole.Usage.InputTokens || final.Status != whole.Status {
			t.Errorf("forced %v: streamed %s %s, whole %s %s", forced, final.Status, final.Usage.RawJSON(), whole.Status, whole.Usage.RawJSON())
		}
	}
}

// A forced call, its output sent back with previous_response_id only: the
// conversation goes on from the stored response, its second turn served
// in part from the prefix cache; GET and DELETE by id; an unknown id is a
// 400 naming it.
func TestResponsesPreviousResponseID(t *testing.T) {
	ts := cachedQwen35Server(t)
	c := ts.client()
	judge := compileSchema(t, anthWeatherSchema)
	first, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(300),
		Temperature: openai.Float(0.8), Instructions: openai.String(strings.Repeat("You check the weather for the user, city by city. ", 60)),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")},
		Tools: []responses.ToolUnionParam{weatherFunction(t)}, ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}})
	if err != nil {
		t.Fatal(err)
	}
	var call *responses.ResponseOutputItemUnion
	for i := range first.Output {
		if first.Output[i].Type == "function_call" {
			call = &first.Output[i]
		}
	}
	if call == nil || first.Status != responses.ResponseStatusCompleted {
		t.Fatalf("no function_call (status %s): %s", first.Status, first.RawJSON())
	}
	validates(t, judge, call.Arguments.OfString)
	out := responses.ResponseInputItemParamOfFunctionCallOutput("12 C, rain")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	second, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(8),
		Instructions:       openai.String(strings.Repeat("You check the weather for the user, city by city. ", 60)),
		PreviousResponseID: openai.String(first.ID), Tools: []responses.ToolUnionParam{weatherFunction(t)},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	if err != nil {
		t.Fatal(err)
	}
	if second.Usage.InputTokensDetails.CachedTokens == 0 || second.Usage.InputTokens <= first.Usage.InputTokens {
		t.Errorf("second turn usage %s (first %s): not continued from the stored response, or nothing from the cache", second.Usage.RawJSON(), first.Usage.RawJSON())
	}
	got, err := c.Responses.Get(context.Background(), first.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != first.ID || len(got.Output) != len(first.Output) {
		t.Fatalf("GET: %v %+v", err, got)
	}
	if err := c.Responses.Delete(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(4),
		PreviousResponseID: openai.String(first.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and?")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "previous_response_id" || !strings.Contains(ae.Message, first.ID) {
		t.Fatalf("deleted previous_response_id: %v", err)
	}
	if _, err := c.Responses.Get(context.Background(), first.ID, responses.ResponseGetParams{}); !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Fatalf("GET after DELETE: %v", err)
	}
}

// text.format json_schema holds the answer to the schema; errors are in
// OpenAI's shape, naming the field.
func TestResponsesJSONSchemaAndErrors(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	var schema map[string]any
	json.Unmarshal([]byte(anthWeatherSchema), &schema)
	for seed := range 2 {
		got, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(120),
			Temperature: openai.Float(1), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo as JSON")},
			Reasoning: shared.ReasoningParam{Effort: "none"},
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "weather", Schema: schema}}}},
			option.WithJSONSet("seed", seed))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != responses.ResponseStatusCompleted {
			t.Fatalf("status %s: %s", got.Status, got.RawJSON())
		}
		validates(t, compileSchema(t, anthWeatherSchema), got.OutputText())
	}
	for _, tc := range []struct {
		name, param string
		opt         option.RequestOption
	}{
		{"temperature", "temperature", option.WithJSONSet("temperature", 3)},
		{"item type", "input[0].type", option.WithJSONSet("input", []any{map[string]any{"type": "computer_call_output", "call_id": "x"}})},
		{"tool type", "tools[0].type", option.WithJSONSet("tools", []any{map[string]any{"type": "local_shell"}})},
		{"image", "input[0].content[0]", option.WithJSONSet("input", []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "http://x/y.png"}}}})},
	} {
		_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "test-model", MaxOutputTokens: openai.Int(4),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, tc.opt)
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != tc.param || ae.Type != "invalid_request_error" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
