package chat

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// recordedOutput is one line of testdata/toolcalls/*.jsonl: an MLPerf
// assistant message rendered into the markup the model emits, and the
// message that was recorded.
type recordedOutput struct {
	ID               string            `json:"id"`
	Tools            []json.RawMessage `json:"tools"`
	StartInReasoning bool              `json:"start_in_reasoning"`
	Text             string            `json:"text"`
	Want             struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCalls        []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	} `json:"want"`
}

func loadRecorded(t testing.TB) map[string][]recordedOutput {
	t.Helper()
	out := map[string][]recordedOutput{}
	for _, model := range []string{"qwen3", "qwen35"} {
		f, err := os.Open("testdata/toolcalls/" + model + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var r recordedOutput
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			out[model] = append(out[model], r)
		}
		f.Close()
		if len(out[model]) == 0 {
			t.Fatalf("%s: no records", model)
		}
	}
	return out
}

func (r recordedOutput) opts() ParserOptions {
	return ParserOptions{StartInReasoning: r.StartInReasoning}
}

// TestParseRecordedToolCalls: the parser recovers every recorded message
// from its rendered form, arguments byte for byte.
func TestParseRecordedToolCalls(t *testing.T) {
	for model, recs := range loadRecorded(t) {
		for _, r := range recs {
			got := ParseOutput(r.Text, r.Tools, r.opts())
			if got.Content.Text != r.Want.Content {
				t.Errorf("%s %s: content %q, want %q", model, r.ID, got.Content.Text, r.Want.Content)
			}
			reasoning := ""
			if got.ReasoningContent != nil {
				reasoning = *got.ReasoningContent
			}
			if reasoning != r.Want.ReasoningContent {
				t.Errorf("%s %s: reasoning %q, want %q", model, r.ID, reasoning, r.Want.ReasoningContent)
			}
			if len(got.ToolCalls) != len(r.Want.ToolCalls) {
				t.Errorf("%s %s: %d tool calls, want %d: %+v", model, r.ID, len(got.ToolCalls), len(r.Want.ToolCalls), got.ToolCalls)
				continue
			}
			for i, want := range r.Want.ToolCalls {
				tc := got.ToolCalls[i]
				if tc.Function.Name != want.Name || tc.Function.Arguments != want.Arguments {
					t.Errorf("%s %s: call %d = %s(%s), want %s(%s)", model, r.ID, i, tc.Function.Name, tc.Function.Arguments, want.Name, want.Arguments)
				}
				if tc.ID != "call_"+string(rune('0'+i)) || tc.Type != "function" {
					t.Errorf("%s %s: call %d id %q type %q", model, r.ID, i, tc.ID, tc.Type)
				}
			}
		}
	}
}

// fataler is what testing.T and rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// parseSplit feeds text in the given pieces and checks the stream's own
// rules on the way: each call's first delta has its id and name and comes
// before its arguments, and calls open in index order.
func parseSplit(t fataler, text string, cuts []int, tools []json.RawMessage, opts ParserOptions) Message {
	t.Helper()
	return parseSplitSchemas(t, text, cuts, readToolSchemas(tools), opts)
}

func parseSplitSchemas(t fataler, text string, cuts []int, schemas toolSchemas, opts ParserOptions) Message {
	t.Helper()
	p := newParser(schemas, opts)
	var all []Delta
	prev := 0
	for _, c := range cuts {
		all = append(all, p.Push(text[prev:c])...)
		prev = c
	}
	all = append(all, p.Push(text[prev:])...)
	all = append(all, p.Finish()...)
	opened := 0
	validText := utf8.ValidString(text)
	for _, d := range all {
		if validText && (!utf8.ValidString(d.Content) || !utf8.ValidString(d.Reasoning) || (d.ToolCall != nil && !utf8.ValidString(d.ToolCall.Arguments))) {
			t.Fatalf("delta cuts a UTF-8 character: %+v", d)
		}
		n := 0
		if d.Content != "" {
			n++
		}
		if d.Reasoning != "" {
			n++
		}
		if d.ToolCall != nil {
			n++
			tc := d.ToolCall
			switch {
			case tc.ID != "":
				if tc.Index != opened || tc.Name == "" || tc.Arguments != "" {
					t.Fatalf("bad call header %+v (opened %d)", *tc, opened)
				}
				opened++
			case tc.Index >= opened || tc.Arguments == "" || tc.Name != "":
				t.Fatalf("bad argument delta %+v (opened %d)", *tc, opened)
			}
		}
		if n != 1 {
			t.Fatalf("delta with %d parts: %+v", n, d)
		}
	}
	return Assemble(all)
}

