package chat

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Markup the parser looks for in generated text.
const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
	functionOpen  = "<function="
	functionClose = "</function>"
	paramOpen     = "<parameter="
	paramClose    = "</parameter>"
)

// Longest function or parameter name accepted in the XML form; a longer one
// means the text is not a tool call.
const maxNameBytes = 256

// ParserOptions says how the prompt ended and how to name calls.
type ParserOptions struct {
	// StartInReasoning: the prompt ended inside an open <think> block (as
	// Qwen3.5's generation prompt does with thinking on; see ReasoningOpen),
	// so the output is reasoning until </think>.
	StartInReasoning bool
	// IDPrefix starts each tool call's id, followed by the call's index;
	// "call_" when empty. Give each response its own prefix where ids must be
	// unique across a conversation.
	IDPrefix string
	// NoCalls reads no tool calls: call markup is content, verbatim (a
	// request that offers no tools). Only reasoning is split off.
	NoCalls bool
}

// ReasoningOpen reports whether a rendered prompt ends inside an open
// <think> block, i.e. whether the model's output starts as reasoning.
func ReasoningOpen(prompt string) bool {
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), thinkOpen)
}

// Delta is one piece of parsed output; exactly one field is set.
type Delta struct {
	Content   string
	Reasoning string
	ToolCall  *ToolCallDelta
}

// ToolCallDelta is a piece of one tool call. The first delta of a call has
// its ID and Name; later ones carry fragments of Arguments, which joined
// make the call's arguments JSON.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Parser splits generated text, fed in pieces of any size, into content,
// reasoning and tool calls. The joined result does not depend on how the
// text was split. It knows both Qwen tool-call forms:
//
//	<tool_call>
//	{"name": "NAME", "arguments": {...}}
//	</tool_call>
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// Text that is not well-formed markup is returned as content. A call is
// committed (its id and name sent) once its name is read: in the JSON form
// when the "arguments" value begins after a "name", in the XML form at the
// end of the <function=NAME> line; before that, a malformed or unfinished
// call is returned as content, verbatim. After that, JSON arguments are
// passed on byte by byte as they validate and XML parameters one by one as
// each closes. If a committed call then turns malformed, or the text ends
// inside it (a length-limited generation), the call keeps what it has (an
// XML call's arguments are closed with "}") and the rest of its text, from the
// first element that did not parse, is returned as content.
//
// Reasoning is the text inside <think>...</think> at the start of the output
// (or up to </think> with StartInReasoning). Leading and trailing whitespace
// of reasoning and content, and whitespace between tool calls, are dropped,
// as the Qwen templates drop them when the message is rendered back.
type Parser struct {
	opts    ParserOptions
	schemas toolSchemas

	buf       string // input not yet consumed
	mode      parseMode
	thought   bool // a reasoning block closed: line breaks after it are markup
	afterCall bool // a call block ended: whitespace after it is markup
	content   textChannel
	reasoning textChannel
	call      *callState
	nCalls    int
	finished  bool

	out      []Delta
	pendKind deltaKind
	pendIdx  int
	pend     strings.Builder
}

type parseMode uint8

const (
	modeStart parseMode = iota
	modeReasoning
	modeContent
	modeCall
)

type deltaKind uint8

const (
	kindNone deltaKind = iota
	kindContent
	kindReasoning
	kindArgs
)

// textChannel strips the leading and trailing whitespace of one text
// stream: leading whitespace is dropped, trailing whitespace is held back
// until more text follows it.
type textChannel struct {
	started bool
	ws      string
}

// NewParser returns a parser for one generation. tools are the request's
// tool definitions; the XML form uses their schemas to give parameters the
// JSON types they declare.
func NewParser(tools []json.RawMessage, opts ParserOptions) *Parser {
	return newParser(readToolSchemas(tools), opts)
}

func newParser(schemas toolSchemas, opts ParserOptions) *Parser {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "call_"
	}
	p := &Parser{opts: opts, schemas: schemas}
	if opts.StartInReasoning {
		p.mode = modeReasoning
	}
	return p
}

// Push feeds the next piece of generated text and returns the deltas it
// completes. The returned slice is the caller's.
func (p *Parser) Push(text string) []Delta {
	if p.finished {
		return nil
	}
	p.buf += text
	p.run(false)
	return p.take(false)
}

// Finish ends the text and returns the last deltas: whatever was held back
// waiting to see whether it starts markup.
func (p *Parser) Finish() []Delta {
	if p.finished {
		return nil
	}
	p.run(true)
	p.finished = true
	return p.take(true)
}

