package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Anthropic's own Go SDK against a real server over the synthetic qwen35
// model (Qwen3 tokenizer and template), as Claude Code talks to it.

func (ts *testServer) anthropic(opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0),
	}, opts...)...)
}

const anthWeatherSchema = `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}`

func weatherTool(t *testing.T) anthropic.ToolUnionParam {
	var s map[string]any
	if err := json.Unmarshal([]byte(anthWeatherSchema), &s); err != nil {
		t.Fatal(err)
	}
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: s["properties"], Required: []string{"city", "unit"},
			ExtraFields: map[string]any{"additionalProperties": false}}}}
}

// The text of a greedy answer is the engine's own output on the prompt the
// template renders, and usage counts its tokens (the engine's run is the
// reference, not our own answer).
func TestAnthropicTextMatchesEngine(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.anthropic()
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "test-model", MaxTokens: 12,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Write a Go function."))},
	}, temperature(0))
	if err != nil {
		t.Fatal(err)
	}
	res, text := referenceGenerate(t, ts, []chat.Message{{Role: "user", Content: chat.TextContent("Write a Go function.")}},
		engine.Request{MaxTokens: 12})
	var got strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "thinking":
			got.WriteString("<think>" + b.Thinking + "</think>")
		case "text":
			got.WriteString(b.Text)
		default:
			t.Fatalf("block %q", b.Type)
		}
	}
	if got.String() != text {
		t.Errorf("text %q, engine %q", got.String(), text)
	}
	u := msg.Usage
	if int(u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens) != len(res.Prompt) || int(u.OutputTokens) != len(res.Tokens) {
		t.Errorf("usage %s, want %d prompt and %d output tokens", u.RawJSON(), len(res.Prompt), len(res.Tokens))
	}
	wantStop := anthropic.StopReasonEndTurn
	if res.FinishReason == "length" {
		wantStop = anthropic.StopReasonMaxTokens
	}
	if msg.StopReason != wantStop || msg.Type != "message" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("stop_reason %q type %q role %q id %q", msg.StopReason, msg.Type, msg.Role, msg.ID)
	}
	// A stop sequence from the middle of the engine's text ends the answer
	// before it, and is named.
	runes := []rune(text)
	if len(runes) < 6 {
		t.Fatalf("the engine's text %q is too short for a stop sequence", text)
	}
	stop := string(runes[len(runes)/2 : len(runes)/2+2])
	cut, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "test-model", MaxTokens: 12, StopSequences: []string{stop},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Write a Go function."))},
	}, temperature(0))
	if err != nil {
		t.Fatal(err)
	}
	want := text[:strings.Index(text, stop)]
	got.Reset()
	for _, b := range cut.Content {
		got.WriteString(b.Text)
	}
	if cut.StopReason != anthropic.StopReasonStopSequence || cut.StopSequence != stop || got.String() != want {
		t.Errorf("stop sequence %q: stop_reason %q stop_sequence %q text %q, want %q", stop, cut.StopReason, cut.StopSequence, got.String(), want)
	}
}

// anthropicEventOrder checks a stream's event names against the documented
// grammar: message_start, ping*, (content_block_start
// content_block_delta* content_block_stop)*, message_delta, message_stop.
func anthropicEventOrder(t *testing.T, names []string) {
	t.Helper()
	state := "start"
	for i, n := range names {
		ok := false
		switch state {
		case "start":
			ok, state = n == "message_start", "between"
		case "between":
			switch n {
			case "ping":
				ok = true
			case "content_block_start":
				ok, state = true, "block"
			case "message_delta":
				ok, state = true, "delta"
			}
		case "block":
			switch n {
			case "content_block_delta", "ping":
				ok = true
			case "content_block_stop":
				ok, state = true, "between"
			}
		case "delta":
			ok, state = n == "message_stop", "end"
		}
		if !ok {
			t.Fatalf("event %d %q out of order (state %s): %v", i, n, state, names)
		}
	}
	if state != "end" {
		t.Fatalf("stream ended in state %s: %v", state, names)
	}
}

