package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

const tracePath = "testdata/agentic_coding_2.5h.jsonl"

// rawRows reads the trace as plain JSON values, for checks that do not go
// through the parser under test.
func rawRows(t *testing.T) []map[string]any {
	t.Helper()
	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestTraceEveryRow parses the real MLPerf trace and checks every request
// against the harness's rule, re-derived here from the raw rows: the system
// prompt, then every earlier row as messages (assistant rows with content
// null, reasoning_content and tool_calls; one tool message per tool result),
// then the row itself; the tools of the conversation's user row.
func TestTraceEveryRow(t *testing.T) {
	tr, err := LoadTrace(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	rows := rawRows(t)
	if len(rows) != 2014 {
		t.Fatalf("%d rows, want 2014 (NOTICE)", len(rows))
	}
	if len(tr.Conversations) != 20 || tr.NumRequests() != 1007 {
		t.Fatalf("%d conversations, %d requests; want 20 and 1,007", len(tr.Conversations), tr.NumRequests())
	}

	byConv := map[string][]map[string]any{}
	var order []string
	roles := map[string]int{}
	for _, r := range rows {
		id := r["conversation_id"].(string)
		if _, ok := byConv[id]; !ok {
			order = append(order, id)
		}
		byConv[id] = append(byConv[id], r)
		roles[r["role"].(string)]++
	}
	if roles["user"] != 20 || roles["assistant"] != 1007 || roles["tool"] != 987 {
		t.Fatalf("roles %v, want 20 user, 1007 assistant, 987 tool (NOTICE)", roles)
	}

	checked := 0
	for ci, c := range tr.Conversations {
		if c.ID != order[ci] {
			t.Fatalf("conversation %d is %q, want %q (file order)", ci, c.ID, order[ci])
		}
		raw := byConv[c.ID]
		var history []any
		var tools any
		for _, r := range raw {
			if s, ok := r["system"].(string); ok && s != "" {
				history = append(history, map[string]any{"role": "system", "content": s})
				break
			}
		}
		for _, r := range raw {
			if r["role"] == "user" {
				tools = r["tools"]
				break
			}
		}
		ri := 0
		for k, r := range raw {
			var msgs []any
			switch r["role"] {
			case "user":
				msgs = []any{map[string]any{"role": "user", "content": r["content"]}}
			case "tool":
				for _, res := range r["tool_results"].([]any) {
					res := res.(map[string]any)
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": res["tool_call_id"], "content": res["content"]})
				}
			case "assistant":
				m := map[string]any{"role": "assistant", "content": r["content"], "tool_calls": r["tool_calls"]}
				if rc, ok := r["reasoning_content"]; ok {
					m["reasoning_content"] = rc
				}
				msgs = []any{m}
			}
			history = append(history, msgs...)
			if r["role"] == "assistant" {
				continue
			}
			req := c.Requests[ri]
			ri++
			if req.Turn != int(r["turn"].(float64)) || req.Index != ri-1 || req.ConversationID != c.ID {
				t.Fatalf("%s request %d: turn %d index %d, want turn %v", c.ID, ri-1, req.Turn, req.Index, r["turn"])
			}
			got := asJSONValue(t, req.Messages)
			if !reflect.DeepEqual(got, history) {
				t.Fatalf("%s turn %d: messages differ from the harness's rule\n got %.400v\nwant %.400v", c.ID, req.Turn, got, history)
			}
			if !reflect.DeepEqual(asJSONValue(t, req.Tools), tools) {
				t.Fatalf("%s turn %d: tools differ", c.ID, req.Turn)
			}
			wantDelay, _ := r["delay_seconds"].(float64)
			if req.DelaySeconds != wantDelay {
				t.Fatalf("%s turn %d: delay %v, want %v", c.ID, req.Turn, req.DelaySeconds, wantDelay)
			}
			if k+1 < len(raw) {
				next := raw[k+1]
				want := map[string]any{"role": "assistant", "content": nil, "tool_calls": next["tool_calls"], "reasoning_content": next["reasoning_content"]}
				if req.Expected == nil || !reflect.DeepEqual(asJSONValue(t, req.Expected), want) {
					t.Fatalf("%s turn %d: expected answer differs from row %v", c.ID, req.Turn, next["turn"])
				}
			} else if req.Expected != nil {
				t.Fatalf("%s turn %d: last row has an expected answer", c.ID, req.Turn)
			}
			checked++
		}
		if ri != len(c.Requests) {
			t.Fatalf("%s: %d requests, want %d", c.ID, len(c.Requests), ri)
		}
	}
	if checked != 1007 {
		t.Fatalf("checked %d requests", checked)
	}
}

func asJSONValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseTraceErrors(t *testing.T) {
	const (
		user   = `{"conversation_id":"c","turn":1,"role":"user","content":"hi","system":"sys","tools":[]}`
		call   = `{"conversation_id":"c","turn":2,"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{}"}}]}`
		result = `{"conversation_id":"c","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"ok"}]}`
	)
	tests := []struct {
		name, data, want string
	}{
		{"bad json", user + "\n{", "t:2:"},
		{"no conversation id", `{"turn":1,"role":"user","content":"x"}`, "conversation_id: missing"},
		{"interleaved", user + "\n" + strings.Replace(user, `"c"`, `"d"`, 1) + "\n" + call, "not consecutive"},
		{"turn gap", user + "\n" + strings.Replace(call, `"turn":2`, `"turn":3`, 1), "turn 3 where 2 was expected"},
		{"starts with assistant", strings.Replace(call, `"turn":2`, `"turn":1`, 1), `t:1: conversation "c" turn 1: role "assistant" cannot follow "start"`},
		{"user after user", user + "\n" + strings.Replace(user, `"turn":1`, `"turn":2`, 1), `role "user" cannot follow "user"`},
		{"tool after tool", user + "\n" + call + "\n" + result + "\n" + strings.Replace(result, `"turn":3`, `"turn":4`, 1), `role "tool" cannot follow "tool"`},
		{"tool without calls", user + "\n" + `{"conversation_id":"c","turn":2,"role":"assistant","content":"done"}` + "\n" + result, "must follow an assistant row with tool_calls"},
		{"user answers calls", user + "\n" + call + "\n" + strings.Replace(user, `"turn":1`, `"turn":3`, 1), "a tool row must answer them first"},
		{"empty tool results", user + "\n" + call + "\n" + `{"conversation_id":"c","turn":3,"role":"tool","tool_results":[]}`, "tool_results: a tool row needs a non-empty list"},
		{"no tool call id", user + "\n" + call + "\n" + `{"conversation_id":"c","turn":3,"role":"tool","tool_results":[{"content":"x"}]}`, "tool_results[0].tool_call_id"},
		{"empty assistant", user + "\n" + `{"conversation_id":"c","turn":2,"role":"assistant","content":null}`, "needs non-empty content or tool_calls"},
		{"empty user", `{"conversation_id":"c","turn":1,"role":"user","content":""}`, "a user row needs non-empty content"},
		{"call without id", user + "\n" + strings.Replace(call, `"id":"a",`, "", 1), "tool_calls[0].id"},
		{"call of wrong type", user + "\n" + strings.Replace(call, `"function","function"`, `"x","function"`, 1), `tool_calls[0].type: "x"`},
		{"bad max tokens", strings.Replace(user, `"turn":1`, `"turn":1,"max_new_tokens":0`, 1), "max_completion_tokens: 0"},
		{"unknown role", user + "\n" + `{"conversation_id":"c","turn":2,"role":"system","content":"x"}`, `role "system" cannot follow "user"`},
		{"empty", "\n\n", "no rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tc.data), "t")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseTraceRowSettings(t *testing.T) {
	data := `{"conversation_id":"c","turn":1,"role":"user","content":"hi","tools":[{"type":"function","function":{"name":"a"}}],"max_completion_tokens":77}
{"conversation_id":"c","turn":2,"role":"assistant","content":"ok"}
{"conversation_id":"c","turn":3,"role":"user","content":"more","max_new_tokens":9,"tools":[{"type":"function","function":{"name":"b"}}]}`
	tr, err := ParseTrace(strings.NewReader(data), "t")
	if err != nil {
		t.Fatal(err)
	}
	reqs := tr.Conversations[0].Requests
	if len(reqs) != 2 || reqs[0].MaxTokens != 77 || reqs[1].MaxTokens != 9 {
		t.Fatalf("requests %+v", reqs)
	}
	if !strings.Contains(string(reqs[1].Tools[0]), `"b"`) || !strings.Contains(string(reqs[0].Tools[0]), `"a"`) {
		t.Fatalf("a row's own tools win over the conversation's")
	}
	if len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Role != "user" {
		t.Fatalf("no system row: messages %+v", reqs[0].Messages)
	}
	if got := reqs[0].Expected; got == nil || got.Content.String() != "ok" || got.Content.Null {
		t.Fatalf("expected answer %+v", got)
	}
	if reqs[1].Expected != nil {
		t.Fatal("the last row has no answer")
	}
}

// FuzzParseTrace: any input parses or fails with an error, never a panic,
// and a parsed trace's requests each end with a user or tool message.
func FuzzParseTrace(f *testing.F) {
	f.Add(`{"conversation_id":"c","turn":1,"role":"user","content":"hi","system":"s","tools":[{"type":"function"}]}
{"conversation_id":"c","turn":2,"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{}"}}]}
{"conversation_id":"c","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"ok"}]}`)
	f.Add(`{"conversation_id":"c","turn":1,"role":"user","content":[{"type":"text","text":"x"}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		tr, err := ParseTrace(strings.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for _, c := range tr.Conversations {
			for _, r := range c.Requests {
				last := r.Messages[len(r.Messages)-1].Role
				if last != "user" && last != "tool" {
					t.Fatalf("request ends with a %q message", last)
				}
			}
		}
	})
}
