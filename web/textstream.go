package web

import (
	"strings"
	"unicode/utf8"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// splitter turns generated text, in pieces, into deltas: engine/chat's
// Parser (content, reasoning, tool calls), reasoningSplitter (content and
// reasoning) or plainText.
type splitter interface {
	Push(text string) []chat.Delta
	Finish() []chat.Delta
}

// textDecoder is the text side of one generation: it takes each token's
// bytes and gives deltas. Bytes of a UTF-8 character cut between tokens
// are held until the character is whole; text that may be the start of a
// stop string is held until it is known not to be; the rest goes to the
// splitter.
type textDecoder struct {
	partial []byte // the start of an unfinished UTF-8 character
	stops   stopMatcher
	split   splitter
	stopped bool
}

func newTextDecoder(stops []stopString, split splitter) *textDecoder {
	return &textDecoder{stops: stopMatcher{stops: stops}, split: split}
}

// push feeds one token's bytes. stop reports that a stop string matched:
// the text ends there and later pushes are ignored.
func (d *textDecoder) push(piece []byte) (deltas []chat.Delta, stop bool) {
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

// inject feeds text that the model did not generate but that is part of
// its answer (a forced tool-call opening) straight to the splitter, after
// the text held so far: the generation before it has ended.
func (d *textDecoder) inject(text string) []chat.Delta {
	var deltas []chat.Delta
	if rest := d.stops.flush() + string(d.partial); rest != "" {
		d.partial = d.partial[:0]
		deltas = d.split.Push(rest)
	}
	return append(deltas, d.split.Push(text)...)
}

// finish ends the text: held-back text is passed on (an unfinished
// character as it is; JSON encoding makes it U+FFFD) and the splitter ends.
func (d *textDecoder) finish() []chat.Delta {
	var deltas []chat.Delta
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

// stopString is a text that ends the generation. A client's stop strings
// are cut from the output; the server's own (keep) are passed on, as when
// generation ends after a tool call's closing tag.
type stopString struct {
	text string
	keep bool
	// client: one of the request's stop strings (Anthropic's stop_sequence
	// names it), not the server's own.
	client bool
}

// stopMatcher finds stop strings across pieces of text, holding back a
// tail that may be the start of one.
type stopMatcher struct {
	stops   []stopString
	held    string
	matched *stopString // the stop string that ended the text
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
		j := strings.Index(buf, st.text)
		if j >= 0 && (at < 0 || j < at || (j == at && len(st.text) > len(m.stops[which].text))) {
			at, which = j, i
		}
	}
	if at >= 0 {
		m.held = ""
		m.matched = &m.stops[which]
		if m.stops[which].keep {
			return buf[:at+len(m.stops[which].text)], true
		}
		return buf[:at], true
	}
	keep := 0
	for _, st := range m.stops {
		keep = max(keep, partialSuffix(buf, st.text))
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

// plainText is the splitter of text completions: all of it is content.
type plainText struct{}

func (plainText) Push(s string) []chat.Delta {
	if s == "" {
		return nil
	}
	return []chat.Delta{{Content: s}}
}

func (plainText) Finish() []chat.Delta { return nil }

// Reasoning markup, as engine/chat's parser reads it.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// reasoningSplitter separates <think> reasoning from content for chat
// requests whose output is not parsed for tool calls (no tools offered):
// any tool-call markup stays in the content, verbatim. Content keeps its
// whitespace exactly as generated, at both ends. What goes is the
// whitespace of the reasoning markup alone: before "<think>", at both ends
// of the reasoning, and the line breaks right after "</think>". The Qwen
// templates write "<think>\n" REASONING "\n</think>\n\n" CONTENT, and
// Qwen3's strips exactly that when it renders the turn back
// (reasoning_content.strip('\n'), content.lstrip('\n')); llama.cpp strips
// the reasoning likewise (vLLM keeps it all, "\n\n" starting the content).
type reasoningSplitter struct {
	mode      uint8 // splitStart, splitReasoning, splitContent
	buf       string
	reasoning trimmedText
	// afterThink: the content follows "</think>", and its leading line
	// breaks are the markup's.
	afterThink bool
	out        []chat.Delta
}

const (
	splitStart uint8 = iota
	splitReasoning
	splitContent
)

func newReasoningSplitter(startInReasoning bool) *reasoningSplitter {
	s := &reasoningSplitter{}
	if startInReasoning {
		s.mode = splitReasoning
	}
	return s
}

func (s *reasoningSplitter) Push(text string) []chat.Delta {
	s.buf += text
	s.run(false)
	return s.take()
}

func (s *reasoningSplitter) Finish() []chat.Delta {
	s.run(true)
	return s.take()
}

func (s *reasoningSplitter) take() []chat.Delta {
	out := s.out
	s.out = nil
	return out
}

func (s *reasoningSplitter) run(final bool) {
	for {
		switch s.mode {
		case splitStart:
			t := strings.TrimLeft(s.buf, " \t\r\n")
			switch {
			case strings.HasPrefix(t, thinkOpen):
				s.buf = t[len(thinkOpen):]
				s.mode = splitReasoning
				continue
			case !final && strings.HasPrefix(thinkOpen, t):
				return // "" or the start of "<think>": wait
			}
			s.mode = splitContent // s.buf keeps its leading whitespace
		case splitReasoning:
			if i := strings.Index(s.buf, thinkClose); i >= 0 {
				s.emitReasoning(s.buf[:i], true)
				s.buf = s.buf[i+len(thinkClose):]
				s.mode = splitContent
				s.afterThink = true
				continue
			}
			keep := 0
			if !final {
				keep = partialSuffix(s.buf, thinkClose)
			}
			s.emitReasoning(s.buf[:len(s.buf)-keep], final)
			s.buf = s.buf[len(s.buf)-keep:]
			return
		case splitContent:
			text := s.buf
			s.buf = ""
			if s.afterThink {
				if text = strings.TrimLeft(text, "\r\n"); text == "" {
					return
				}
				s.afterThink = false
			}
			if text != "" {
				s.out = append(s.out, chat.Delta{Content: text})
			}
			return
		}
	}
}

func (s *reasoningSplitter) emitReasoning(text string, end bool) {
	if out := s.reasoning.push(text, end); out != "" {
		s.out = append(s.out, chat.Delta{Reasoning: out})
	}
}

// trimmedText drops a stream's leading whitespace and holds back trailing
// whitespace until more text follows it (dropping it at the end).
type trimmedText struct {
	started bool
	ws      string
}

func (t *trimmedText) push(s string, end bool) string {
	if !t.started {
		s = strings.TrimLeft(s, " \t\r\n")
		if s != "" {
			t.started = true
		}
	}
	body := strings.TrimRight(s, " \t\r\n")
	var out string
	if body == "" {
		t.ws += s
	} else {
		out = t.ws + body
		t.ws = s[len(body):]
	}
	if end {
		t.ws = ""
	}
	return out
}
