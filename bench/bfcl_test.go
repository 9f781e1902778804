package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
)

func TestLoadBFCLCalib(t *testing.T) {
	cases, err := LoadBFCL("testdata/bfcl_calib.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Counted with a plain JSON reader (python3 -c over the file).
	want := map[string]int{"live_multiple": 105, "live_irrelevance": 88, "simple_python": 40, "live_simple": 26, "irrelevance": 24,
		"parallel": 20, "parallel_multiple": 20, "multiple": 20, "simple_java": 10, "simple_javascript": 5,
		"live_relevance": 2, "live_parallel": 2, "live_parallel_multiple": 2}
	got := map[string]int{}
	withSystem := 0
	for _, c := range cases {
		got[c.Subset]++
		if (len(c.Tools) == 0 && !strings.Contains(c.Subset, "irrelevance")) || c.Messages[len(c.Messages)-1].Role != "user" || c.PossibleAnswer != nil {
			t.Fatalf("case %s: %d tools, last role %q, answer %v", c.ID, len(c.Tools), c.Messages[len(c.Messages)-1].Role, c.PossibleAnswer)
		}
		if c.Messages[0].Role == "system" {
			withSystem++
		}
		if err := chat.Validate(chat.Request{Messages: c.Messages, Tools: c.Tools}); err != nil {
			t.Fatalf("case %s: %v", c.ID, err)
		}
	}
	if len(cases) != 364 || withSystem != 9 {
		t.Fatalf("%d cases (%d with a system message), want 364 (9)", len(cases), withSystem)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("subset %s: %d cases, want %d", k, got[k], n)
		}
	}
	if cases[0].ID != "simple_python_1" {
		t.Errorf("first case id %q", cases[0].ID)
	}
}