// ParseOutput parses a whole generated text at once.
func ParseOutput(text string, tools []json.RawMessage, opts ParserOptions) Message {
	p := NewParser(tools, opts)
	d := p.Push(text)
	return Assemble(append(d, p.Finish()...))
}

// Assemble joins deltas into the assistant message they make.
func Assemble(deltas []Delta) Message {
	var content, reasoning strings.Builder
	var calls []ToolCall
	for _, d := range deltas {
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		if tc := d.ToolCall; tc != nil {
			for len(calls) <= tc.Index {
				calls = append(calls, ToolCall{Type: "function"})
			}
			c := &calls[tc.Index]
			if tc.ID != "" {
				c.ID = tc.ID
			}
			c.Function.Name += tc.Name
			c.Function.Arguments += tc.Arguments
		}
	}
	m := Message{Role: "assistant", Content: Content{Text: content.String()}, ToolCalls: calls}
	m.Content.Null = m.Content.Text == "" && len(calls) > 0
	if reasoning.Len() > 0 {
		r := reasoning.String()
		m.ReasoningContent = &r
	}
	return m
}

// take hands out the deltas so far. Until the end, the bytes of a UTF-8
// character cut by the piece boundary (byte-level tokens end mid-character)
// stay pending, so that every delta is valid UTF-8 when the text is.
func (p *Parser) take(final bool) []Delta {
	var tail string
	if !final {
		s := p.pend.String()
		if n := cutRune(s); n > 0 {
			tail = s[len(s)-n:]
			p.pend.Reset()
			p.pend.WriteString(s[:len(s)-n])
		}
	}
	kind, idx := p.pendKind, p.pendIdx
	p.flush()
	if tail != "" {
		p.pendKind, p.pendIdx = kind, idx
		p.pend.WriteString(tail)
	}
	out := p.out
	p.out = nil
	return out
}

