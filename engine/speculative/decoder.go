package speculative

import (
	"fmt"
	"slices"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// suffixHistoryTokens bounds the suffix drafter's memory of earlier
// requests (4 bytes per token for the tokens, 4 for the hash chain).
const suffixHistoryTokens = 1 << 20

// Stats count a request's decoding since Begin.
type Stats struct {
	TargetSteps int64 // target forward passes (verify steps)
	Drafted     int64 // draft tokens verified
	Accepted    int64 // draft tokens accepted
	// Drafts are the verify steps that had at least one draft token;
	// AcceptedAt[i] counts the steps whose accepted path reached depth i+1
	// (vLLM's acceptance per position), for depths up to MaxStatDepth.
	Drafts     int64
	AcceptedAt [MaxStatDepth]int64
	// Filtered are the draft nodes a Shaper (a grammar) forbade, never
	// verified.
	Filtered int64
}

// Add adds o's counts to s (a request's several runs, or several requests).
func (s *Stats) Add(o Stats) {
	s.TargetSteps += o.TargetSteps
	s.Drafted += o.Drafted
	s.Accepted += o.Accepted
	s.Drafts += o.Drafts
	for i, n := range o.AcceptedAt {
		s.AcceptedAt[i] += n
	}
	s.Filtered += o.Filtered
}

// MaxStatDepth bounds the draft depths Stats.AcceptedAt counts.
const MaxStatDepth = 16

// Decoder drafts and verifies for one sequence at a time (the engine
// worker's goroutine). It keeps, across requests, the suffix drafter's
// memory of earlier prompts and outputs.
type Decoder struct {
	m      model.Model
	vocab  int
	embd   int
	ctxLen int

	cfg       Config
	useMTP    bool
	useSuffix bool

	mtp  *mtpDrafter // nil until a config asks for it
	suf  *suffixIndex
	tree draftTree

	ctx       []int32 // the request's tokens: prompt, then everything emitted
	pendingIn bool    // ctx already ends with the pending token

	batch  model.Batch
	logits []float32
	hidden []float32
	path   []int
	out    []int32
	dist   []sample.TokenProb
	stats  Stats

	rows      []int    // the verify row of each token in out
	nodeShape []Shaper // filterTree's per-node states
	// NoFilter verifies drafts a Shaper forbids (they are then always
	// rejected): for measuring what filtering gains.
	NoFilter bool
}

// New makes a decoder for m whose sequences hold at most ctxLen tokens.
// It fails when cfg is invalid or asks only for the MTP drafter of a model
// without an MTP head.
func New(m model.Model, cfg Config, ctxLen int) (*Decoder, error) {
	if ctxLen < 1 {
		return nil, fmt.Errorf("speculative: context length %d (want >= 1)", ctxLen)
	}
	hp := m.Hyper()
	d := &Decoder{m: m, vocab: hp.Vocab, embd: hp.Embd, ctxLen: ctxLen, suf: newSuffixIndex(suffixHistoryTokens),
		ctx: make([]int32, 0, ctxLen+1)}
	if err := d.SetConfig(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// SetConfig changes the parameters; call it between requests (before
// Begin). The MTP drafter is skipped for a model without a head as long as
// another drafter is listed.
func (d *Decoder) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	head := d.m.MTP()
	if err := cfg.CheckModel(head != nil); err != nil {
		return err
	}
	useMTP := cfg.Enabled() && slices.Contains(cfg.Drafters, "mtp") && head != nil
	useSuffix := cfg.Enabled() && slices.Contains(cfg.Drafters, "suffix")
	if useMTP && d.mtp == nil {
		mtp, err := newMTPDrafter(head, d.ctxLen, d.vocab, d.embd)
		if err != nil {
			return err
		}
		d.mtp = mtp
	}
	cfg.Drafters = slices.Clone(cfg.Drafters)
	d.cfg, d.useMTP, d.useSuffix = cfg, useMTP, useSuffix
	return nil
}

// Config returns the parameters in force.
func (d *Decoder) Config() Config { return d.cfg }

// Begin starts a request. prompt: the tokens committed in the target state
// (all of it, also the part restored from the prefix cache). hidden: the
// target's final normed hidden state of the last prompt token
// (model.ForwardHidden), nil when not available (the MTP drafter then
// starts after the first step).
func (d *Decoder) Begin(prompt []int32, hidden []float32) {
	d.stats = Stats{}
	d.pendingIn = false
	// Remember the prompt for the suffix drafter. A chat's next turn repeats
	// the previous request: push only what is new, keeping some tokens of
	// context in front of it so that matches can start there.
	lcp := 0
	for lcp < len(prompt) && lcp < len(d.ctx) && prompt[lcp] == d.ctx[lcp] {
		lcp++
	}
	if lcp == len(d.ctx) && lcp > 0 {
		// the stream ends with the previous request's tokens
		d.pushAll(prompt[lcp:])
	} else {
		d.suf.separate()
		d.pushAll(prompt[max(0, lcp-maxMatchLen):])
	}
	d.ctx = append(d.ctx[:0], prompt...)
	if d.mtp != nil {
		d.mtp.begin(hidden)
	}
}

func (d *Decoder) pushAll(toks []int32) {
	for _, t := range toks {
		d.suf.push(t)
	}
}

// Stats returns the counts since Begin.
func (d *Decoder) Stats() Stats { return d.stats }

// Step drafts, verifies the tree rooted at pending in one target forward
// pass, commits pending and the accepted nodes to st and returns the newly
// emitted tokens: the accepted draft tokens, then the target's own next
// token (the new pending token). room is how many more tokens st may take
// (>= 1); the verify batch never exceeds it. smp picks from the target's
// logits: greedily when smp.Params().Greedy(), which gives exactly the
// tokens plain decoding gives, otherwise by multi-draft rejection sampling,
// which gives them with the distribution plain sampling has (not the same
// draws for a seed). The returned slice is valid until the next Step.
func (d *Decoder) Step(st model.State, pending int32, room int, smp *sample.Sampler) ([]int32, error) {
	return d.StepShaped(st, pending, room, smp, nil)
}

// StepShaped is Step with a Shaper (nil: none) in the state after pending:
// draft nodes it forbids are dropped before verification, and each
// verified row is shaped before a token is picked from it, along the path
// as it is accepted, so that greedy output is what plain greedy decoding
// under the same Shaper gives and sampling keeps its distribution.
func (d *Decoder) StepShaped(st model.State, pending int32, room int, smp *sample.Sampler, sh Shaper) ([]int32, error) {
	if room < 1 {
		return nil, fmt.Errorf("speculative: no room in the state for the pending token")
	}
	if pending < 0 || int(pending) >= d.vocab {
		return nil, fmt.Errorf("speculative: pending token %d is outside the vocabulary of %d", pending, d.vocab)
	}
	d.notePending(pending)
	L := st.Len()
	tr := &d.tree
	tr.reset(pending)
	linear := d.cfg.Mode == "linear"
	maxNodes := 0
	if d.cfg.Enabled() {
		maxNodes = min(d.cfg.VerifyNodes, room-1)
		if linear {
			maxNodes = min(maxNodes, d.cfg.Steps)
		}
	}
	if d.useMTP {
		d.mtp.pending(pending)
	}
	if maxNodes > 0 {
		steps := min(d.cfg.Steps, maxNodes)
		if d.useMTP {
			k := d.cfg.TopK
			if linear {
				k = 1
			}
			if _, err := d.mtp.draft(tr, L, steps, min(k, d.vocab)); err != nil {
				return nil, fmt.Errorf("speculative: MTP draft: %w", err)
			}
		}
		if d.useSuffix {
			d.suf.draft(tr, d.ctx, steps, d.vocab)
		}
	}
	if sh != nil && !d.NoFilter && len(tr.nodes) > 1 {
		d.filterTree(sh)
	}
	sel := tr.pick(maxNodes, linear)
	n := len(sel)
	b := d.verifyBatch(sel, L)
	V, E := d.vocab, d.embd
	d.logits = growF32(d.logits, n*V)
	var hidden []float32
	if d.useMTP {
		d.hidden = growF32(d.hidden, n*E)
		hidden = d.hidden
	}
	if err := d.m.ForwardHidden(st, b, d.logits, hidden); err != nil {
		return nil, fmt.Errorf("speculative: verify %d nodes: %w", n, err)
	}
	d.stats.TargetSteps++
	d.stats.Drafted += int64(n - 1)

	greedy := smp.Params().Greedy()
	d.path = append(d.path[:0], 0)
	d.out = d.out[:0]
	d.rows = d.rows[:0]
	var walk Shaper
	if sh != nil {
		walk = sh.Clone()
	}
	for cur := 0; ; {
		row := d.logits[cur*V : (cur+1)*V]
		if walk != nil {
			walk.Shape(row)
		}
		d.rows = append(d.rows, cur)
		var t int32
		next := -1
		if greedy {
			t = sample.Argmax(row)
			next = d.child(cur, t)
		} else {
			t, next = d.reject(cur, row, smp)
		}
		d.out = append(d.out, t)
		if next < 0 {
			break
		}
		if walk != nil {
			if err := walk.Accept(t); err != nil {
				return nil, fmt.Errorf("speculative: shaper refused an accepted token: %w", err)
			}
		}
		d.path = append(d.path, next)
		cur = next
	}
	if b.Verify {
		if err := st.Commit(d.path); err != nil {
			return nil, fmt.Errorf("speculative: commit: %w", err)
		}
	}
	d.stats.Accepted += int64(len(d.path) - 1)
	if n > 1 {
		d.stats.Drafts++
	}
	for i := 0; i < len(d.path)-1 && i < MaxStatDepth; i++ {
		d.stats.AcceptedAt[i]++
	}
	if d.useMTP {
		for k, idx := range d.path {
			next := int32(-1)
			if k+1 < len(d.path) {
				next = d.out[k]
			}
			d.mtp.accepted(hidden[idx*E:(idx+1)*E], next)
		}
	}
	for _, t := range d.out {
		d.ctx = append(d.ctx, t)
		d.suf.push(t)
	}
	d.pendingIn = true
	return d.out, nil
}

// Rows returns the shaped logits row each token of the last Step's output
// was picked from (for log-probabilities); valid until the next Step.
func (d *Decoder) Rows(dst [][]float32) [][]float32 {
	dst = dst[:0]
	for _, r := range d.rows {
		dst = append(dst, d.logits[r*d.vocab:(r+1)*d.vocab])
	}
	return dst
}

// notePending appends the pending token to the context unless the last
// Step emitted it.
func (d *Decoder) notePending(pending int32) {
	if d.pendingIn && len(d.ctx) > 0 && d.ctx[len(d.ctx)-1] == pending {
		return
	}
	d.ctx = append(d.ctx, pending)
	d.suf.push(pending)
}

// verifyBatch lays the picked nodes out as a batch: the root (pending) at
// the state's length, every node at its depth after it, all with logits.
func (d *Decoder) verifyBatch(sel []int32, L int) model.Batch {
	n := len(sel)
	b := &d.batch
	b.Tokens = growI32(b.Tokens, n)
	b.Pos = growI32(b.Pos, n)
	b.Parent = growI32(b.Parent, n)
	if cap(b.Logits) < n {
		b.Logits = make([]bool, n)
	}
	b.Logits = b.Logits[:n]
	for i, id := range sel {
		nd := &d.tree.nodes[id]
		b.Tokens[i] = nd.tok
		b.Pos[i] = int32(L) + nd.depth
		b.Parent[i] = -1
		if nd.parent >= 0 {
			b.Parent[i] = d.tree.nodes[nd.parent].batch
		}
		b.Logits[i] = true
	}
	// a lone root is a plain decode step, committed at once
	b.Verify = n > 1
	return *b
}

// child returns the batch index of the verified child of batch node cur
// with token t, or -1.
func (d *Decoder) child(cur int, t int32) int {
	tr := &d.tree
	for c := tr.nodes[tr.sel[cur]].firstChild; c >= 0; c = tr.nodes[c].nextSibling {
		if nd := &tr.nodes[c]; nd.batch >= 0 && nd.tok == t {
			return int(nd.batch)
		}
	}
	return -1
}

// reject is one node of multi-draft rejection sampling with drafts that
// are fixed tokens (SpecInfer's rule with point-mass draft distributions,
// Miao et al. 2023, §4): each verified child c is accepted with probability
// r(c) / Σr, where r is the target's distribution p with the children
// already rejected removed; when all are rejected the token is drawn from
// the last r. The token emitted is then distributed as p exactly:
// P(c_i) = Π_{j<i}(1 - r_j) · p(c_i)/(1 - Σ_{j<i} p(c_j)) = p(c_i).
// It returns the token and the accepted child's batch index (-1: none).
func (d *Decoder) reject(cur int, row []float32, smp *sample.Sampler) (int32, int) {
	tr := &d.tree
	first := tr.nodes[tr.sel[cur]].firstChild
	verified := false
	for c := first; c >= 0; c = tr.nodes[c].nextSibling {
		if tr.nodes[c].batch >= 0 {
			verified = true
			break
		}
	}
	if !verified {
		return smp.Pick(row), -1
	}
	d.dist = smp.Distribution(row, d.dist)
	rem := 0.0
	for _, e := range d.dist {
		rem += e.P
	}
	for c := first; c >= 0; c = tr.nodes[c].nextSibling {
		nd := &tr.nodes[c]
		if nd.batch < 0 {
			continue
		}
		i := 0
		for i < len(d.dist) && d.dist[i].ID != nd.tok {
			i++
		}
		if i == len(d.dist) || d.dist[i].P <= 0 {
			continue
		}
		p := d.dist[i].P
		if smp.Uniform()*rem < p {
			return nd.tok, int(nd.batch)
		}
		rem -= p
		d.dist[i].P = 0
	}
	return drawResidual(d.dist, smp.Uniform()), -1
}

// drawResidual draws from the tokens of dist with P > 0, in proportion to
// P, with u uniform in [0, 1).
func drawResidual(dist []sample.TokenProb, u float64) int32 {
	sum := 0.0
	last := -1
	for i, e := range dist {
		if e.P > 0 {
			sum += e.P
			last = i
		}
	}
	if last < 0 {
		// every token the target allows was drafted and rejected: only
		// rounding gets here; the largest is as good as any
		return dist[0].ID
	}
	u *= sum
	cum := 0.0
	for _, e := range dist {
		if e.P > 0 {
			cum += e.P
			if u < cum {
				return e.ID
			}
		}
	}
	return dist[last].ID
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
