package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Row is one message of an agentic trace, as MLCommons'
// agentic_inference_dataset_schema.json lays it out: a user row (content,
// and on the first one the system prompt and tools), an assistant row
// (reasoning_content, tool_calls, content) or a tool row (tool_results).
type Row struct {
	ConversationID   string            `json:"conversation_id"`
	Turn             int               `json:"turn"`
	Role             string            `json:"role"`
	Content          *chat.Content     `json:"content"`
	System           string            `json:"system"`
	Tools            []json.RawMessage `json:"tools"`
	ReasoningContent *string           `json:"reasoning_content"`
	ToolCalls        []chat.ToolCall   `json:"tool_calls"`
	ToolResults      []ToolResult      `json:"tool_results"`
	DelaySeconds     float64           `json:"delay_seconds"`
	// MaxTokens is the row's max_completion_tokens (or its alias
	// max_new_tokens); 0 when the row sets neither.
	MaxTokens int `json:"-"`

	line int // 1-based line in the file, for error messages
}

// ToolResult is one result of a tool row; it becomes one "tool" message.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// Trace is a parsed agentic workload: its conversations in file order.
type Trace struct {
	Path          string
	Conversations []Conversation
}

// Conversation is one recorded trajectory and the requests it replays as.
type Conversation struct {
	ID       string
	Requests []Turn
}

// Turn is one request of the replay: a user or tool row with everything
// recorded before it.
type Turn struct {
	ConversationID string
	// Turn is the client row's turn number in the trace (1-based, counting
	// every row); Index is the request's 0-based position in its conversation.
	Turn  int
	Index int
	// Messages are the system prompt, the recorded history (assistant
	// messages with their reasoning_content and tool_calls, content null; one
	// tool message per tool result) and the client row's own message(s).
	// They share their backing array with the conversation's other turns: do
	// not modify them.
	Messages []chat.Message
	// Tools are the conversation's tool definitions, each as its raw JSON.
	Tools []json.RawMessage
	// MaxTokens is the row's own max_completion_tokens, 0 when it has none.
	MaxTokens int
	// DelaySeconds is the recorded pause before the row (tool run time); the
	// harness sleeps it only when asked to inject tool delays.
	DelaySeconds float64
	// Expected is the recorded assistant answer that followed the row (the
	// reference for IoU and --max-tokens-from-trace); nil when the row is the
	// last of its conversation.
	Expected *chat.Message
}

// NumRequests is the number of requests in the trace.
func (t *Trace) NumRequests() int {
	n := 0
	for _, c := range t.Conversations {
		n += len(c.Requests)
	}
	return n
}

// LoadTrace reads and checks an agentic trace (JSONL, one row per message).
func LoadTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load trace: %w", err)
	}
	defer f.Close()
	t, err := ParseTrace(f, path)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ParseTrace reads a trace from r; name is used in error messages. It checks
