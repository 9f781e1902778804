package turn

// The text stage of a turn: each output token's bytes become whole UTF-8
// text, cut at stop strings, and a Splitter turns the text into reasoning,
// content and tool-call deltas: engine/chat's Parser (with NoCalls when no
// tools are offered: one <think> splitting for every request), or
// PlainText for text completions.

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Splitter turns generated text, in pieces, into deltas: engine/chat's
// Parser (content, reasoning and, unless NoCalls, tool calls) or PlainText.
type Splitter interface {
	Push(text string) []Delta
	Finish() []Delta
}

// TextDecoder is the text side of one generation: it takes each token's
// bytes and gives deltas. Bytes of a UTF-8 character cut between tokens
// are held until the character is whole; text that may be the start of a
// stop string is held until it is known not to be; the rest goes to the
// Splitter.
type TextDecoder struct {
	partial []byte // the start of an unfinished UTF-8 character
	stops   stopMatcher
	split   Splitter
	stopped bool
}

// NewTextDecoder decodes text ended by stops and split by split.
func NewTextDecoder(stops []Stop, split Splitter) *TextDecoder {
	return &TextDecoder{stops: stopMatcher{stops: stops}, split: split}
}

// Push feeds one token's bytes. stop reports that a stop string matched:
// the text ends there and later pushes are ignored.
func (d *TextDecoder) Push(piece []byte) (deltas []Delta, stop bool) {
	if d.stopped {
		return nil, true
	}
	d.partial = append(d.partial, piece...)
	n := len(d.partial) - incompleteTail(d.partial)
	text := string(d.partial[:n])
	d.partial = append(d.partial[:0], d.partial[n:]...)
	out, stop := d.stops.push(text)
	if stop {
		d.stopped = true
		d.partial = d.partial[:0]
	}
	if out != "" {
		deltas = d.split.Push(out)
	}
	return deltas, stop
}

// Inject feeds text that the model did not generate but that is part of
// its answer (a forced tool-call opening) straight to the Splitter, after
// the text held so far: the generation before it has ended.
func (d *TextDecoder) Inject(text string) []Delta {
	var deltas []Delta
	if rest := d.stops.flush() + string(d.partial); rest != "" {
		d.partial = d.partial[:0]
		deltas = d.split.Push(rest)
	}
	return append(deltas, d.split.Push(text)...)
}

// Finish ends the text: held-back text is passed on (an unfinished
// character as it is; JSON encoding makes it U+FFFD) and the Splitter ends.
func (d *TextDecoder) Finish() []Delta {
	var deltas []Delta
	if !d.stopped {
		rest := d.stops.flush() + string(d.partial)
		d.partial = d.partial[:0]
		if rest != "" {
			deltas = d.split.Push(rest)
		}
	}
	return append(deltas, d.split.Finish()...)
}

