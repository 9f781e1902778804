package chat

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// TestJinjaCases renders small one-feature templates and compares them with
// Jinja2's output under transformers' environment (testdata/jinja_cases.json,
// made by testdata/gen/mkjinja.py).
func TestJinjaCases(t *testing.T) {
	data, err := os.ReadFile("testdata/jinja_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string          `json:"name"`
		Template string          `json:"template"`
		Vars     json.RawMessage `json:"vars"`
		Want     string          `json:"want"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var vars map[string]json.RawMessage
			if err := json.Unmarshal(c.Vars, &vars); err != nil {
				t.Fatal(err)
			}
			kwargs := map[string]any{}
			for k, v := range vars {
				kwargs[k] = v
			}
			tpl, err := NewTemplate(c.Template, "", "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(Request{AddGenerationPrompt: true, Kwargs: kwargs})
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Want {
				t.Errorf("template %q\n got: %q\nwant: %q", c.Template, got, c.Want)
			}
		})
	}
}

func TestStrftime(t *testing.T) {
	data, err := os.ReadFile("testdata/strftime_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Time  string `json:"time"`
		Cases []struct {
			Format string `json:"format"`
			Want   string `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse("2006-01-02T15:04:05.999999", file.Time)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range file.Cases {
		if got := strftime(now, c.Format); got != c.Want {
			t.Errorf("strftime(%q) = %q, want %q", c.Format, got, c.Want)
		}
	}
	// strftime_now reads Request.Now.
	tpl, err := NewTemplate(`{{ strftime_now("%d %b %Y") }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Request{Now: now})
	if err != nil || got != "07 Mar 2026" {
		t.Errorf("strftime_now = %q, %v", got, err)
	}
}

func TestPyFloatRepr(t *testing.T) {
	// Values and their repr() as CPython 3 prints them.
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {-2, "-2.0"}, {0.1, "0.1"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
		{1.5e-7, "1.5e-07"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1234567890123456.0, "1234567890123456.0"},
		{12345678901234567.0, "1.2345678901234568e+16"}, {1.5e300, "1.5e+300"}, {5e-324, "5e-324"}, {0.3333333333333333, "0.3333333333333333"},
	}
	for _, c := range cases {
		if got := pyFloatRepr(c.f); got != c.want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	for f, want := range map[float64]string{math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", math.NaN(): "NaN"} {
		if got := pyFloatJSON(f); got != want {
			t.Errorf("pyFloatJSON(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	cases := []struct {
		name, src string
		req       Request
		want      string
	}{
		{"raise_exception", `{{ raise_exception('No user query found.') }}`, Request{}, "raise_exception: No user query found."},
		{"bad arguments", `{{ messages[0].tool_calls[0].function.arguments }}`, Request{Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: "{bad"}}}}}}, "messages[0].tool_calls[0].function.arguments"},
		{"bad tool", `x`, Request{Tools: []json.RawMessage{json.RawMessage(`{"a":`)}}, "tools[0]"},
		{"reserved kwarg", `x`, Request{Kwargs: map[string]any{"messages": 1}}, "chat_template_kwargs.messages: reserved"},
		{"unknown filter", `{{ 1 | nosuchfilter }}`, Request{}, "nosuchfilter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := NewTemplate(c.src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = tpl.Render(c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
	if _, err := NewTemplate(`{% for x in %}`, "", ""); err == nil {
		t.Error("NewTemplate accepted a broken template")
	}
}
