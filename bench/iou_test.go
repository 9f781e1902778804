package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
)

func bashCall(command string) chat.ToolCall {
	args, _ := json.Marshal(map[string]string{"command": command})
	return chat.ToolCall{Type: "function", Function: chat.FunctionCall{Name: "bash", Arguments: string(args)}}
}

// TestBashActionsRules has one hand-made case per rule of the harness's
// extractor; the expectations are worked out by hand from the rules.
func TestBashActionsRules(t *testing.T) {
	tests := []struct {
		rule    string
		command string
		want    []string
	}{
		{"plain executable", "ls -la", []string{"ls"}},
		{"split on |", "cat f | grep x | head", []string{"cat", "grep", "head"}},
		{"split on ||", "make || true", []string{"make", "true"}},
		{"split on &&", "mkdir d && touch d/f", []string{"mkdir", "touch"}},
		{"split on ;", "cp a b; mv b c", []string{"cp", "mv"}},
		{"split on newline", "rm x\nls", []string{"rm", "ls"}},
		{"single quotes blanked", "grep 'a | sed' f", []string{"grep"}},
		{"double quotes blanked, escapes inside", `grep "a \" | sed" f`, []string{"grep"}},
		{"backticks blanked", "echo `which python`; wc -l f", []string{"wc"}},
		{"a quoted executable is lost", `"python" x.py`, nil},
		{"leading assignments dropped", "A=1 B_2=x python t.py", []string{"python"}},
		{"an assignment needs a name first", "1A=1 python", nil},
		{"wrappers dropped, any order", "sudo env X=1 time nice exec command git log", []string{"git"}},
		{"a wrapper's option stops the stripping", "nice -n 5 make", nil},
		{"basename", "/usr/local/bin/pytest -q", []string{"pytest"}},
		{"lower-cased", "GIT status", []string{"git"}},
		{"version suffix", "python3.11 -V; python2.7.18 x", []string{"python", "python"}},
		{"alias python", "python2 a; python3 b; py c", []string{"python", "python", "python"}},
		{"alias pip", "pip3 install x", []string{"pip"}},
		{"alias sphinx", "sphinx-build a b; sphinx-quickstart", []string{"sphinx", "sphinx"}},
		{"alias cat", "less a; more b", []string{"cat", "cat"}},
		{"alias grep", "egrep a; fgrep b; rg c; ag d", []string{"grep", "grep", "grep", "grep"}},
		{"alias awk", "gawk 1", []string{"awk"}},
		{"alias find", "locate x", []string{"find"}},
		{"alias source", ". venv/bin/activate", []string{"source"}},
		{"alias curl", "wget u", []string{"curl"}},
		{"alias apt", "apt-get install x; apt update", []string{"apt", "apt"}},
		{"unknown executables dropped", "echo hi; cd /x; vim f; ./runtests.py", nil},
		{"empty stages", " ; && || ", nil},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			got := BashActions([]chat.ToolCall{bashCall(tc.command)})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("BashActions(%q) = %q, want %q", tc.command, got, tc.want)
			}
		})
	}
}

func TestBashActionsCalls(t *testing.T) {
	tests := []struct {
		name  string
		calls []chat.ToolCall
		want  []string
	}{
		{"not bash", []chat.ToolCall{{Function: chat.FunctionCall{Name: "python", Arguments: `{"command":"ls"}`}}}, nil},
		{"arguments not JSON", []chat.ToolCall{{Function: chat.FunctionCall{Name: "bash", Arguments: `ls -la`}}}, nil},
		{"arguments not an object", []chat.ToolCall{{Function: chat.FunctionCall{Name: "bash", Arguments: `["ls"]`}}}, nil},
		{"cmd instead of command", []chat.ToolCall{{Function: chat.FunctionCall{Name: "bash", Arguments: `{"cmd":"ls"}`}}}, []string{"ls"}},
		{"empty command falls back to cmd", []chat.ToolCall{{Function: chat.FunctionCall{Name: "bash", Arguments: `{"command":"","cmd":"ls"}`}}}, []string{"ls"}},
		{"command not a string", []chat.ToolCall{{Function: chat.FunctionCall{Name: "bash", Arguments: `{"command":["ls"],"cmd":"ls"}`}}}, nil},
		{"several calls in order", []chat.ToolCall{bashCall("ls"), bashCall("cat f")}, []string{"ls", "cat"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BashActions(tc.calls); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIoU(t *testing.T) {
	tests := []struct {
		want, got []string
		iou       float64
	}{
		{[]string{"ls"}, []string{"ls"}, 1},
		{[]string{"ls"}, nil, 0},
		{nil, nil, 1},
		{[]string{"cat", "grep"}, []string{"grep", "cat"}, 1},      // order does not matter
		{[]string{"cat", "grep"}, []string{"cat", "sed"}, 1.0 / 3}, // ∩ {cat}, ∪ {cat grep sed}
		{[]string{"grep", "grep"}, []string{"grep"}, 0.5},          // multisets: ∩ 1, ∪ 2
		{[]string{"python", "python", "head"}, []string{"python", "head", "head", "ls"}, 2.0 / 5}, // ∩ {python head}, ∪ {python×2 head×2 ls}
	}
	for i, tc := range tests {
		if got := IoU(tc.want, tc.got); got != tc.iou {
			t.Errorf("%d: IoU(%q, %q) = %v, want %v", i, tc.want, tc.got, got, tc.iou)
		}
	}
}

// TestBashActionsMatchHarness compares with the harness's own extractor,
// run over testdata/iou/commands.json and every recorded answer of the trace
// (testdata/iou/README.md says how harness_actions.jsonl was made).
func TestBashActionsMatchHarness(t *testing.T) {
	f, err := os.Open("testdata/iou/harness_actions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := LoadTrace(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]*chat.Message{}
	for _, c := range tr.Conversations {
		for _, r := range c.Requests {
			if r.Expected != nil {
				answers[fmt.Sprint(c.ID, "/", r.Turn+1)] = r.Expected
			}
		}
	}
	var commands, rows int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var g struct {
			Command        *string  `json:"command"`
			ConversationID string   `json:"conversation_id"`
			Turn           int      `json:"turn"`
			Actions        []string `json:"actions"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		var got []string
		if g.Command != nil {
			commands++
			got = BashActions([]chat.ToolCall{bashCall(*g.Command)})
		} else {
			rows++
			m := answers[fmt.Sprint(g.ConversationID, "/", g.Turn)]
			if m == nil {
				t.Fatalf("%s turn %d: no such recorded answer", g.ConversationID, g.Turn)
			}
			got = BashActions(m.ToolCalls)
		}
		if len(got) == 0 && len(g.Actions) == 0 {
			continue
		}
		if !slices.Equal(got, g.Actions) {
			t.Errorf("%q %s/%d: got %q, harness %q", deref(g.Command), g.ConversationID, g.Turn, got, g.Actions)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if commands < 30 || rows != 1007 {
		t.Fatalf("checked %d commands and %d recorded answers, want >= 30 and 1007", commands, rows)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