// TestParseEverySplit: splitting a recorded output in two at any byte gives
// the same message as parsing it whole.
func TestParseEverySplit(t *testing.T) {
	for model, recs := range loadRecorded(t) {
		for _, r := range recs {
			whole := ParseOutput(r.Text, r.Tools, r.opts())
			schemas := readToolSchemas(r.Tools)
			step := 1
			if testing.Short() && len(r.Text) > 2000 {
				step = 7
			}
			for k := 0; k <= len(r.Text); k += step {
				got := parseSplitSchemas(t, r.Text, []int{k}, schemas, r.opts())
				if !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s %s: split at %d:\n got %+v\nwant %+v", model, r.ID, k, got, whole)
				}
			}
		}
	}
}

// TestParseRandomSplits: any number of cuts, anywhere, on recorded outputs
// and on those outputs damaged (cut short, a byte changed, text added).
func TestParseRandomSplits(t *testing.T) {
	recs := loadRecorded(t)
	all := append(append([]recordedOutput{}, recs["qwen3"]...), recs["qwen35"]...)
	rapid.Check(t, func(rt *rapid.T) {
		r := all[rapid.IntRange(0, len(all)-1).Draw(rt, "record")]
		text := r.Text
		switch rapid.IntRange(0, 3).Draw(rt, "damage") {
		case 1:
			text = text[:rapid.IntRange(0, len(text)).Draw(rt, "cut")]
		case 2:
			i := rapid.IntRange(0, len(text)-1).Draw(rt, "at")
			text = text[:i] + rapid.SampledFrom([]string{"{", "}", "<", ">", "\"", "\n", "x", "<tool_call>", "</think>"}).Draw(rt, "byte") + text[i+1:]
		case 3:
			text = rapid.SampledFrom([]string{"Sure. ", "<tool_call>", "\n\n", "<think>x</think>"}).Draw(rt, "prefix") + text + rapid.SampledFrom([]string{"", " trailing", "<tool_call>\n{\"name\"", "</tool_call>"}).Draw(rt, "suffix")
		}
		cuts := rapid.SliceOfN(rapid.IntRange(0, len(text)), 0, 12).Draw(rt, "cuts")
		sortInts(cuts)
		whole := ParseOutput(text, r.Tools, r.opts())
		got := parseSplit(rt, text, cuts, r.Tools, r.opts())
		if !reflect.DeepEqual(got, whole) {
			rt.Fatalf("cuts %v:\n got %+v\nwant %+v", cuts, got, whole)
		}
	})
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

var bashTool = []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}`)}

var typedTool = []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "q", "parameters": {"type": "object", "properties": {
	"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
	"o": {"type": "object"}, "a": {"type": "array"}, "opt": {"type": ["integer", "null"]}, "any": {"anyOf": [{"type": "boolean"}, {"type": "string"}]}}}}}`)}