func TestParseBFCLErrors(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"subset":"x","messages":[]}`, "messages: missing or empty"},
		{`{"subset":"x","messages":[{"role":"user","content":"q"}],"possible_answer":{"f":1}}`, "possible_answer: want a list"},
		{`nope`, "b:1:"},
		{``, "no cases"},
	} {
		if _, err := ParseBFCL(strings.NewReader(tc.data), "b"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.data, err, tc.want)
		}
	}
}

const weatherTools = `[
 {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
   "city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"ratio":{"type":"number"},
   "hours":{"type":"array"},"opts":{"type":"object"}},"required":["city"]}}},
 {"type":"function","function":{"name":"math.add","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}}}
]`

func bfclCase(t *testing.T, subset, answer string) *BFCLCase {
	t.Helper()
	line := `{"subset":"` + subset + `","messages":[{"role":"user","content":"q"}],"tools":` + weatherTools
	if answer != "" {
		line += `,"possible_answer":` + answer
	}
	cases, err := ParseBFCL(strings.NewReader(strings.ReplaceAll(line, "\n", "")+"}"), "t")
	if err != nil {
		t.Fatal(err)
	}
	return &cases[0]
}

func call(name, args string) chat.ToolCall {
	return chat.ToolCall{Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}}
}

// TestScoreBFCL exercises each AST rule on hand-made cases.
func TestScoreBFCL(t *testing.T) {
	const weather = `[{"get_weather":{"city":["New York","NYC"],"days":[3,""],"metric":[true,""],"ratio":[0.5,""],"hours":[[1,2],""],"opts":[{"unit":["C","celsius"]},""]}}]`
	tests := []struct {
		name, subset, answer string
		calls                []chat.ToolCall
		scored, correct      bool
		reason               string
	}{
		{"irrelevance, no call", "live_irrelevance", "", nil, true, true, ""},
		{"irrelevance, a call", "irrelevance", "", []chat.ToolCall{call("get_weather", `{"city":"x"}`)}, true, false, "made 1 call(s) where none fits"},
		{"relevance, a call", "live_relevance", "", []chat.ToolCall{call("get_weather", `{"city":"x"}`)}, true, true, ""},
		{"relevance, no call", "live_relevance", "", nil, true, false, "made no call"},
		{"no ground truth", "simple_python", "", []chat.ToolCall{call("get_weather", `{"city":"x"}`)}, false, false, ""},
		{"exact", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"New York","days":3}`)}, true, true, ""},
		{"string standardised", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"new-york"}`)}, true, true, ""},
		{"another allowed value", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"nyc"}`)}, true, true, ""},
		{"value not allowed", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"Boston"}`)}, true, false, `parameter "city": "Boston" is not among`},
		{"wrong function", "simple_python", weather, []chat.ToolCall{call("get_forecast", `{"city":"NYC"}`)}, true, false, `called "get_forecast", want "get_weather"`},
		{"no call", "simple_python", weather, nil, true, false, "made 0 call(s), want 1"},
		{"required missing", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"days":3}`)}, true, false, `required parameter "city" missing`},
		{"unexpected parameter", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","zip":"10001"}`)}, true, false, `unexpected parameter "zip"`},
		{"integer given as float", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","days":3.0}`)}, true, false, "is not of type integer"},
		{"number accepts an integer", "simple_python", `[{"get_weather":{"city":["NYC"],"ratio":[1.0]}}]`, []chat.ToolCall{call("get_weather", `{"city":"NYC","ratio":1}`)}, true, true, ""},
		{"boolean type", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","metric":"true"}`)}, true, false, "is not of type boolean"},
		{"array element-wise", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","hours":[1,2]}`)}, true, true, ""},
		{"array order matters", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","hours":[2,1]}`)}, true, false, `parameter "hours"`},
		{"nested object", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","opts":{"unit":"Celsius"}}`)}, true, true, ""},
		{"nested object, bad value", "simple_python", weather, []chat.ToolCall{call("get_weather", `{"city":"NYC","opts":{"unit":"K"}}`)}, true, false, `parameter "opts"`},
		{"arguments not JSON", "simple_python", weather, []chat.ToolCall{call("get_weather", `city=NYC`)}, true, false, "not a JSON object"},
		{"dotted name", "simple_python", `[{"math.add":{"a":[1],"b":[2]}}]`, []chat.ToolCall{call("math_add", `{"a":1,"b":2}`)}, true, true, ""},
		{"parallel, any order", "parallel", `[{"math.add":{"a":[1],"b":[2]}},{"math.add":{"a":[3],"b":[4]}}]`,
			[]chat.ToolCall{call("math.add", `{"a":3,"b":4}`), call("math.add", `{"a":1,"b":2}`)}, true, true, ""},
		{"parallel, one wrong", "parallel", `[{"math.add":{"a":[1],"b":[2]}},{"math.add":{"a":[3],"b":[4]}}]`,
			[]chat.ToolCall{call("math.add", `{"a":3,"b":4}`), call("math.add", `{"a":1,"b":5}`)}, true, false, "expected call 0 matches no call made"},
		{"parallel, too few", "parallel", `[{"math.add":{"a":[1],"b":[2]}},{"math.add":{"a":[3],"b":[4]}}]`,
			[]chat.ToolCall{call("math.add", `{"a":1,"b":2}`)}, true, false, "made 1 call(s), want 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ScoreBFCL(bfclCase(t, tc.subset, tc.answer), tc.calls)
			if v.Scored != tc.scored || v.Correct != tc.correct || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("verdict %+v, want scored %v correct %v reason %q", v, tc.scored, tc.correct, tc.reason)
			}
		})
	}
}

func TestRunBFCL(t *testing.T) {
	cases, err := LoadBFCL("testdata/bfcl_calib.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cases = cases[:6]
	cases[1].Subset = "live_irrelevance"
	cases[2].Subset = "irrelevance"
	cases[0].PossibleAnswer = []map[string]map[string][]any{{"concert_find_details": {"artist": {"The Weeknd"}, "month": {"December"}, "year": {json.Number("2022"), ""}}}}
	var mu sync.Mutex
	var toolChoice []any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		toolChoice = append(toolChoice, body["tool_choice"])
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+chunkJSON(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"concert_find_details","arguments":"{\"artist\": \"the weeknd\", \"month\": \"December\"}"}}]}`)+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	res, err := RunBFCL(context.Background(), BFCLConfig{Client: &Client{BaseURL: srv.URL}, Cases: cases, Dataset: "calib", Request: RequestOptions{Model: "m"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(toolChoice) != 3 || toolChoice[0] != "auto" {
		t.Fatalf("tool_choice sent: %v", toolChoice)
	}
	s := res.Summary
	// Case 0 answers correctly; the two irrelevance cases are wrong to call.
	if s.Cases != 3 || s.Scored != 3 || s.Correct != 1 || s.WithCalls != 3 || s.WellFormed != 1 || s.Errors != 0 || !s.GroundTruthed {
		t.Fatalf("summary %+v", s)
	}
	if s.Accuracy == nil || *s.Accuracy != round4(1.0/3) || s.Subsets["irrelevance"].Scored != 1 {
		t.Fatalf("accuracy %v subsets %+v", s.Accuracy, s.Subsets)
	}
	dir := t.TempDir()
	if err := WriteBFCLReport(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BFCLResultsFile, BFCLSummaryFile, BFCLReportFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRunBFCLFailedRequest: a request that fails is wrong even in an
// irrelevance subset, where saying nothing would be right.
func TestRunBFCLFailedRequest(t *testing.T) {
	srv := newScriptedServer(t, http.StatusInternalServerError, nil)
	res, err := RunBFCL(context.Background(), BFCLConfig{Client: &Client{BaseURL: srv.URL},
		Cases: []BFCLCase{*bfclCase(t, "irrelevance", "")}, Request: RequestOptions{Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records[0]
	if !r.Scored || r.Correct || r.Reason != "request failed" || r.Error == "" || res.Summary.Errors != 1 {
		t.Fatalf("record %+v", r)
	}
}
