package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The structured-output paths of the official client against the real
// engine: a synthetic qwen35 with random weights (so nothing but the
// grammar makes its output well-formed) and the Qwen3 tokenizer and
// template. Outputs are judged by santhosh-tekuri/jsonschema, not by the
// grammar engine that made them.

// weatherSchema bounds its strings and arrays so that any model finishes
// within max_tokens.
const weatherSchema = `{"type": "object", "properties": {
	"city": {"type": "string", "maxLength": 8},
	"unit": {"enum": ["celsius", "fahrenheit"]},
	"windy": {"type": "boolean"},
	"tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
	"where": {"type": "object", "properties": {"lat": {"enum": [1, 2.5]}, "note": {"type": ["string", "null"], "maxLength": 3}},
		"required": ["lat", "note"], "additionalProperties": false}},
	"required": ["city", "unit", "windy", "tags", "where"], "additionalProperties": false}`

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validates(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%q does not parse: %v", text, err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%q does not validate: %v", text, err)
	}
}

func TestStructuredOutputs(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	judge := compileSchema(t, weatherSchema)
	var schema map[string]any
	json.Unmarshal([]byte(weatherSchema), &schema)
	for seed := range int64(4) {
		params := userChat("What is the weather in Paris?")
		params.MaxTokens = openai.Int(400)
		params.Temperature = openai.Float(1)
		params.Seed = openai.Int(seed)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: schema, Strict: openai.Bool(true)}}}
		got, err := c.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].FinishReason != "stop" {
			t.Fatalf("seed %d: finish %q: %q", seed, got.Choices[0].FinishReason, got.Choices[0].Message.Content)
		}
		validates(t, judge, got.Choices[0].Message.Content)

		// streamed, reassembled by the client: the same answer
		s := c.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Choices[0].Message.Content != got.Choices[0].Message.Content {
			t.Fatalf("seed %d: streamed %q, whole %q", seed, acc.Choices[0].Message.Content, got.Choices[0].Message.Content)
		}
	}

	// json_object: any object
	params := userChat("Answer in JSON.")
	params.MaxTokens = openai.Int(60)
	params.Seed = openai.Int(3)
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	got, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	text := got.Choices[0].Message.Content
	if got.Choices[0].FinishReason == "stop" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatalf("json_object answer %q: %v", text, err)
		}
	} else if !strings.HasPrefix(strings.TrimLeft(text, " \n\t"), "{") {
		t.Fatalf("json_object answer cut by max_tokens does not start an object: %q", text)
	}
}

// tool_choice named and required: every call has a known name and
// arguments valid against its tool's parameters, even from random weights.
func TestToolChoiceEnforcedByGrammar(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	params := map[string]string{
		"get_weather": `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 6}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}`,
		"ping":        `{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}`,
	}
	var tools []openai.ChatCompletionToolUnionParam
	for _, name := range []string{"get_weather", "ping"} {
		var p map[string]any
		json.Unmarshal([]byte(params[name]), &p)
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: p}))
	}
	judges := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, params["get_weather"]), "ping": compileSchema(t, params["ping"])}
	choices := []openai.ChatCompletionToolChoiceOptionUnionParam{
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		{OfAuto: openai.String("required")},
	}
	for i, choice := range choices {
		for seed := range int64(3) {
			p := userChat("Weather in Oslo?")
			p.Tools = tools
			p.ToolChoice = choice
			p.MaxTokens = openai.Int(200)
			p.Temperature = openai.Float(1)
			p.Seed = openai.Int(seed)
			if i == 1 {
				p.ParallelToolCalls = openai.Bool(false)
			}
			got, err := c.Chat.Completions.New(context.Background(), p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
			if err != nil {
				t.Fatal(err)
			}
			m := got.Choices[0].Message
			if got.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) == 0 {
				t.Fatalf("choice %d seed %d: finish %q, %d calls, content %q", i, seed, got.Choices[0].FinishReason, len(m.ToolCalls), m.Content)
			}
			for _, call := range m.ToolCalls {
				judge := judges[call.Function.Name]
				if judge == nil || (i == 0 && call.Function.Name != "get_weather") {
					t.Fatalf("choice %d seed %d: a call to %q", i, seed, call.Function.Name)
				}
				validates(t, judge, call.Function.Arguments)
			}
		}
	}
}