func TestParseCases(t *testing.T) {
	type call struct{ name, args string }
	cases := []struct {
		name      string
		text      string
		tools     []json.RawMessage
		opts      ParserOptions
		content   string
		reasoning string
		calls     []call
	}{
		{name: "plain", text: "  Hello, world.\n", content: "  Hello, world.\n"}, // the answer keeps its own whitespace
		{name: "think then answer", text: "<think>\nLet me see.\n</think>\n\nThe answer is 4.", content: "The answer is 4.", reasoning: "Let me see."},
		{name: "start in reasoning", text: "Thinking...\n</think>\n\nDone.", opts: ParserOptions{StartInReasoning: true}, content: "Done.", reasoning: "Thinking..."},
		{name: "unclosed think stays reasoning", text: "<think>\nstill thinking", reasoning: "still thinking"},
		{name: "think later is content", text: "Hi <think>x</think>", content: "Hi <think>x</think>"},
		{name: "json call with text before", text: "I will list files.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>", content: "I will list files.", calls: []call{{"bash", `{"command": "ls"}`}}},
		{name: "two json calls", text: "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2.5e3, null, true]}}\n</tool_call>", calls: []call{{"a", `{}`}, {"b", `{"x": [1, 2.5e3, null, true]}`}}},
		{name: "json arguments before name", text: "<tool_call>{\"arguments\": {\"k\": 1}, \"name\": \"f\"}</tool_call>", calls: []call{{"f", `{"k": 1}`}}},
		{name: "json no arguments", text: "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", calls: []call{{"f", `{}`}}},
		{name: "json number arguments", text: "<tool_call>{\"name\": \"f\", \"arguments\": 12}</tool_call>", calls: []call{{"f", `12`}}},
		{name: "multibyte text and reasoning", text: "<think>\n日本語の推論 🌦\n</think>\n\nZürich — 東京 🌦<tool_call>\n{\"name\": \"météo\", \"arguments\": {\"ville\": \"東京\"}}\n</tool_call>", content: "Zürich — 東京 🌦", reasoning: "日本語の推論 🌦", calls: []call{{"météo", `{"ville": "東京"}`}}},
		{name: "multibyte xml", text: "<tool_call>\n<function=f>\n<parameter=v>\n東京 🌦\n</parameter>\n</function>\n</tool_call>", calls: []call{{"f", `{"v": "東京 🌦"}`}}},
		{name: "json unicode name", text: "<tool_call>{\"name\": \"m\\u00e9t\\u00e9o\", \"arguments\": {\"v\": \"Z\u00fcrich\"}}</tool_call>", calls: []call{{"météo", `{"v": "Zürich"}`}}},
		{name: "xml call typed", tools: typedTool, text: "Running.\n\n<tool_call>\n<function=q>\n<parameter=s>\nline 1\nline 2\n</parameter>\n<parameter=i>\n-42\n</parameter>\n<parameter=n>\n2.5\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=o>\n{\"z\": 1, \"a\": {\"k\": [1, 2]}}\n</parameter>\n<parameter=a>\n[\"x\", \"y\"]\n</parameter>\n<parameter=opt>\nNone\n</parameter>\n<parameter=any>\nfalse\n</parameter>\n</function>\n</tool_call>",
			content: "Running.", calls: []call{{"q", `{"s": "line 1\nline 2", "i": -42, "n": 2.5, "b": true, "o": {"z": 1, "a": {"k": [1, 2]}}, "a": ["x", "y"], "opt": null, "any": false}`}}},
		{name: "xml values that do not fit stay strings", tools: typedTool, text: "<tool_call>\n<function=q>\n<parameter=i>\n4.5\n</parameter>\n<parameter=b>\nyes\n</parameter>\n<parameter=o>\n[1]\n</parameter>\n<parameter=s>\n12\n</parameter>\n<parameter=undeclared>\n7\n</parameter>\n</function>\n</tool_call>",
			calls: []call{{"q", `{"i": "4.5", "b": "yes", "o": "[1]", "s": "12", "undeclared": "7"}`}}},
		{name: "xml unknown function", text: "<tool_call>\n<function=nope>\n<parameter=x>\n<b>html</b> & \"quotes\"\n</parameter>\n</function>\n</tool_call>", calls: []call{{"nope", `{"x": "<b>html</b> & \"quotes\""}`}}},
		{name: "xml no parameters", text: "<tool_call>\n<function=ping>\n</function>\n</tool_call>", calls: []call{{"ping", `{}`}}},
		{name: "xml parallel", tools: bashTool, text: "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=bash>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>", calls: []call{{"bash", `{"command": "ls"}`}, {"bash", `{"command": "pwd"}`}}},
		{name: "text after calls", text: "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\nDone.", content: "Done.", calls: []call{{"f", `{}`}}},

		// Malformed markup comes back as content.
		{name: "unclosed tool_call", text: "Let me try <tool_call>\n{\"name\": \"f\"", content: "Let me try <tool_call>\n{\"name\": \"f\""},
		{name: "bad json before commit", text: "<tool_call>\n{\"name\": f}\n</tool_call>", content: "<tool_call>\n{\"name\": f}\n</tool_call>"},
		{name: "not json or xml", text: "<tool_call>\nbash ls\n</tool_call>", content: "<tool_call>\nbash ls\n</tool_call>"},
		{name: "empty tool_call", text: "<tool_call></tool_call>", content: "<tool_call></tool_call>"},
		{name: "name not a string", text: "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>", content: "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>"},
		{name: "extra key", text: "<tool_call>{\"name\": \"f\", \"id\": 1, \"arguments\": {}}</tool_call>", content: "<tool_call>{\"name\": \"f\", \"id\": 1, \"arguments\": {}}</tool_call>"},
		{name: "extra key after arguments", text: "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"id\": 1}</tool_call>", content: "\"id\": 1}</tool_call>", calls: []call{{"f", `{}`}}},
		{name: "missing name", text: "<tool_call>{\"arguments\": {}}</tool_call>", content: "<tool_call>{\"arguments\": {}}</tool_call>"},
		{name: "bad then good", text: "<tool_call>oops\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", content: "<tool_call>oops", calls: []call{{"f", `{}`}}},
		{name: "partial marker at end", text: "Hello <tool_ca", content: "Hello <tool_ca"},
		{name: "xml bad function tag", text: "<tool_call>\n<functio=x>\n</tool_call>", content: "<tool_call>\n<functio=x>\n</tool_call>"},
		{name: "xml name with newline", text: "<tool_call>\n<function=a\nb>\n</function>\n</tool_call>", content: "<tool_call>\n<function=a\nb>\n</function>\n</tool_call>"},

		// Committed calls that go wrong keep what they have.
		{name: "json truncated in arguments", text: "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -", calls: []call{{"bash", `{"command": "ls -`}}},
		{name: "json bad byte in arguments", text: "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": ls}}\n</tool_call>", content: "ls}}\n</tool_call>", calls: []call{{"bash", `{"command": `}}},
		{name: "json missing close brace", text: "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}\n</tool_call>", content: "</tool_call>", calls: []call{{"bash", `{"command": "ls"}`}}},
		{name: "json missing close tag", text: "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\nDone", content: "Done", calls: []call{{"bash", `{"command": "ls"}`}}},
		{name: "xml truncated in value", tools: bashTool, text: "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n<parameter=x>\npartial", content: "<parameter=x>\npartial", calls: []call{{"bash", `{"command": "ls"}`}}},
		{name: "xml garbage between parameters", tools: bashTool, text: "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\nstray\n</function>\n</tool_call>", content: "stray\n</function>\n</tool_call>", calls: []call{{"bash", `{"command": "ls"}`}}},
		{name: "xml missing close tag", text: "<tool_call>\n<function=f>\n</function>\nthen text", content: "then text", calls: []call{{"f", `{}`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ParseOutput(c.text, c.tools, c.opts)
			if got.Content.Text != c.content {
				t.Errorf("content %q, want %q", got.Content.Text, c.content)
			}
			reasoning := ""
			if got.ReasoningContent != nil {
				reasoning = *got.ReasoningContent
			}
			if reasoning != c.reasoning {
				t.Errorf("reasoning %q, want %q", reasoning, c.reasoning)
			}
			var calls []call
			for _, tc := range got.ToolCalls {
				calls = append(calls, call{tc.Function.Name, tc.Function.Arguments})
			}
			if !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("calls %q, want %q", calls, c.calls)
			}
			for k := 0; k <= len(c.text); k++ {
				if s := parseSplit(t, c.text, []int{k}, c.tools, c.opts); !reflect.DeepEqual(s, got) {
					t.Fatalf("split at %d: %+v, whole %+v", k, s, got)
				}
			}
		})
	}
}