// Streamed and whole answers agree at temperature 0 (blocks and usage),
// with a forced tool call, and the stream's events come in order.
func TestAnthropicStreamEqualsWhole(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.anthropic()
	for _, forced := range []bool{false, true} {
		p := anthropic.MessageNewParams{
			Model: "test-model", MaxTokens: 60,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?"))},
		}
		if forced {
			p.Tools = []anthropic.ToolUnionParam{weatherTool(t)}
			p.ToolChoice = anthropic.ToolChoiceParamOfTool("get_weather")
			p.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
		}
		whole, err := c.Messages.New(context.Background(), p, temperature(0))
		if err != nil {
			t.Fatal(err)
		}
		stream := c.Messages.NewStreaming(context.Background(), p, temperature(0))
		var acc anthropic.Message
		var names []string
		for stream.Next() {
			ev := stream.Current()
			names = append(names, ev.Type)
			if err := acc.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		anthropicEventOrder(t, names)
		if len(acc.Content) != len(whole.Content) {
			t.Fatalf("forced %v: %d streamed blocks, %d whole: %s / %s", forced, len(acc.Content), len(whole.Content), acc.RawJSON(), whole.RawJSON())
		}
		for i := range whole.Content {
			a, b := acc.Content[i], whole.Content[i]
			if a.Type != b.Type || a.Text != b.Text || a.Thinking != b.Thinking || a.Name != b.Name || !sameJSON(a.Input, b.Input) {
				t.Errorf("forced %v block %d: streamed %s %q %q %s, whole %s %q %q %s", forced, i, a.Type, a.Text, a.Thinking, a.Input, b.Type, b.Text, b.Thinking, b.Input)
			}
		}
		if acc.StopReason != whole.StopReason || acc.Usage.OutputTokens != whole.Usage.OutputTokens ||
			acc.Usage.InputTokens+acc.Usage.CacheReadInputTokens != whole.Usage.InputTokens+whole.Usage.CacheReadInputTokens {
			t.Errorf("forced %v: streamed stop %q usage %s, whole %q %s", forced, acc.StopReason, acc.Usage.RawJSON(), whole.StopReason, whole.Usage.RawJSON())
		}
		if forced && whole.StopReason != anthropic.StopReasonToolUse {
			t.Errorf("a forced call ends with %q", whole.StopReason)
		}
	}
}

// A forced call's input is valid against its schema; sent back with its
// result, the conversation goes on, its second turn served in part from
// the prefix cache; count_tokens says what the turn is charged.
func TestAnthropicToolRoundTrip(t *testing.T) {
	ts := cachedQwen35Server(t)
	c := ts.anthropic()
	judge := compileSchema(t, anthWeatherSchema)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?"))}
	p := anthropic.MessageNewParams{Model: "test-model", MaxTokens: 300,
		System: []anthropic.TextBlockParam{{Text: strings.Repeat("You check the weather for the user, city by city. ", 60)}}, Messages: msgs,
		Tools: []anthropic.ToolUnionParam{weatherTool(t)}, ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}}
	sampling := []aoption.RequestOption{temperature(0.8), aoption.WithJSONSet("top_k", 40)}
	first, err := c.Messages.New(context.Background(), p, sampling...)
	if err != nil {
		t.Fatal(err)
	}
	var use *anthropic.ContentBlockUnion
	for i := range first.Content {
		if first.Content[i].Type == "tool_use" {
			use = &first.Content[i]
		}
	}
	if use == nil || first.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("no tool_use (stop %q): %s", first.StopReason, first.RawJSON())
	}
	validates(t, judge, string(use.Input))
	if use.Name != "get_weather" || !strings.HasPrefix(use.ID, "toolu_") {
		t.Errorf("tool_use name %q id %q", use.Name, use.ID)
	}
	p.Messages = append(msgs, first.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "12 C, rain", false)))
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	p.MaxTokens = 8
	count, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "test-model",
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System}, Messages: p.Messages,
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: p.Tools[0].OfTool}}, ToolChoice: p.ToolChoice})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Messages.New(context.Background(), p, sampling...)
	if err != nil {
		t.Fatal(err)
	}
	u := second.Usage
	if charged := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens; charged != count.InputTokens {
		t.Errorf("count_tokens %d, the turn was charged %d (%s)", count.InputTokens, charged, u.RawJSON())
	}
	if u.CacheReadInputTokens == 0 {
		t.Errorf("the second turn read nothing from the prefix cache: %s", u.RawJSON())
	}
	// Streamed, message_start splits the prompt as message_delta's final
	// usage does (the engine says what it restored from the prefix cache
	// before the first token); accumulated as the SDK does, the usage is
	// the whole answer's.
	stream := c.Messages.NewStreaming(context.Background(), p, sampling...)
	var acc anthropic.Message
	var start anthropic.Usage
	var final anthropic.MessageDeltaUsage
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			start = ev.Message.Usage
		case "message_delta":
			final = ev.Usage
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if start.InputTokens != final.InputTokens || start.CacheReadInputTokens != final.CacheReadInputTokens ||
		start.CacheCreationInputTokens != final.CacheCreationInputTokens || start.CacheReadInputTokens == 0 {
		t.Errorf("message_start's usage %s, message_delta's %s: want the same split, with the cache read", start.RawJSON(), final.RawJSON())
	}
	su := acc.Usage
	if charged := su.InputTokens + su.CacheReadInputTokens + su.CacheCreationInputTokens; charged != count.InputTokens || su.CacheReadInputTokens == 0 {
		t.Errorf("streamed: count_tokens %d, charged %d, from the cache %d (%s)", count.InputTokens, charged, su.CacheReadInputTokens, su.RawJSON())
	}
}