// logprobs on chat, streamed and not: one entry per output token, the
// chosen token first among its alternatives at temperature 0, the stream's
// entries equal to the whole answer's.
func TestChatLogprobs(t *testing.T) {
	ts := qwen35Server(t, 4, Options{})
	c := ts.client()
	p := userChat("Count to five.")
	p.MaxTokens = openai.Int(12)
	p.Temperature = openai.Float(0)
	p.Logprobs = openai.Bool(true)
	p.TopLogprobs = openai.Int(3)
	got, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	lp := got.Choices[0].Logprobs.Content
	if int64(len(lp)) != got.Usage.CompletionTokens {
		t.Fatalf("%d logprob entries for %d tokens", len(lp), got.Usage.CompletionTokens)
	}
	var text []byte
	for i, e := range lp {
		if len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob || e.Logprob > 0 {
			t.Fatalf("entry %d: %+v", i, e)
		}
		for _, b := range e.Bytes {
			text = append(text, byte(b))
		}
	}
	if string(text) != got.Choices[0].Message.Content {
		t.Fatalf("the entries' bytes spell %q, the content is %q", text, got.Choices[0].Message.Content)
	}
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	var streamed []openai.ChatCompletionTokenLogprob
	for s.Next() {
		for _, ch := range s.Current().Choices {
			streamed = append(streamed, ch.Logprobs.Content...)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(streamed) != len(lp) {
		t.Fatalf("streamed %d entries, whole %d", len(streamed), len(lp))
	}
	for i := range lp {
		if streamed[i].Token != lp[i].Token || streamed[i].Logprob != lp[i].Logprob {
			t.Fatalf("entry %d: streamed %+v, whole %+v", i, streamed[i], lp[i])
		}
	}
}

// llama.cpp's grammar field on /v1/completions, penalties, and the errors
// that name what is wrong.
func TestGrammarFieldPenaltiesAndErrors(t *testing.T) {
	ts := storiesServer(t, 4, Options{})
	url := ts.URL + "/v1/completions"
	code, _, body := post(t, url, `{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 1, "seed": 2,
		"grammar": "root ::= \" \" [A-Z] [a-z]{1,8} (\" \" [a-z]{1,8}){0,3} \".\"\n"}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var res struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	json.Unmarshal(body, &res)
	if !regexp.MustCompile(`^ [A-Z][a-z]{1,8}( [a-z]{1,8}){0,3}\.$`).MatchString(res.Choices[0].Text) || res.Choices[0].FinishReason != "stop" {
		t.Fatalf("grammar output %q (%s)", res.Choices[0].Text, res.Choices[0].FinishReason)
	}

	greedy := func(extra string) string {
		code, _, body := post(t, url, `{"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0`+extra+`}`)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", extra, code, body)
		}
		json.Unmarshal(body, &res)
		return res.Choices[0].Text
	}
	plain := greedy("")
	for _, extra := range []string{`, "frequency_penalty": 1.5`, `, "presence_penalty": 2`, `, "repetition_penalty": 1.5`, `, "logit_bias": {"` + firstTokenID(t, ts, plain) + `": -100}`} {
		if got := greedy(extra); got == plain {
			t.Errorf("%s changed nothing: %q", extra, got)
		}
	}

	for _, tc := range []struct{ body, param, says string }{
		{`{"prompt": "a", "grammar": "root ::= \"a\"\nfoo ::= (\"b\"\n"}`, "grammar", "line 2"},
		{`{"prompt": "a", "grammar": "root ::= undefined-rule\n"}`, "grammar", "undefined-rule"},
		{`{"prompt": "a", "json_schema": {"type": "object", "patternProperties": {"x": {}}}}`, "json_schema", "patternProperties"},
		{`{"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}}`, "response_format.json_schema.schema", "/type"},
		{`{"prompt": "a", "response_format": {"type": "yaml"}}`, "response_format", "yaml"},
		{`{"prompt": "a", "grammar": "root ::= \"a\"", "json_schema": {"type": "object"}}`, "grammar", "both"},
		{`{"prompt": "a", "logit_bias": {"x": 1}}`, "logit_bias", "token ids"},
		{`{"prompt": "a", "logit_bias": {"999999": 1}}`, "logit_bias", "vocabulary"},
		{`{"prompt": "a", "presence_penalty": 3}`, "presence_penalty", "[-2, 2]"},
		{`{"prompt": "a", "logprobs": 21}`, "logprobs", "[0, 20]"},
	} {
		code, _, body := post(t, url, tc.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
			} `json:"error"`
		}
		json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error.Message, tc.says) || (tc.param != "" && e.Error.Param != tc.param) {
			t.Errorf("%s: %d %s; want 400 naming %q (param %q)", tc.body, code, body, tc.says, tc.param)
		}
	}
}

// firstTokenID is the id of the first token of text, as a string.
func firstTokenID(t *testing.T, ts *testServer, text string) string {
	t.Helper()
	ids := ts.eng.Tokenizer().Encode(text, false, false)
	if len(ids) == 0 {
		t.Fatal("no tokens")
	}
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(ids[0])
	return strings.TrimSpace(b.String())
}
