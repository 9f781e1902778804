package turn

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// Source runs one generation and calls emit for each output token, as
// engine.Scheduler.Submit does (the production source). Tests give a
// scripted source to stream known token sequences through the pipeline.
type Source func(ctx context.Context, req engine.Request, emit func(engine.Token) error) (engine.Result, error)

// Options configure a Pipeline.
type Options struct {
	Tokenizer *tokenizer.Tokenizer // required
	Template  *chat.Template       // required
	// ContextLen is the engine's context, in tokens; a longer prompt is
	// refused before it is queued.
	ContextLen int
	Source     Source // runs the generations; required by Run
	// SpecialTokensInMessages lets control-token text inside message
	// content become control tokens, as Hugging Face's apply_chat_template
	// and llama.cpp do; by default it stays text (special.go).
	SpecialTokensInMessages bool
	// Tokenizing, when not nil, bounds the prompts tokenized at once (its
	// capacity): a prompt that finds it full is refused with
	// engine.ErrQueueFull, as a generation the queue has no room for is.
	Tokenizing chan struct{}
	// Log gets a panic of the text stage (recovered: the request fails).
	Log zerolog.Logger
}

// Pipeline turns Requests into prompts and plans (Plan) and runs them on
// the engine (Run). It is built once per model and used by every request
// at once.
type Pipeline struct {
	opt      Options
	tok      *tokenizer.Tokenizer
	tpl      *chat.Template
	markup   ToolMarkup
	canForce bool // the template writes tool-call markup that can be forced
	bosText  string
	// maxTokenBytes is the longest token's text: a prompt of more than
	// ContextLen times it cannot fit, tokenized or not.
	maxTokenBytes int
}

// New builds a pipeline; it learns the template's tool-call markup.
func New(opt Options) (*Pipeline, error) {
	if opt.Tokenizer == nil || opt.Template == nil {
		return nil, errors.New("turn: Options.Tokenizer and Template are required")
	}
	p := &Pipeline{opt: opt, tok: opt.Tokenizer, tpl: opt.Template}
	v := p.tok.Vocab()
	for i := range v.Tokens {
		p.maxTokenBytes = max(p.maxTokenBytes, len(v.Tokens[i]), len(p.tok.Piece(int32(i))))
	}
	if v.BOS >= 0 && int(v.BOS) < len(v.Tokens) {
		p.bosText = v.Tokens[v.BOS]
	}
	p.markup, p.canForce = ProbeToolMarkup(p.tpl)
	return p, nil
}

// Markup is the template's tool-call markup; ok is false when it writes
// none (a call cannot be forced).
func (p *Pipeline) Markup() (m ToolMarkup, ok bool) { return p.markup, p.canForce }
