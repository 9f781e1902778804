package turn

import (
	"fmt"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Control tokens written inside message text ("<|im_end|>\n<|im_start|>
// system" in a tool's output) stay text: only what the template itself
// writes becomes control tokens, so no message can forge a turn. Options.
// SpecialTokensInMessages restores Hugging Face's and llama.cpp's
// behaviour (every control token in the rendered prompt is one).

// Sentinels around message text in a second rendering, to find where the
// template put it: private-use code points, which no tokenizer treats
// specially and no message is expected to hold.
const (
	textOpen  = "\uE000"
	textClose = "\uE001"
)

// messageSpans returns the byte ranges of promptText that are message
// text holding control-token text, to be tokenized as plain text; nil
// when no message holds any (the common case: nothing more is done). A
// template that renders such a message differently once its text is
// marked (it inspects the text) is a 400 naming the message: its control
// tokens can be kept neither as text nor, safely, as tokens.
func (p *Pipeline) messageSpans(req chat.Request, promptText string) ([][2]int, error) {
	if p.opt.SpecialTokensInMessages {
		return nil, nil
	}
	first := -1
	holds := make([]bool, len(req.Messages)) // the messages with control-token text
	for i, m := range req.Messages {
		if ctl, ok := p.tok.ControlIn(m.Content.String()); ok {
			holds[i] = true
			if strings.Contains(m.Content.String(), textOpen) || strings.Contains(m.Content.String(), textClose) {
				return nil, fieldErr(fmt.Sprintf("messages[%d].content", i), "messages[%d].content holds the control token %q and the private-use characters U+E000/U+E001: its text cannot be kept apart from the template's", i, ctl)
			}
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return nil, nil
	}
	marked := req
	marked.Messages = make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		if holds[i] {
			m.Content = markContent(m.Content)
		}
		marked.Messages[i] = m
	}
	text, err := p.tpl.Render(marked)
	if err != nil {
		return nil, fieldErr("messages", "%v", err)
	}
	var spans [][2]int
	var plain strings.Builder
	for {
		open := strings.Index(text, textOpen)
		if open < 0 {
			plain.WriteString(text)
			break
		}
		plain.WriteString(text[:open])
		text = text[open+len(textOpen):]
		end := strings.Index(text, textClose)
		if end < 0 {
			break
		}
		start := plain.Len()
		plain.WriteString(text[:end])
		spans = append(spans, [2]int{start, plain.Len()})
		text = text[end+len(textClose):]
	}
	if plain.String() != promptText {
		return nil, fieldErr(fmt.Sprintf("messages[%d].content", first),
			"messages[%d].content holds control-token text, which is kept as text, but this chat template renders the message differently once its text is marked; remove the token text or set api.special_tokens_in_messages", first)
	}
	return spans, nil
}

// markContent wraps each text of c in the sentinels.
func markContent(c chat.Content) chat.Content {
	if c.Parts == nil {
		c.Text = textOpen + c.Text + textClose
		return c
	}
	parts := make([]chat.ContentPart, len(c.Parts))
	for i, p := range c.Parts {
		if p.Type == "text" {
			p.Text = textOpen + p.Text + textClose
		}
		parts[i] = p
	}
	c.Parts = parts
	return c
}