// Errors come in Anthropic's shape with the matching status, the key's
// and the media type's included.
func TestAnthropicErrors(t *testing.T) {
	ts := qwen35Server(t, 4, Options{APIKey: "sekrit"})
	c := ts.anthropic(aoption.WithAPIKey("sekrit"))
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	check := func(name string, err error, status int, typ, mention string) {
		t.Helper()
		var ae *anthropic.Error
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v", name, err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if e := json.Unmarshal([]byte(ae.RawJSON()), &body); e != nil {
			t.Fatalf("%s: %v: %s", name, e, ae.RawJSON())
		}
		if ae.StatusCode != status || body.Type != "error" || body.Error.Type != typ || !strings.Contains(body.Error.Message, mention) {
			t.Errorf("%s: status %d, body %s; want %d %s mentioning %q", name, ae.StatusCode, ae.RawJSON(), status, typ, mention)
		}
	}
	wrong := ts.anthropic(aoption.WithAPIKey("wrong"))
	_, err := wrong.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 4, Messages: user})
	check("key", err, 401, "authentication_error", "key")
	_, err = c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "nope", MaxTokens: 4, Messages: user})
	check("model", err, 404, "not_found_error", "nope")
	_, err = c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="))}})
	check("image", err, 400, "invalid_request_error", "messages[0].content[0]")
	_, err = c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 4, Messages: user,
		ToolChoice: anthropic.ToolChoiceParamOfTool("missing")})
	check("tool_choice", err, 400, "invalid_request_error", "missing")
	_, err = c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 4, Messages: user},
		aoption.WithJSONDel("max_tokens"))
	check("max_tokens", err, 400, "invalid_request_error", "max_tokens")

	status, _, data := post(t, ts.URL+"/v1/messages?beta=true", `{}`, "Authorization", "bearer nope")
	if status != 401 || !strings.Contains(string(data), `"authentication_error"`) || !strings.HasPrefix(string(data), `{"type":"error"`) {
		t.Errorf("wrong bearer key: %d %s", status, data)
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", "sekrit")
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Errorf("a cross-site text/plain body: %d", resp.StatusCode)
	}
}

