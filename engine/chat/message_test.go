package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRequestUnmarshal(t *testing.T) {
	body := `{"model": "m", "stream": true,
		"messages": [
			{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
			{"role": "user", "content": "hi"},
			{"role": "assistant", "content": null, "reasoning_content": "r",
			 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
			                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"y": [true]}}}]},
			{"role": "tool", "tool_call_id": "c1", "content": "out"}],
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}],
		"chat_template_kwargs": {"enable_thinking": false, "opts": {"z": 1.0, "a": 2}}}`
	var req Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if err := Validate(req); err != nil {
		t.Fatal(err)
	}
	if !req.AddGenerationPrompt {
		t.Error("add_generation_prompt should default to true")
	}
	m := req.Messages
	if got := m[0].Content.String(); got != "a\nb" {
		t.Errorf("parts joined: %q", got)
	}
	if !m[2].Content.Null || m[2].Content.String() != "" || *m[2].ReasoningContent != "r" {
		t.Errorf("assistant: %+v", m[2])
	}
	if m[2].ToolCalls[0].Function.Arguments != `{"x": 1}` || m[2].ToolCalls[1].Function.Arguments != `{"y": [true]}` {
		t.Errorf("arguments: %+v", m[2].ToolCalls)
	}
	if string(req.Tools[0]) != `{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}` {
		t.Errorf("tool kept raw: %s", req.Tools[0])
	}
	tpl, err := NewTemplate(`{{ opts | tojson }} {{ enable_thinking }} {{ tools[0].function.parameters | tojson }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	// Python: json.dumps(json.loads(...)) keeps 1.0 a float and the key order.
	if want := `{"z": 1.0, "a": 2} False {"z": 1, "a": 2}`; got != want {
		t.Errorf("kwargs render %q, want %q", got, want)
	}
	// Content round-trips in the form it came.
	out, err := json.Marshal(m[:3])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, `"content":"hi"`, `"content":null`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("marshal lacks %s: %s", want, out)
		}
	}
}

func TestValidate(t *testing.T) {
	user := Message{Role: "user", Content: TextContent("hi")}
	call := func(id, args string) Message {
		return Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: "f", Arguments: args}}}}
	}
	cases := []struct {
		name string
		req  Request
		want string // "" for valid
	}{
		{"ok", Request{Messages: []Message{user, call("c1", `{"a": 1}`), {Role: "tool", ToolCallID: "c1", Content: TextContent("r")}}}, ""},
		{"empty arguments ok", Request{Messages: []Message{user, call("c1", "")}}, ""},
		{"no messages", Request{}, "messages: empty"},
		{"unknown role", Request{Messages: []Message{{Role: "robot"}}}, `messages[0].role: unknown role "robot"`},
		{"bad arguments", Request{Messages: []Message{user, call("c1", `{"a": `)}}, "messages[1].tool_calls[0].function.arguments"},
		{"arguments not object", Request{Messages: []Message{user, call("c1", `[1]`)}}, "not a JSON object"},
		{"orphan tool result", Request{Messages: []Message{user, {Role: "tool", ToolCallID: "zz", Content: TextContent("r")}}}, `messages[1].tool_call_id: "zz"`},
		{"tool calls on user", Request{Messages: []Message{{Role: "user", ToolCalls: call("c", "{}").ToolCalls}}}, "only assistant messages"},
		{"image part", Request{Messages: []Message{{Role: "user", Content: Content{Parts: []ContentPart{{Type: "image_url"}}}}}}, `messages[0].content[0].type: "image_url"`},
		{"tool without name", Request{Messages: []Message{user}, Tools: []json.RawMessage{json.RawMessage(`{"type": "function", "function": {}}`)}}, "tools[0].function.name: missing"},
		{"tool not json", Request{Messages: []Message{user}, Tools: []json.RawMessage{json.RawMessage(`{`)}}, "tools[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.req)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseTokenizerConfig(t *testing.T) {
	cases := []struct {
		name, json string
		want       TokenizerConfig
	}{
		{"strings", `{"chat_template": "T", "bos_token": "<s>", "eos_token": "</s>"}`, TokenizerConfig{"T", "<s>", "</s>"}},
		{"added tokens and null", `{"chat_template": "T", "bos_token": null, "eos_token": {"content": "<|im_end|>", "lstrip": false}}`, TokenizerConfig{"T", "", "<|im_end|>"}},
		{"named templates", `{"chat_template": [{"name": "tool_use", "template": "A"}, {"name": "default", "template": "B"}]}`, TokenizerConfig{ChatTemplate: "B"}},
		{"no template", `{"eos_token": "e"}`, TokenizerConfig{EOS: "e"}},
	}
	for _, c := range cases {
		got, err := ParseTokenizerConfig([]byte(c.json))
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := ParseTokenizerConfig([]byte(`{"chat_template": 5}`)); err == nil {
		t.Error("accepted a numeric chat_template")
	}
}

func TestChatMLDefault(t *testing.T) {
	tpl, err := NewTemplate("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Request{Messages: []Message{{Role: "system", Content: TextContent("S")}, {Role: "user", Content: TextContent("U")}}, AddGenerationPrompt: true})
	want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Errorf("ChatML: %q, %v", got, err)
	}
}

// TestRenderConcurrent: one Template serves many renders at once.
func TestRenderConcurrent(t *testing.T) {
	tpl := loadTemplate(t, "qwen3")
	req := loadGoldenRequest(t, "testdata/render/edge_tool_arg_types.request.json")
	want, err := tpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			for j := 0; j < 10; j++ {
				got, err := tpl.Render(req)
				if err == nil && got != want {
					err = errString("concurrent render differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzToJSON: whatever JSON a client sends, tojson writes JSON that means
// the same thing.
func FuzzToJSON(f *testing.F) {
	f.Add(`{"b": [1, 2.0, -0.0, 1e400, "\u00e9\n\u2028"], "a": {"": null}}`)
	f.Add(`[123456789012345678901234567890, 5e-324, true]`)
	f.Fuzz(func(t *testing.T, in string) {
		var want any
		if json.Unmarshal([]byte(in), &want) != nil {
			return
		}
		v, err := decodeJSON([]byte(in))
		if err != nil {
			t.Fatalf("decodeJSON rejected valid JSON %q: %v", in, err)
		}
		out, err := pyDumps(v, defaultDumpOptions())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "Infinity") {
			return // Python's extension for 1e400; not JSON
		}
		var got any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("tojson wrote invalid JSON %q from %q: %v", out, in, err)
		}
		if !reflect.DeepEqual(want, got) { // == on floats: -0 is 0, as Python's int("-0")
			t.Fatalf("%q -> %q changes meaning", in, out)
		}
	})
}