// incompleteTail is the length of an unfinished UTF-8 sequence at the end
// of b (0 when b ends on a whole character or on bytes that can never
// become one).
func incompleteTail(b []byte) int {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// Stop is a text that ends the generation. A client's stop strings
// are cut from the output; the server's own (keep) are passed on, as when
// generation ends after a tool call's closing tag.
type Stop struct {
	Text string
	Keep bool
	// Client: one of the request's stop strings (Anthropic's stop_sequence
	// names it), not the server's own.
	Client bool
}

// stopMatcher finds stop strings across pieces of text, holding back a
// tail that may be the start of one.
type stopMatcher struct {
	stops   []Stop
	held    string
	matched *Stop // the stop string that ended the text
}

// push adds text and returns what can be passed on; stop reports a match
// (the returned text then ends at the stop string, or after it if kept).
func (m *stopMatcher) push(s string) (out string, stop bool) {
	if len(m.stops) == 0 {
		return s, false
	}
	buf := m.held + s
	at, which := -1, -1
	for i, st := range m.stops {
		j := strings.Index(buf, st.Text)
		if j >= 0 && (at < 0 || j < at || (j == at && len(st.Text) > len(m.stops[which].Text))) {
			at, which = j, i
		}
	}
	if at >= 0 {
		m.held = ""
		m.matched = &m.stops[which]
		if m.stops[which].Keep {
			return buf[:at+len(m.stops[which].Text)], true
		}
		return buf[:at], true
	}
	keep := 0
	for _, st := range m.stops {
		keep = max(keep, partialSuffix(buf, st.Text))
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held text: the generation ended without a match.
func (m *stopMatcher) flush() string {
	s := m.held
	m.held = ""
	return s
}

// partialSuffix is the length of the longest tail of s that is a proper
// prefix of marker.
func partialSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// PlainText is the Splitter of text completions: all of it is content.
type PlainText struct{}

func (PlainText) Push(s string) []Delta {
	if s == "" {
		return nil
	}
	return []Delta{{Content: s}}
}

func (PlainText) Finish() []Delta { return nil }

// Reasoning markup, as engine/chat's parser reads it.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// Matched is the stop string that ended the text; nil when none did.
func (d *TextDecoder) Matched() *Stop { return d.stops.matched }

// SetStops replaces the stop strings from here on (the server's own hold
// only after the reasoning).
func (d *TextDecoder) SetStops(stops []Stop) { d.stops.stops = stops }

// ClientStops are the request's own stop strings among stops.
func ClientStops(stops []Stop) []Stop {
	var out []Stop
	for _, st := range stops {
		if st.Client {
			out = append(out, st)
		}
	}
	return out
}

// ReasoningGate watches the raw output for a <think> block: it passes the
// reasoning on and asks to stop once "</think>" is written (closed), or
// as soon as the output is known not to start with "<think>" (none).
type ReasoningGate struct {
	Open      bool   // inside <think> (set at the start when the prompt opened it)
	Undecided []byte // output so far, while it may still be "<think>"
	tail      string // the last bytes passed, to find "</think>" across pieces
	Closed    bool
	None      bool
}

// Push takes one token's bytes: pass is what belongs to the reasoning,
// stop that the gate has decided (Closed or None).
func (g *ReasoningGate) Push(piece []byte) (pass []byte, stop bool) {
	if !g.Open {
		g.Undecided = append(g.Undecided, piece...)
		t := bytes.TrimLeft(g.Undecided, " \t\r\n")
		switch {
		case bytes.HasPrefix(t, []byte(ThinkOpen)):
			g.Open = true
			piece, g.Undecided = g.Undecided, nil
		case bytes.HasPrefix([]byte(ThinkOpen), t):
			return nil, false
		default:
			g.None = true
			return nil, true
		}
	}
	window := g.tail + string(piece)
	if i := strings.Index(window, ThinkClose); i >= 0 {
		g.Closed = true
		return piece[:i+len(ThinkClose)-len(g.tail)], true
	}
	g.tail = window[max(0, len(window)-len(ThinkClose)+1):]
	return piece, false
}

// DropCutCall removes the content of deltas from the first of markers (or
// from a start of one at its very end) on: the text of a tool call the
// token limit cut, which the parser gives back as content (the call's
// opening before its name was read, an XML call's unfinished parameter,
// a closing tag cut short).
func DropCutCall(ds []Delta, markers ...string) []Delta {
	out := ds[:0:0]
	for i, d := range ds {
		if d.Content != "" {
			j := -1
			for _, m := range markers {
				if k := strings.Index(d.Content, m); k >= 0 && (j < 0 || k < j) {
					j = k
				}
				if i == len(ds)-1 {
					if n := partialSuffix(d.Content, m); n > 0 && (j < 0 || len(d.Content)-n < j) {
						j = len(d.Content) - n
					}
				}
			}
			if j >= 0 {
				if kept := strings.TrimRight(d.Content[:j], " \t\r\n"); kept != "" {
					out = append(out, Delta{Content: kept})
				}
				for _, rest := range ds[i+1:] {
					if rest.Content == "" {
						out = append(out, rest)
					}
				}
				return out
			}
		}
		out = append(out, d)
	}
	return out
}