// what MLCommons' loader checks: a conversation's rows are consecutive, its
// turns are 1..N, roles follow user → assistant → (tool → assistant)* → user,
// a tool row follows an assistant row with tool calls and answers with a
// non-empty tool_results list, assistant rows have content or tool calls,
// user rows have content.
func ParseTrace(r io.Reader, name string) (*Trace, error) {
	var groups [][]Row
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		row, err := parseRow(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		row.line = line
		if row.ConversationID == "" {
			return nil, fmt.Errorf("%s:%d: conversation_id: missing or empty", name, line)
		}
		if len(groups) == 0 || groups[len(groups)-1][0].ConversationID != row.ConversationID {
			if seen[row.ConversationID] {
				return nil, fmt.Errorf("%s:%d: conversation_id %q: its rows are not consecutive (all rows of a conversation must be together)", name, line, row.ConversationID)
			}
			seen[row.ConversationID] = true
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	t := &Trace{Path: name}
	for _, rows := range groups {
		c, err := buildConversation(name, rows)
		if err != nil {
			return nil, err
		}
		t.Conversations = append(t.Conversations, c)
	}
	return t, nil
}

func parseRow(b []byte) (Row, error) {
	var row Row
	if err := json.Unmarshal(b, &row); err != nil {
		return row, err
	}
	var limits struct {
		MaxCompletionTokens *int `json:"max_completion_tokens"`
		MaxNewTokens        *int `json:"max_new_tokens"`
	}
	if err := json.Unmarshal(b, &limits); err != nil {
		return row, err
	}
	for _, p := range []*int{limits.MaxNewTokens, limits.MaxCompletionTokens} {
		if p != nil && row.MaxTokens == 0 {
			if *p < 1 {
				return row, fmt.Errorf("max_completion_tokens: %d, want at least 1", *p)
			}
			row.MaxTokens = *p
		}
	}
	return row, nil
}

// buildConversation checks one conversation's rows and builds its requests,
// as MLCommons' _build_conversation_metadata does.
func buildConversation(name string, rows []Row) (Conversation, error) {
	id := rows[0].ConversationID
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Turn < rows[j].Turn })
	for i, r := range rows {
		if r.Turn != i+1 {
			return Conversation{}, fmt.Errorf("%s:%d: conversation %q: turn %d where %d was expected (turns must be 1, 2, ..., N)", name, r.line, id, r.Turn, i+1)
		}
	}
	c := Conversation{ID: id}
	// The harness's per-conversation defaults: the system prompt of the first
	// row that has one, the tools of the first user row.
	var history []chat.Message
	for _, r := range rows {
		if r.System != "" {
			history = append(history, chat.Message{Role: "system", Content: chat.TextContent(r.System)})
			break
		}
	}
	var convTools []json.RawMessage
	for _, r := range rows {
		if r.Role == "user" {
			convTools = r.Tools
			break
		}
	}
	state := "start"
	prevCalls := false
	for i, r := range rows {
		where := fmt.Sprintf("%s:%d: conversation %q turn %d", name, r.line, id, r.Turn)
		if !validNext(state, r.Role) {
			return Conversation{}, fmt.Errorf("%s: role %q cannot follow %q (want user → assistant → [tool → assistant]* → user)", where, r.Role, state)
		}
		var msgs []chat.Message
		switch r.Role {
		case "user":
			if r.Content == nil || r.Content.Null || r.Content.String() == "" {
				return Conversation{}, fmt.Errorf("%s: content: a user row needs non-empty content", where)
			}
			if state == "assistant" && prevCalls {
				return Conversation{}, fmt.Errorf("%s: a user row cannot follow an assistant row with tool_calls (a tool row must answer them first)", where)
			}
			msgs = []chat.Message{{Role: "user", Content: *r.Content}}
		case "tool":
			if state == "assistant" && !prevCalls {
				return Conversation{}, fmt.Errorf("%s: a tool row must follow an assistant row with tool_calls", where)
			}
			if len(r.ToolResults) == 0 {
				return Conversation{}, fmt.Errorf("%s: tool_results: a tool row needs a non-empty list", where)
			}
			for j, tr := range r.ToolResults {
				if tr.ToolCallID == "" {
					return Conversation{}, fmt.Errorf("%s: tool_results[%d].tool_call_id: missing or empty", where, j)
				}
				msgs = append(msgs, chat.Message{Role: "tool", ToolCallID: tr.ToolCallID, Content: chat.TextContent(tr.Content)})
			}
		case "assistant":
			empty := r.Content == nil || r.Content.Null || r.Content.String() == ""
			if empty && len(r.ToolCalls) == 0 {
				return Conversation{}, fmt.Errorf("%s: an assistant row needs non-empty content or tool_calls", where)
			}
			for j, tc := range r.ToolCalls {
				if tc.ID == "" {
					return Conversation{}, fmt.Errorf("%s: tool_calls[%d].id: missing or empty", where, j)
				}
				if tc.Type != "function" {
					return Conversation{}, fmt.Errorf("%s: tool_calls[%d].type: %q, want \"function\"", where, j, tc.Type)
				}
				if tc.Function.Name == "" {
					return Conversation{}, fmt.Errorf("%s: tool_calls[%d].function.name: missing or empty", where, j)
				}
			}
			m := chat.Message{Role: "assistant", ReasoningContent: r.ReasoningContent, ToolCalls: r.ToolCalls}
			if r.Content != nil {
				m.Content = *r.Content
			} else {
				m.Content = chat.Content{Null: true}
			}
			msgs = []chat.Message{m}
			prevCalls = len(r.ToolCalls) > 0
		}
		if r.Role != "assistant" {
			prevCalls = false
		}
		state = r.Role
		if r.Role == "user" || r.Role == "tool" {
			rowTools := convTools
			if len(r.Tools) > 0 {
				rowTools = r.Tools
			}
			history = append(history, msgs...)
			t := Turn{
				ConversationID: id,
				Turn:           r.Turn,
				Index:          len(c.Requests),
				Messages:       history[:len(history):len(history)],
				Tools:          rowTools,
				MaxTokens:      r.MaxTokens,
				DelaySeconds:   r.DelaySeconds,
			}
			if i+1 < len(rows) && rows[i+1].Role == "assistant" {
				// Filled below, once the assistant row has been checked.
				t.Expected = &chat.Message{}
			}
			c.Requests = append(c.Requests, t)
			continue
		}
		history = append(history, msgs...)
		if n := len(c.Requests); n > 0 && c.Requests[n-1].Expected != nil && c.Requests[n-1].Turn == r.Turn-1 {
			*c.Requests[n-1].Expected = msgs[0]
		}
	}
	return c, nil
}

// validNext is the harness's role state machine.
func validNext(state, role string) bool {
	switch state {
	case "start":
		return role == "user"
	case "user":
		return role == "assistant"
	case "assistant":
		return role == "tool" || role == "user"
	case "tool":
		return role == "assistant" || role == "user"
	}
	return false
}