// TestParseStreamsEarly: a call's header goes out as soon as its name is
// known, and JSON arguments byte by byte, before the call closes.
func TestParseStreamsEarly(t *testing.T) {
	p := NewParser(bashTool, ParserOptions{IDPrefix: "call_7_"})
	d := p.Push("<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"comm")
	if len(d) != 2 || d[0].ToolCall == nil || d[0].ToolCall.ID != "call_7_0" || d[0].ToolCall.Name != "bash" || d[1].ToolCall.Arguments != `{"comm` {
		t.Fatalf("deltas %+v", d)
	}
	p = NewParser(bashTool, ParserOptions{})
	d = p.Push("<tool_call>\n<function=bash>\n<parameter=command>\nls")
	if len(d) != 1 || d[0].ToolCall.Name != "bash" {
		t.Fatalf("xml header: %+v", d)
	}
	d = p.Push("\n</parameter>\n")
	if len(d) != 1 || d[0].ToolCall.Arguments != `{"command": "ls"` {
		t.Fatalf("xml parameter: %+v", d)
	}
}

func TestReasoningOpen(t *testing.T) {
	for prompt, want := range map[string]bool{
		"<|im_start|>assistant\n<think>\n":               true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n": false,
		"<|im_start|>assistant\n":                        false,
	} {
		if got := ReasoningOpen(prompt); got != want {
			t.Errorf("ReasoningOpen(%q) = %v", prompt, got)
		}
	}
}

func FuzzParser(f *testing.F) {
	f.Add("<think>\nr\n</think>\n\nHi<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>", 7, false)
	f.Add("x</think>\n<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>", 30, true)
	f.Add("<tool_call>{\"arguments\": [1, {\"a\": -0.5e-3}], \"name\": \"q\"}</tool_call><tool_call>", 3, false)
	f.Fuzz(func(t *testing.T, text string, seed int, inReasoning bool) {
		if len(text) > 4096 {
			return
		}
		opts := ParserOptions{StartInReasoning: inReasoning}
		whole := ParseOutput(text, bashTool, opts)
		var cuts []int
		for k := 1; k < len(text); k++ {
			if (seed+k*7919)%11 == 0 {
				cuts = append(cuts, k)
			}
		}
		got := parseSplit(t, text, cuts, bashTool, opts)
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("cuts %v:\n got %+v\nwant %+v", cuts, got, whole)
		}
		// Nothing but whitespace and markup disappears: every other byte of
		// the text is found in the content, the reasoning or a call.
		kept := got.Content.Text
		if got.ReasoningContent != nil {
			kept += *got.ReasoningContent
		}
		for _, tc := range got.ToolCalls {
			kept += tc.Function.Name + tc.Function.Arguments
		}
		if strings.Count(text, "x") > strings.Count(kept, "x") {
			t.Fatalf("lost text: %q -> %+v", text, got)
		}
	})
}