// cutRune is the length of an incomplete UTF-8 sequence ending s.
func cutRune(s string) int {
	for n := 1; n <= 3 && n <= len(s); n++ {
		c := s[len(s)-n]
		if c < 0x80 {
			return 0
		}
		if c >= 0xc0 { // a leading byte
			if utf8.FullRuneInString(s[len(s)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// run consumes as much of buf as can be decided; final means no more text
// will come.
func (p *Parser) run(final bool) {
	for {
		var progressed bool
		switch p.mode {
		case modeStart:
			progressed = p.stepStart(final)
		case modeReasoning:
			progressed = p.stepText(final, thinkClose, &p.reasoning, kindReasoning)
		case modeContent:
			marker := toolCallOpen
			if p.opts.NoCalls {
				marker = ""
			}
			progressed = p.stepText(final, marker, &p.content, kindContent)
		case modeCall:
			progressed = p.stepCall(final)
		}
		if !progressed {
			return
		}
	}
}

// stepStart decides whether the output opens with <think>.
func (p *Parser) stepStart(final bool) bool {
	s := strings.TrimLeft(p.buf, " \t\r\n")
	switch {
	case strings.HasPrefix(s, thinkOpen):
		p.buf = s[len(thinkOpen):]
		p.mode = modeReasoning
		return true
	case !final && strings.HasPrefix(thinkOpen, s):
		return false // "", or a piece of "<think>": wait
	}
	p.mode = modeContent
	return true
}

// stepText passes text through on channel ch until marker (none when ""),
// holding back a tail that may be the start of the marker.
func (p *Parser) stepText(final bool, marker string, ch *textChannel, kind deltaKind) bool {
	if i := strings.Index(p.buf, marker); marker != "" && i >= 0 {
		p.emitText(ch, kind, p.buf[:i])
		p.buf = p.buf[i+len(marker):]
		if kind == kindReasoning {
			ch.ws = "" // trailing whitespace of the reasoning
			p.mode = modeContent
			p.thought = true
		} else {
			p.call = &callState{wsBefore: ch.ws}
			p.call.raw.WriteString(toolCallOpen)
			ch.ws = ""
			p.mode = modeCall
		}
		return true
	}
	keep := 0
	if !final && marker != "" {
		keep = partialSuffix(p.buf, marker)
	}
	p.emitText(ch, kind, p.buf[:len(p.buf)-keep])
	p.buf = p.buf[len(p.buf)-keep:]
	if final {
		if kind == kindContent && ch.started {
			p.emit(kind, 0, ch.ws) // the answer's own trailing whitespace
		}
		ch.ws = ""
	}
	return false
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

func (p *Parser) emitText(ch *textChannel, kind deltaKind, s string) {
	if s == "" {
		return
	}
	if !ch.started {
		// The reasoning is trimmed, as the templates trim it when they
		// render it back; content loses only the line breaks the template
		// writes after "</think>", and keeps its own whitespace.
		switch {
		case kind == kindReasoning:
			s = strings.TrimLeft(s, " \t\r\n")
		case p.thought:
			s = strings.TrimLeft(s, "\r\n")
		}
		if s == "" {
			return
		}
		ch.started = true
	}
	if kind == kindContent && p.afterCall {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		p.afterCall = false
	}
	body := strings.TrimRight(s, " \t\r\n")
	if body == "" {
		ch.ws += s
		return
	}
	p.emit(kind, 0, ch.ws+body)
	ch.ws = s[len(body):]
}

// emit appends text of one kind, joining it to the pending delta of the
// same kind.
func (p *Parser) emit(kind deltaKind, index int, s string) {
	if s == "" {
		return
	}
	if p.pendKind != kind || p.pendIdx != index {
		p.flush()
		p.pendKind, p.pendIdx = kind, index
	}
	p.pend.WriteString(s)
}

func (p *Parser) emitByte(kind deltaKind, index int, b byte) {
	if p.pendKind != kind || p.pendIdx != index {
		p.flush()
		p.pendKind, p.pendIdx = kind, index
	}
	p.pend.WriteByte(b)
}

func (p *Parser) flush() {
	if p.pendKind == kindNone {
		return
	}
	s := p.pend.String()
	p.pend.Reset()
	if s == "" {
		p.pendKind = kindNone
		return
	}
	switch p.pendKind {
	case kindContent:
		p.out = append(p.out, Delta{Content: s})
	case kindReasoning:
		p.out = append(p.out, Delta{Reasoning: s})
	case kindArgs:
		p.out = append(p.out, Delta{ToolCall: &ToolCallDelta{Index: p.pendIdx, Arguments: s}})
	}
	p.pendKind = kindNone
}

// callState follows one <tool_call> ... </tool_call> block.
type callState struct {
	wsBefore  string          // content whitespace held before the block
	raw       strings.Builder // the block's text so far, from "<tool_call>"
	form      byte            // 0 undecided, 'j' JSON, 'x' XML
	committed bool            // id and name were sent
	index     int             // the call's index once committed
	name      string          // the function name
	elemStart int             // raw offset of the element being read (an XML tag, a JSON key)
	j         jsonCallState   // the JSON form's progress
	x         xmlCallState    // the XML form's progress
	args      strings.Builder // arguments read before the name (JSON form)
}

type callStep uint8

const (
	callMore callStep = iota // byte accepted, block continues
	callDone                 // the block closed with </tool_call>
	callFail                 // the byte does not fit: the block is malformed here
)

// stepCall feeds the block's bytes one at a time.
func (p *Parser) stepCall(final bool) bool {
	c := p.call
	for i := 0; i < len(p.buf); i++ {
		pos := c.raw.Len()
		c.raw.WriteByte(p.buf[i])
		switch p.callByte(p.buf[i]) {
		case callDone:
			p.buf = p.buf[i+1:]
			p.call = nil
			p.mode = modeContent
			p.afterCall = true
			return true
		case callFail:
			rest := p.buf[i+1:]
			p.buf = ""
			p.failCall(pos, rest)
			return true
		}
	}
	p.buf = ""
	if final {
		p.failCall(c.raw.Len(), "")
		return true
	}
	return false
}

// failCall ends a block that did not parse. pos is the raw offset where it
// went wrong (len(raw) when the text ended); rest is the input after it.
func (p *Parser) failCall(pos int, rest string) {
	c := p.call
	p.call = nil
	p.mode = modeContent
	p.afterCall = c.committed
	if !c.committed {
		// Nothing was sent: the whole block is content. Its text after the
		// "<tool_call>" marker is scanned again, since another call may
		// start inside it.
		p.emitText(&p.content, kindContent, c.wsBefore+toolCallOpen)
		p.buf = c.raw.String()[len(toolCallOpen):] + rest
		return
	}
	from := pos
	switch {
	case c.form == 'x':
		p.closeXMLArgs(c)
		from = c.elemStart
	case c.j.state == jKeyStr || c.j.state == jColon || c.j.state == jValue:
		from = c.elemStart // the key whose value never came
	}
	p.buf = c.raw.String()[from:] + rest
}

// callByte advances the block by its newest byte (already in c.raw).
func (p *Parser) callByte(b byte) callStep {
	c := p.call
	switch c.form {
	case 0:
		switch {
		case isJSONSpace(b):
			return callMore
		case b == '{':
			c.form = 'j'
			return callMore
		case b == '<':
			c.form = 'x'
			c.x.state = xFunction
			c.x.lit = 1
			return callMore
		}
		return callFail
	case 'j':
		return p.jsonByte(c, b)
	default:
		return p.xmlByte(c, b)
	}
}

func (p *Parser) commit(c *callState) {
	p.flush()
	c.committed = true
	c.index = p.nCalls
	p.nCalls++
	p.out = append(p.out, Delta{ToolCall: &ToolCallDelta{
		Index: c.index,
		ID:    p.opts.IDPrefix + strconv.Itoa(c.index),
		Name:  c.name,
	}})
}

// matchTail advances a match of ws* "</tool_call>"; lit counts matched bytes.
func matchTail(lit *int, b byte) callStep {
	if *lit == 0 && isJSONSpace(b) {
		return callMore
	}
	if b != toolCallClose[*lit] {
		return callFail
	}
	if *lit++; *lit == len(toolCallClose) {
		return callDone
	}
	return callMore
}

// --- JSON form: {"name": "NAME", "arguments": {...}} ---

type jsonCallState struct {
	state   jState
	key     strings.Builder // the key being read (decoded roughly: escapes kept)
	keyName string
	str     jsonScanner     // scans key and name strings
	nameRaw strings.Builder // the name string's JSON text
	val     jsonScanner     // scans the arguments value
	hasArgs bool
	lit     int // bytes of "</tool_call>" matched
}

type jState uint8

const (
	jKeyOrEnd jState = iota // after '{' : a key or '}'
	jKey                    // after ',' : a key
	jKeyStr                 // inside a key string
	jColon
	jValue    // before a value
	jNameStr  // inside the name string
	jValueRun // inside the arguments value
	jAfter    // after a value: ',' or '}'
	jTail     // after the object: ws* "</tool_call>"
)

func (p *Parser) jsonByte(c *callState, b byte) callStep {
	j := &c.j
	switch j.state {
	case jKeyOrEnd, jKey:
		switch {
		case isJSONSpace(b):
			return callMore
		case b == '"':
			j.state = jKeyStr
			c.elemStart = c.raw.Len() - 1
			j.key.Reset()
			j.str = jsonScanner{}
			j.str.step('"')
			return callMore
		case b == '}' && j.state == jKeyOrEnd:
			return p.jsonObjectEnd(c)
		}
		return callFail
	case jKeyStr:
		switch j.str.step(b) {
		case scanError:
			return callFail
		case scanEnd:
			j.keyName = j.key.String()
			j.state = jColon
			return callMore
		}
		j.key.WriteByte(b)
		return callMore
	case jColon:
		switch {
		case isJSONSpace(b):
			return callMore
		case b == ':':
			j.state = jValue
			return callMore
		}
		return callFail
	case jValue:
		if isJSONSpace(b) {
			return callMore
		}
		if j.keyName == "name" {
			if b != '"' {
				return callFail
			}
			j.state = jNameStr
			j.nameRaw.Reset()
			j.nameRaw.WriteByte(b)
			j.str = jsonScanner{}
			j.str.step(b)
			return callMore
		}
		// Only "name" and "arguments" belong in a call; any other key (or a
		// second arguments value) makes it malformed, so that no text is
		// silently dropped.
		if (j.keyName != "arguments" && j.keyName != "parameters") || j.hasArgs {
			return callFail
		}
		j.hasArgs = true
		if c.name != "" && !c.committed {
			p.commit(c)
		}
		j.val = jsonScanner{}
		j.state = jValueRun
		return p.jsonValueByte(c, b)
	case jNameStr:
		j.nameRaw.WriteByte(b)
		switch j.str.step(b) {
		case scanError:
			return callFail
		case scanEnd:
			var name string
			if json.Unmarshal([]byte(j.nameRaw.String()), &name) != nil || name == "" || c.name != "" {
				return callFail
			}
			c.name = name
			j.state = jAfter
		}
		return callMore
	case jValueRun:
		return p.jsonValueByte(c, b)
	case jAfter:
		switch {
		case isJSONSpace(b):
			return callMore
		case b == ',':
			j.state = jKey
			return callMore
		case b == '}':
			return p.jsonObjectEnd(c)
		}
		return callFail
	case jTail:
		return matchTail(&j.lit, b)
	}
	return callFail
}

// jsonValueByte feeds a byte to the value being scanned, passing argument
// bytes on once the call is committed.
func (p *Parser) jsonValueByte(c *callState, b byte) callStep {
	j := &c.j
	r := j.val.step(b)
	if r == scanError {
		return callFail
	}
	if r == scanEndBefore {
		j.state = jAfter
		return p.jsonByte(c, b)
	}
	if c.committed {
		p.emitByte(kindArgs, c.index, b)
	} else {
		c.args.WriteByte(b)
	}
	if r == scanEnd {
		j.state = jAfter
	}
	return callMore
}

// jsonObjectEnd handles the closing '}' of the call object.
func (p *Parser) jsonObjectEnd(c *callState) callStep {
	if c.name == "" {
		return callFail
	}
	if !c.committed {
		p.commit(c)
		args := c.args.String()
		if !c.j.hasArgs {
			args = "{}"
		}
		p.emit(kindArgs, c.index, args)
	}
	c.j.state = jTail
	return callMore
}

// --- XML form: <function=NAME> <parameter=P> VALUE </parameter> </function> ---

type xmlCallState struct {
	state  xState
	lit    int             // bytes of the current literal matched
	name   strings.Builder // function or parameter name being read
	param  string
	value  strings.Builder
	tag    strings.Builder // a tag after a parameter: "<parameter=" or "</function>"
	params int             // parameters emitted
}

type xState uint8

const (
	xFunction  xState = iota // matching "<function="
	xFuncName                // reading NAME up to '>'
	xBetween                 // between parameters
	xTag                     // reading "<parameter=" or "</function>"
	xParamName               // reading P up to '>'
	xValue                   // reading VALUE up to "</parameter>"
	xTail                    // ws* "</tool_call>"
)

func (p *Parser) xmlByte(c *callState, b byte) callStep {
	x := &c.x
	switch x.state {
	case xFunction:
		if b != functionOpen[x.lit] {
			return callFail
		}
		if x.lit++; x.lit == len(functionOpen) {
			x.state = xFuncName
			x.name.Reset()
		}
		return callMore
	case xFuncName, xParamName:
		if b != '>' {
			if b == '\n' || b == '<' || x.name.Len() >= maxNameBytes {
				return callFail
			}
			x.name.WriteByte(b)
			return callMore
		}
		name := strings.TrimSpace(x.name.String())
		if name == "" {
			return callFail
		}
		if x.state == xFuncName {
			c.name = name
			p.commit(c)
			x.state = xBetween
			c.elemStart = c.raw.Len()
			return callMore
		}
		x.param = name
		x.value.Reset()
		x.state = xValue
		return callMore
	case xBetween:
		switch {
		case isJSONSpace(b):
			return callMore
		case b == '<':
			c.elemStart = c.raw.Len() - 1
			x.state = xTag
			x.tag.Reset()
			x.tag.WriteByte(b)
			return callMore
		}
		return callFail
	case xTag:
		x.tag.WriteByte(b)
		t := x.tag.String()
		switch {
		case t == paramOpen:
			x.state = xParamName
			x.name.Reset()
		case t == functionClose:
			p.closeXMLArgs(c)
			x.state = xTail
			x.lit = 0
			c.elemStart = c.raw.Len()
		case !strings.HasPrefix(paramOpen, t) && !strings.HasPrefix(functionClose, t):
			return callFail
		}
		return callMore
	case xValue:
		x.value.WriteByte(b)
		v := x.value.String()
		if !strings.HasSuffix(v, paramClose) {
			return callMore
		}
		p.emitXMLParam(c, v[:len(v)-len(paramClose)])
		x.state = xBetween
		c.elemStart = c.raw.Len()
		return callMore
	case xTail:
		return matchTail(&x.lit, b)
	}
	return callFail
}

// emitXMLParam sends one parameter as a fragment of the arguments object.
// The template writes "<parameter=P>\n" VALUE "\n</parameter>", so one
// newline is dropped at each end.
func (p *Parser) emitXMLParam(c *callState, text string) {
	text = strings.TrimPrefix(text, "\n")
	text = strings.TrimSuffix(text, "\n")
	var b strings.Builder
	if c.x.params == 0 {
		b.WriteByte('{')
	} else {
		b.WriteString(", ")
	}
	pyQuote(&b, c.x.param, false)
	b.WriteString(": ")
	b.WriteString(paramJSON(p.schemas[c.name][c.x.param], text))
	c.x.params++
	p.emit(kindArgs, c.index, b.String())
}

// closeXMLArgs ends the arguments object (once).
func (p *Parser) closeXMLArgs(c *callState) {
	switch {
	case c.x.params < 0:
		return
	case c.x.params == 0:
		p.emit(kindArgs, c.index, "{}")
	default:
		p.emit(kindArgs, c.index, "}")
	}
	c.x.params = -1
}