// output_config.format holds the answer to a JSON schema.
func TestAnthropicJSONSchemaOutput(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.anthropic()
	var schema map[string]any
	json.Unmarshal([]byte(anthWeatherSchema), &schema)
	for seed := range 2 {
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 120,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo as JSON"))},
			Thinking: anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}},
			aoption.WithJSONSet("output_config", map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}}),
			aoption.WithJSONSet("top_k", 50+seed), temperature(1))
		if err != nil {
			t.Fatal(err)
		}
		var text string
		for _, b := range msg.Content {
			if b.Type == "text" {
				text += b.Text
			}
		}
		if msg.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("stop %q: %s", msg.StopReason, msg.RawJSON())
		}
		validates(t, compileSchema(t, anthWeatherSchema), text)
	}
}

// sameJSON reports whether two JSON texts hold the same value (a streamed
// call's input keeps the model's whitespace, the whole answer's is
// compacted).
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// cachedQwen35Server is qwen35Server with a prefix cache, for the tests
// of cached prompt tokens.
func cachedQwen35Server(t *testing.T) *testServer {
	t.Helper()
	path := qwen35Model(t)
	key := path + "#cache"
	if e, ok := engines.Load(key); ok {
		return startServer(t, e.(*engine.Engine), 4, Options{})
	}
	e, err := engine.Load(path, engine.Options{Threads: 1, KVType: tensor.F16, ContextLen: qwen35TestContext, MaxSequences: 1,
		CacheMaxBytes: 1 << 30, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	engines.Store(key, e)
	return startServer(t, e, 4, Options{})
}

// thinking.budget_tokens bounds the reasoning: past it the reasoning is
// closed for the model and the answer follows (on qwen35-agent, which
// reasons first).
func TestAnthropicThinkingBudget(t *testing.T) {
	ts := agentServer(t)
	c := ts.anthropic()
	tok := ts.eng.Tokenizer()
	ask := func(budget int64) (thinking string, msg *anthropic.Message) {
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "test-model", MaxTokens: 160,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Find the failing test in this repository and fix it."))},
			Thinking: anthropic.ThinkingConfigParamOfEnabled(budget)}, temperature(0))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range msg.Content {
			if b.Type == "thinking" {
				thinking += b.Thinking
			}
		}
		return thinking, msg
	}
	const budget = 6
	free, _ := ask(1000) // past max_tokens: no bound but max_tokens
	if n := len(tok.Encode(free, false, false)); n <= budget+2 {
		t.Fatalf("the model's own reasoning is %d tokens (%q): too short to show a budget of %d", n, free, budget)
	}
	bounded, msg := ask(budget)
	if n := len(tok.Encode(bounded, false, false)); n > budget {
		t.Errorf("reasoning of %d tokens (%q) with budget_tokens %d: %s", n, bounded, budget, msg.RawJSON())
	}
	if !strings.HasPrefix(free, bounded) {
		t.Errorf("the bounded reasoning %q is not the start of the model's own %q", bounded, free)
	}
	if msg.Usage.OutputTokens <= budget {
		t.Errorf("nothing followed the bounded reasoning: %s", msg.RawJSON())
	}
}

// Claude Code's mid-conversation system messages reach a template that
// refuses them (Qwen3.5's) as user messages, not as a 400.
func TestAnthropicMidConversationSystem(t *testing.T) {
	ts := qwen35Server(t, 4, Options{Template: qwenTemplate(t, "qwen35")})
	body := `{"model": "test-model", "max_tokens": 4, "system": "You are a coding agent.",
		"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "Available agent types: claude."},
		{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Go on."}]}`
	status, _, data := post(t, ts.URL+"/v1/messages?beta=true", body)
	if status != 200 {
		t.Fatalf("%d %s", status, data)
	}
	status, _, data = post(t, ts.URL+"/v1/chat/completions", `{"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "x"}]}`)
	if status != 400 || !strings.Contains(string(data), "System message must be at the beginning") {
		t.Errorf("chat completions keep the template's refusal: %d %s", status, data)
	}
}

// temperature sets the request's temperature: anthropic-sdk-go v2's
// MessageNewParams has no sampling fields (the API still takes them, and
// so does the daemon), so the SDK sends it as an extra JSON field.
func temperature(x float64) aoption.RequestOption { return aoption.WithJSONSet("temperature", x) }
