package turn

import (
	"encoding/json"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// ToolMarkup is how the model's chat template writes an assistant tool
// call, learnt by rendering one (so it follows whatever template the model
// ships). It is what tool_choice "required" and a named function force at
// the start of the answer, and what the tool-call grammars are made of.
type ToolMarkup struct {
	// Open starts any call: "<tool_call>\n" for the Qwen templates.
	Open string
	// Named starts a call to one function, up to where its arguments
	// begin, with ProbeName standing for the function's name:
	// `<tool_call>\n{"name": "NAME", "arguments": ` (Qwen3) or
	// "<tool_call>\n<function=NAME>\n" (Qwen3.5).
	Named string
	// AfterReasoning is what the template writes between "</think>" and a
	// call: "\n\n" for the Qwen templates.
	AfterReasoning string
	// Reasons reports whether the template writes <think> reasoning.
	Reasons bool
	// XML: the arguments are XML parameters (Qwen3.5), not a JSON object;
	// ParamOpen, ParamMid and ParamClose frame each: "<parameter=", NAME,
	// ">\n", VALUE, "\n</parameter>\n".
	XML                             bool
	ParamOpen, ParamMid, ParamClose string
	// Close follows the arguments up to the end of "</tool_call>":
	// "}\n</tool_call>" (Qwen3), "</function>\n</tool_call>" (Qwen3.5).
	Close string
}

// ProbeName stands for a function's name in Named.
const (
	ProbeName = "edgellmd_probe_fn"
	probeArg  = "edgellmd_probe_arg"
)

// ProbeToolMarkup renders one assistant tool call with tpl. ok is false
// when the template writes no <tool_call> markup (no way to force a call).
func ProbeToolMarkup(tpl *chat.Template) (m ToolMarkup, ok bool) {
	tool := json.RawMessage(`{"type": "function", "function": {"name": "` + ProbeName + `", "description": "d", "parameters": {"type": "object", "properties": {"` + probeArg + `": {"type": "integer"}}}}}`)
	reasoning := "edgellmd probe reasoning"
	msgs := []chat.Message{
		{Role: "user", Content: chat.TextContent("q")},
		{Role: "assistant", Content: chat.Content{Null: true}, ReasoningContent: &reasoning, ToolCalls: []chat.ToolCall{{
			ID: "call_0", Type: "function",
			Function: chat.FunctionCall{Name: ProbeName, Arguments: `{"` + probeArg + `": 1}`},
		}}},
	}
	text, err := tpl.Render(chat.Request{Messages: msgs, Tools: []json.RawMessage{tool}})
	if err != nil {
		return m, false
	}
	// The call is the last mention of the probe's name (the tools listing
	// in the system turn comes before it, and may show example markup).
	nameAt := strings.LastIndex(text, ProbeName)
	if nameAt < 0 {
		return m, false
	}
	at := strings.LastIndex(text[:nameAt], "<tool_call>")
	if at < 0 {
		return m, false
	}
	call := text[at:]
	open := len("<tool_call>")
	for open < len(call) && strings.ContainsRune(" \t\r\n", rune(call[open])) {
		open++
	}
	m.Open = call[:open]
	name := nameAt - at
	arg := strings.Index(call[name:], probeArg)
	if arg < 0 {
		return m, false
	}
	arg += name
	// The arguments begin at the element that holds the first argument's
	// name: the '{' of a JSON object or the '<' of an XML parameter tag.
	begin := strings.LastIndexAny(call[:arg], "{<")
	if begin < name {
		return m, false
	}
	m.Named = call[:begin]
	end := strings.Index(call, "</tool_call>")
	if end < 0 {
		return m, false
	}
	end += len("</tool_call>")
	// The probe's one argument has the value 1.
	one := strings.Index(call[arg+len(probeArg):], "1")
	if one < 0 {
		return m, false
	}
	one += arg + len(probeArg)
	if call[begin] == '<' {
		m.XML = true
		m.ParamOpen, m.ParamMid = call[begin:arg], call[arg+len(probeArg):one]
		closeAt := strings.Index(call[one:], "</function>")
		if closeAt < 0 {
			return m, false
		}
		m.ParamClose, m.Close = call[one+1:one+closeAt], call[one+closeAt:end]
	} else {
		// JSON: the arguments object closes at the first '}' after the value.
		brace := strings.Index(call[one:], "}")
		if brace < 0 {
			return m, false
		}
		m.Close = call[one+brace+1 : end]
	}
	m.AfterReasoning = "\n\n"
	if r := strings.Index(text, reasoning); r >= 0 && strings.Contains(text[:r], ThinkOpen) {
		m.Reasons = true
		if c := strings.Index(text[r:], ThinkClose); c >= 0 && r+c+len(ThinkClose) <= at {
			m.AfterReasoning = text[r+c+len(ThinkClose) : at]
		}
	}
	return m, true
}

// Prefix is the markup forced for a tool choice: any call, or a call to name.
func (m ToolMarkup) Prefix(name string) string {
	if name == "" {
		return m.Open
	}
	return strings.Replace(m.Named, ProbeName, name, 1)
}
