package logits

import (
	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// Constraint limits a generation's output to a grammar's language.
type Constraint struct {
	Grammar *grammar.Grammar
	// Trigger, when not empty, makes the grammar lazy: the output is free
	// until it contains Trigger, the grammar then constrains what follows
	// it, and once the grammar's sentence is complete the output is free
	// again until the next Trigger (tool calls under tool_choice "auto").
	// Without it the grammar constrains the whole output, which ends when
	// the sentence is complete.
	Trigger string
}

// Shaper is a request's speculative.Shaper: its grammar (lazy or not) and
// its penalties. Clones share what does not change within a step (the
// counts of the tokens before it) and keep their own tokens since.
type Shaper struct {
	g   *grammarShape // nil: no grammar
	pen *penaltyShape // nil: no penalties
}

func (s *Shaper) Shape(row []float32) {
	if s.pen != nil {
		s.pen.shape(row)
	}
	if s.g != nil {
		s.g.shape(row)
	}
}

func (s *Shaper) Allows(tok int32) bool { return s.g == nil || s.g.allows(tok) }

func (s *Shaper) Accept(tok int32) error {
	if s.g != nil {
		if err := s.g.accept(tok); err != nil {
			return err
		}
	}
	if s.pen != nil {
		s.pen.accept(tok)
	}
	return nil
}

func (s *Shaper) Clone() speculative.Shaper {
	c := &Shaper{}
	if s.g != nil {
		c.g = s.g.clone()
	}
	if s.pen != nil {
		c.pen = s.pen.clone()
	}
	return c
}

// Finished reports that a grammar that is not lazy has a complete sentence
// that nothing can extend: the generation is over.
func (s *Shaper) Finished() bool {
	return s.g != nil && s.g.trigger == nil && s.g.m.Finished()
}

// grammarShape is a grammar's position in the output, with the lazy
// grammar's watch for its trigger.
type grammarShape struct {
	g       *grammar.Grammar
	v       *grammar.Vocab
	piece   func(int32) []byte
	isEOG   func(int32) bool
	trigger []byte           // nil: the grammar holds from the start
	trig    *triggerIndex    // the tokens that may complete trigger
	m       *grammar.Matcher // nil while a lazy grammar waits for its trigger
	tail    []byte           // a waiting lazy grammar's last output bytes (len(trigger)-1 at most)
	mask    *[]uint64        // Shape's scratch, shared by clones (one goroutine)
}

func (g *grammarShape) shape(row []float32) {
	if g.m == nil {
		g.shapeFree(row)
		return
	}
	mask := *g.mask
	g.m.Mask(mask)
	ninf := float32(math.Inf(-1))
	n := min(len(row), g.v.Size())
	for w, bits := range mask {
		lo, hi := w*64, min((w+1)*64, n)
		switch {
		case lo >= n:
		case bits == ^uint64(0):
		case bits == 0:
			copy(row[lo:hi], negInf64[:]) // most words, outside strings
		default:
			for i := lo; i < hi; i++ {
				if bits&(1<<(i-lo)) == 0 {
					row[i] = ninf
				}
			}
		}
	}
	for i := n; i < len(row); i++ {
		row[i] = ninf // padding rows past the tokenizer's vocabulary
	}
}

// shapeFree masks, while a lazy grammar waits, the tokens that would
// complete its trigger and go on with bytes the grammar does not allow
// after it (a token "a>{" after "<tool_call"): the text stays free, but a
// call can only open into the grammar.
func (g *grammarShape) shapeFree(row []float32) {
	ninf := float32(math.Inf(-1))
	check := func(ids []int32) {
		for _, id := range ids {
			if int(id) < len(row) && row[id] != ninf && !g.allows(id) {
				row[id] = ninf
			}
		}
	}
	check(g.trig.contains)
	for k := 1; k < len(g.trigger); k++ {
		if bytes.HasSuffix(g.tail, g.trigger[:k]) {
			check(g.trig.completes[k])
		}
	}
}

// negInf64 is 64 times -Inf, copied over the logits of a word of
// forbidden tokens.
var negInf64 = func() (a [64]float32) {
	for i := range a {
		a[i] = float32(math.Inf(-1))
	}
	return a
}()

// triggerIndex lists the tokens that can complete a trigger: those whose
// bytes hold it with more bytes after it, and, for each k, those that
// begin with its last len-k bytes (completing it after a text that ends
// with its first k). Tokens that end right at the trigger's end need no
// check.
type triggerIndex struct {
	contains  []int32
	completes [][]int32
}

func newTriggerIndex(trigger []byte, piece func(int32) []byte, n int) *triggerIndex {
	ti := &triggerIndex{completes: make([][]int32, len(trigger))}
	for id := range int32(n) {
		p := piece(id)
		if at := bytes.Index(p, trigger); at >= 0 && at+len(trigger) < len(p) {
			ti.contains = append(ti.contains, id)
		}
		for k := 1; k < len(trigger); k++ {
			if rest := trigger[k:]; len(p) > len(rest) && bytes.HasPrefix(p, rest) {
				ti.completes[k] = append(ti.completes[k], id)
			}
		}
	}
	return ti
}

func (g *grammarShape) allows(tok int32) bool {
	if g.m != nil {
		return g.m.Allows(tok)
	}
	c := g.clone()
	return c.accept(tok) == nil
}

func (g *grammarShape) accept(tok int32) error {
	if g.m != nil {
		if err := g.m.Accept(tok); err != nil {
			return err
		}
		if g.trigger != nil && g.m.Finished() {
			g.m, g.tail = nil, g.tail[:0] // the call is complete: free again
		}
		return nil
	}
	if g.isEOG(tok) {
		return nil
	}
	text := append(g.tail, g.piece(tok)...)
	at := bytes.Index(text, g.trigger)
	if at < 0 {
		keep := min(len(text), len(g.trigger)-1)
		g.tail = append(g.tail[:0], text[len(text)-keep:]...)
		return nil
	}
	m := g.g.NewMatcher(g.v)
	if err := m.AcceptBytes(text[at+len(g.trigger):]); err != nil {
		return fmt.Errorf("token %d writes %q after %q, which the grammar does not allow: %w", tok, text[at+len(g.trigger):], g.trigger, err)
	}
	g.m, g.tail = m, g.tail[:0]
	return nil
}

func (g *grammarShape) clone() *grammarShape {
	c := *g
	c.tail = bytes.Clone(g.tail)
	if g.m != nil {
		c.m = g.m.Clone()
	}
	return &c
}

// penaltyShape keeps what the penalties count: the output tokens and the
// window of the repetition penalty. A clone shares the parent's maps,
// unchanged while it lives (within one speculative step), and counts its
// own tokens in extra.
type penaltyShape struct {
	p      sample.Penalties
	counts map[int32]int32 // output tokens
	recent []int32         // the last Window() tokens of prompt and output, oldest first
	owner  bool            // counts and recent are this one's to change
	extra  []int32         // a clone's tokens since it was made

	scratchCounts map[int32]int32
	scratchWindow map[int32]bool
}

func newPenaltyShape(p sample.Penalties, prompt []int32) *penaltyShape {
	ps := &penaltyShape{p: p, counts: map[int32]int32{}, owner: true,
		scratchCounts: map[int32]int32{}, scratchWindow: map[int32]bool{}}
	if w := p.Window(); w > 0 {
		ps.recent = append(ps.recent, prompt[max(0, len(prompt)-w):]...)
	}
	return ps
}

func (ps *penaltyShape) shape(row []float32) {
	counts, window := ps.counts, ps.scratchWindow
	clear(window)
	w := ps.p.Window()
	if len(ps.extra) > 0 {
		counts = ps.scratchCounts
		clear(counts)
		for id, c := range ps.counts {
			counts[id] = c
		}
		for _, id := range ps.extra {
			counts[id]++
		}
	}
	if w > 0 {
		all := len(ps.recent) + len(ps.extra)
		for i := max(0, all-w); i < all; i++ {
			if i < len(ps.recent) {
				window[ps.recent[i]] = true
			} else {
				window[ps.extra[i-len(ps.recent)]] = true
			}
		}
	}
	ps.p.Apply(row, counts, window)
}

func (ps *penaltyShape) accept(tok int32) {
	if !ps.owner {
		ps.extra = append(ps.extra, tok)
		return
	}
	ps.counts[tok]++
	if w := ps.p.Window(); w > 0 {
		ps.recent = append(ps.recent, tok)
		if len(ps.recent) > 2*w {
			ps.recent = append(ps.recent[:0], ps.recent[len(ps.recent)-w:]...)
		}
	}
}

func (ps *penaltyShape) clone() *penaltyShape {
	c := *ps
	c.owner = false
	c.extra = append([]int32(nil), ps.extra...)
	return &c
}

// Vocab is what shaping needs of a model's tokenizer, built once and
// shared by every request: the vocabulary as grammars see it and the lazy
// grammars' trigger indexes, each made on first use. Any goroutine may use
// it.
type Vocab struct {
	tok      *tokenizer.Tokenizer
	once     sync.Once
	grammar  *grammar.Vocab
	mu       sync.Mutex // guards triggers
	triggers map[string]*triggerIndex
}

// NewVocab returns the shaping vocabulary of tok.
func NewVocab(tok *tokenizer.Tokenizer) *Vocab { return &Vocab{tok: tok} }

// Shaper returns the shaper of a request with constraint c (nil: none),
// penalties p and prompt (the repetition window starts in it); nil when it
// has neither grammar nor penalties.
func (v *Vocab) Shaper(c *Constraint, p sample.Penalties, prompt []int32) *Shaper {
	sh := &Shaper{}
	if c != nil && c.Grammar != nil {
		gv := v.Grammar()
		mask := make([]uint64, (gv.Size()+63)/64)
		g := &grammarShape{g: c.Grammar, v: gv, piece: v.tok.Piece, isEOG: v.tok.IsEOG, mask: &mask}
		if c.Trigger != "" {
			g.trigger = []byte(c.Trigger)
			g.trig = v.triggerIndex(c.Trigger)
		} else {
			g.m = c.Grammar.NewMatcher(gv)
		}
		sh.g = g
	}
	if p.Active() {
		sh.pen = newPenaltyShape(p, prompt)
	}
	if sh.g == nil && sh.pen == nil {
		return nil
	}
	return sh
}

// triggerIndex returns the tokens that may complete trigger, made on
// first use and kept (a few triggers per template).
func (v *Vocab) triggerIndex(trigger string) *triggerIndex {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ti, ok := v.triggers[trigger]; ok {
		return ti
	}
	if v.triggers == nil || len(v.triggers) > 16 {
		v.triggers = map[string]*triggerIndex{}
	}
	ti := newTriggerIndex([]byte(trigger), v.tok.Piece, len(v.tok.Vocab().Tokens))
	v.triggers[trigger] = ti
	return ti
}

// Grammar is the tokenizer's vocabulary as grammars see it, made on first
// use: every token's bytes but control tokens', which no grammar allows
// (end-of-generation tokens are allowed where a sentence may end).
func (v *Vocab) Grammar() *grammar.Vocab {
	v.once.Do(func() {
		tok := v.tok
		tv := tok.Vocab()
		pieces := make([][]byte, len(tv.Tokens))
		var eog []int32
		for id := range pieces {
			t := int32(id)
			switch {
			case tok.IsEOG(t):
				eog = append(eog, t)
			case tv.Types != nil && (tv.Types[id] == tokenizer.TypeControl || tv.Types[id] == tokenizer.TypeUnused):
			default:
				pieces[id] = tok.Piece(t)
			}
		}
		v.grammar = grammar.NewVocab(pieces, eog)
	})
	return v.grammar
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Piece   []byte
	Logprob float32
}

// Logprobs is token id's log-probability in row, the shaped logits it
// was drawn from, at temperature temp (1 for a greedy pick), and the top
// (at most) most likely tokens of that distribution, most likely first.
func (v *Vocab) Logprobs(row []float32, temp float64, id int32, top int) (float32, []TokenLogprob) {
	maxL := math.Inf(-1)
	for _, l := range row {
		maxL = max(maxL, float64(l))
	}
	sum := 0.0
	for _, l := range row {
		if !math.IsInf(float64(l), -1) {
			sum += math.Exp((float64(l) - maxL) / temp)
		}
	}
	lse := maxL/temp + math.Log(sum)
	lp := func(id int32) float32 { return float32(float64(row[id])/temp - lse) }
	if top == 0 {
		return lp(id), nil
	}
	best := make([]TokenLogprob, 0, top+1)
	for id, l := range row {
		if math.IsInf(float64(l), -1) {
			continue
		}
		if len(best) == top && l <= row[best[len(best)-1].ID] {
			continue
		}
		at := len(best)
		for at > 0 && row[best[at-1].ID] < l {
			at--
		}
		best = append(best, TokenLogprob{})
		copy(best[at+1:], best[at:])
		best[at] = TokenLogprob{ID: int32(id)}
		best = best[:min(len(best), top)]
	}
	for i := range best {
		best[i].Piece = v.tok.Piece(best[i].ID)
		best[i].Logprob = lp(best[i].ID)
	}
	return lp(id), best
}
