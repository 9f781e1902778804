package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// The call grammars accept exactly what the templates themselves write
// for a call (rendered from an assistant message holding one), in the
// Qwen3 (JSON) and Qwen3.5 (XML) forms, and refuse a call to an unknown
// tool or with arguments outside the schema.
func TestCallGrammarsAcceptTheTemplatesCalls(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["c","f"]}},"required":["city","days"]}}}`),
		json.RawMessage(bashTool),
	}
	defs, err := validateTools(tools)
	if err != nil {
		t.Fatal(err)
	}
	v := grammar.NewVocab(nil, nil)
	for _, model := range []string{"qwen3", "qwen35"} {
		tpl := qwenTemplate(t, model)
		m, ok := turn.ProbeToolMarkup(tpl)
		if !ok {
			t.Fatalf("%s: no markup", model)
		}
		render := func(name, args string) string {
			msgs := []chat.Message{{Role: "user", Content: chat.TextContent("q")},
				{Role: "assistant", Content: chat.Content{Null: true}, ToolCalls: []chat.ToolCall{{ID: "c", Type: "function",
					Function: chat.FunctionCall{Name: name, Arguments: args}}}}}
			text, err := tpl.Render(chat.Request{Messages: msgs, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			at := strings.LastIndex(text, "<tool_call>")
			end := strings.LastIndex(text, "</tool_call>") + len("</tool_call>")
			return text[at:end]
		}
		g, err := toolGrammar(m, defs, m.Open, "\n", true)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		accepts := func(call string) bool {
			mt := g.NewMatcher(v)
			return strings.HasPrefix(call, m.Open) && mt.AcceptBytes([]byte(call[len(m.Open):])) == nil && mt.CanEnd()
		}
		good := render("get_weather", `{"city": "Oslo </b> <i>", "days": 3, "unit": "c"}`)
		if !accepts(good) {
			t.Errorf("%s: the grammar refuses the template's own call %q", model, good)
		}
		if two := good + "\n" + render("bash", `{"command": "ls -la"}`); !accepts(two) {
			t.Errorf("%s: the grammar refuses two calls %q", model, two)
		}
		bads := []string{
			render("get_weather", `{"city": "Oslo"}`), // days is required
			render("get_weather", `{"city": "Oslo", "days": 3, "unit": "k"}`),
			strings.Replace(good, "get_weather", "get_news", 1),
		}
		if m.XML {
			bads = append(bads, render("get_weather", `{"city": "Oslo \n</parameter> x", "days": 3}`)) // the closing tag inside a raw value
		} else { // (XML writes the string "3" as the number 3 would be)
			bads = append(bads, render("get_weather", `{"city": "Oslo", "days": "3"}`))
		}
		for _, bad := range bads {
			if accepts(bad) {
				t.Errorf("%s: the grammar accepts %q", model, bad)
			}
		}
	}
}
