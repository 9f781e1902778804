package turn

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// The prefix cache publishes a snapshot of a chat prompt at its stable
// boundary: where the next turn's prompt, which repeats this conversation
// plus the recorded answer and what follows it, still agrees with this one.
// The generation prompt is not part of it when the template writes the
// answer back differently (Qwen3 with enable_thinking false opens the
// answer with an empty <think></think> block that the history does not
// repeat; PITFALLS.md). The boundary is found from the template itself, not
// from model-specific strings: render the conversation continued by a probe
// answer and a probe tool result, and see where that text leaves the
// prompt. Two probe answers, one with reasoning and one without, and the
// shorter agreement wins: the next turn may carry either.
//
// Rendering a long conversation costs tens of milliseconds, so the text
// after the boundary (the unstable tail of the generation prompt) is learnt
// once per template, template variables and last message role, and a prompt
// that ends with the learnt tail takes its boundary from it.

var boundaryProbes = [2][]chat.Message{
	{
		{Role: "assistant", Content: chat.TextContent("\x01")},
		{Role: "tool", Content: chat.TextContent("\x01"), ToolCallID: "call_edgellmd_probe"},
	},
	{
		{Role: "assistant", Content: chat.TextContent("\x01"), ReasoningContent: ptr("\x01")},
		{Role: "tool", Content: chat.TextContent("\x01"), ToolCallID: "call_edgellmd_probe"},
	},
}

// systemProbe follows a system turn to find where it ends.
var systemProbe = chat.Message{Role: "user", Content: chat.TextContent("\x01")}

func ptr(s string) *string { return &s }

// tailKey says which prompts share a generation prompt tail.
type tailKey struct {
	tpl      *chat.Template
	kwargs   string
	lastRole string
}

var learntTails sync.Map // tailKey -> string

// PublishPoints returns the token positions of prompt (the tokens of
// promptText, rendered from req) where the engine should publish prefix
// snapshots: the stable boundary, and on a first turn the end of a leading
// system turn (its system prompt and tools, which other conversations
// share). Positions the
// template does not let us find are left out.
func (p *Pipeline) PublishPoints(req chat.Request, promptText string, prompt []int32) []int {
	if !req.AddGenerationPrompt || len(req.Messages) == 0 {
		return nil
	}
	var points []int
	if b := p.stableBoundary(req, promptText); b > 0 {
		if at := p.tokenBoundary(prompt, promptText, b); at > 0 {
			points = append(points, at)
		}
	}
	if len(req.Messages) > 1 && req.Messages[0].Role == "system" && !hasAssistant(req.Messages) {
		// A first turn: other conversations may share its system turn.
		r := req
		r.Messages = []chat.Message{req.Messages[0], systemProbe}
		r.AddGenerationPrompt = false
		if text, err := p.tpl.Render(r); err == nil {
			if at := p.tokenBoundary(prompt, promptText, commonPrefix(text, promptText)); at > 0 && (len(points) == 0 || at < points[0]) {
				points = append(points, at)
			}
		}
	}
	return points
}

func hasAssistant(msgs []chat.Message) bool {
	for _, m := range msgs {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

// stableBoundary returns the stable boundary of promptText in bytes; 0
// when the template does not let us find it.
func (p *Pipeline) stableBoundary(req chat.Request, promptText string) int {
	kw, err := json.Marshal(req.Kwargs) // map keys sorted: a canonical form
	if err != nil {
		return 0
	}
	key := tailKey{tpl: p.tpl, kwargs: string(kw), lastRole: req.Messages[len(req.Messages)-1].Role}
	if tail, ok := learntTails.Load(key); ok && strings.HasSuffix(promptText, tail.(string)) {
		return len(promptText) - len(tail.(string))
	}
	best := -1
	for _, probe := range boundaryProbes {
		r := req
		r.Messages = append(append([]chat.Message(nil), req.Messages...), probe...)
		text, err := p.tpl.Render(r)
		if err != nil {
			return 0
		}
		if n := commonPrefix(text, promptText); best < 0 || n < best {
			best = n
		}
	}
	if best > 0 {
		learntTails.Store(key, promptText[best:])
	}
	return max(best, 0)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// tokenBoundary maps a byte offset of promptText to the number of prompt
// tokens that lie wholly before it (a token that straddles it is left
// out). 0 when the tokens do not spell the text.
func (p *Pipeline) tokenBoundary(prompt []int32, promptText string, b int) int {
	i, at := 0, 0
	if v := p.tok.Vocab(); len(prompt) > 0 && v.AddBOS && v.BOS >= 0 && prompt[0] == v.BOS &&
		(p.bosText == "" || !strings.HasPrefix(promptText, p.bosText)) {
		i = 1 // BOS added before the text
	}
	k := i
	for ; i < len(prompt); i++ {
		piece := p.tok.Piece(prompt[i])
		if at+len(piece) > len(promptText) || promptText[at:at+len(piece)] != string(piece) {
			return 0
		}
		at += len(piece)
		if at <= b {
			k = i + 1
		}
	}
	if at != len(promptText) {
		return 0
	}
	return k
}
