package speculative

import (
	"fmt"
	"math"

	"github.com/edgellmd/edgellmd/engine/model"
)

// mtpDrafter chains the model's MTP head greedily. The head's row t takes
// the embedding of x_{t+1} and the trunk's hidden state h_t (position t)
// and predicts x_{t+2}. Rows whose inputs are both real (accepted tokens
// and the target's own hidden states) are kept in the head's KV; the draft
// rows after them are cut off again after each draft.
type mtpDrafter struct {
	head  model.MTPHead
	st    model.State
	vocab int
	embd  int

	// rows waiting to enter the head's KV: feedTok[i] with feedHid[i], the
	// trunk's hidden state of the token before it.
	feedTok []int32
	feedHid []float32
	lastH   []float32 // hidden state of the last committed trunk token
	haveH   bool

	batch  model.Batch // the fed rows
	one    model.Batch // one draft row
	logits []float32
	hidden []float32 // the head's output rows: the h of the next draft step
	top    []topEntry
}

type topEntry struct {
	tok   int32
	logit float32
}

// maxFeed is the most rows the head is fed at once whose scratch is made
// up front (a verify step accepts at most 64 tokens); more still work.
const maxFeed = 65

func newMTPDrafter(head model.MTPHead, ctxLen, vocab, embd int) (*mtpDrafter, error) {
	m := &mtpDrafter{
		head: head, st: head.NewState(ctxLen + maxFeed), vocab: vocab, embd: embd,
		lastH:   make([]float32, embd),
		logits:  make([]float32, vocab),
		hidden:  make([]float32, 2*embd),
		feedTok: make([]int32, 0, maxFeed),
		feedHid: make([]float32, 0, maxFeed*embd),
	}
	// Size the head state's scratch for the largest feed now, so that
	// decoding does not grow it.
	n := min(maxFeed, ctxLen)
	if err := m.head.Forward(m.st, m.chain(make([]int32, n), 0), make([]float32, n*embd), m.logits, nil); err != nil {
		return nil, fmt.Errorf("speculative: MTP head: %w", err)
	}
	m.st.Reset()
	return m, nil
}

// begin empties the head's KV. hidden is the trunk's state of the last
// prompt token, or nil.
func (m *mtpDrafter) begin(hidden []float32) {
	m.st.Reset()
	m.feedTok = m.feedTok[:0]
	m.feedHid = m.feedHid[:0]
	m.haveH = hidden != nil
	if m.haveH {
		copy(m.lastH, hidden)
	}
}

// pending queues the row of the pending token (after the last committed one).
func (m *mtpDrafter) pending(tok int32) {
	if !m.haveH {
		return
	}
	m.feedTok = append(m.feedTok, tok)
	m.feedHid = append(m.feedHid, m.lastH...)
	m.haveH = false
}

// accepted records the target's hidden state h of a committed token and
// the token that follows it (next < 0: not known yet, the next pending).
func (m *mtpDrafter) accepted(h []float32, next int32) {
	if next >= 0 {
		m.feedTok = append(m.feedTok, next)
		m.feedHid = append(m.feedHid, h...)
		return
	}
	copy(m.lastH, h)
	m.haveH = true
}

// draft feeds the waiting rows, then chains the head for steps tokens
// after the pending token at trunk position pos, adding each depth's top-k
// (with log-probabilities) under the greedy path. It reports false when the
// head has nothing to start from (no hidden state yet).
func (m *mtpDrafter) draft(tree *draftTree, pos, steps, topK int) (bool, error) {
	if ok, err := m.feed(tree.nodes[0].tok, pos); !ok || err != nil {
		return false, err
	}
	fed := m.st.Len()
	parent, score := int32(0), 0.0
	one := m.one1()
	for d := 1; d <= steps; d++ {
		greedy, lp := m.topK(topK)
		for i, e := range m.top {
			c := tree.add(parent, e.tok, score+float64(e.logit)-lp)
			if i == 0 {
				parent = c
			}
		}
		score += float64(m.top[0].logit) - lp
		if d == steps || score < minPathLogProb {
			break // deeper drafts would not be verified
		}
		one.Tokens[0] = greedy
		one.Pos[0] = int32(pos + d - 1)
		h := m.hidden[m.embd : 2*m.embd]
		copy(h, m.hidden[:m.embd])
		if err := m.head.Forward(m.st, one, h, m.logits, m.hidden[:m.embd]); err != nil {
			return false, err
		}
	}
	if err := m.st.Truncate(fed); err != nil {
		return false, err
	}
	return true, nil
}

// feed runs the waiting rows through the head, the last being the pending
// token's (at trunk position pos, so head position pos-1), and leaves the
// head's logits and output for that row. It reports false when there is
// nothing to feed or the rows do not end with pending.
func (m *mtpDrafter) feed(pending int32, pos int) (bool, error) {
	n := len(m.feedTok)
	if n == 0 {
		return false, nil
	}
	if m.feedTok[n-1] != pending {
		// the caller's pending token is not the one recorded: start over
		m.feedTok, m.feedHid, m.haveH = m.feedTok[:0], m.feedHid[:0], false
		return false, nil
	}
	b := m.chain(m.feedTok, pos-n)
	if err := m.head.Forward(m.st, b, m.feedHid, m.logits, m.hidden[:m.embd]); err != nil {
		return false, err
	}
	m.feedTok = m.feedTok[:0]
	m.feedHid = m.feedHid[:0]
	return true, nil
}

// chain makes the batch of toks at positions from start on, logits for the
// last only, in reused buffers.
func (m *mtpDrafter) chain(toks []int32, start int) model.Batch {
	n := len(toks)
	b := &m.batch
	b.Tokens = toks
	b.Pos = growI32(b.Pos, n)
	b.Parent = growI32(b.Parent, n)
	for i := range n {
		b.Pos[i] = int32(start + i)
		b.Parent[i] = int32(i - 1)
	}
	b.Logits = nil
	b.Verify = false
	return *b
}

// one1 returns the one-token batch of a draft step, its token and
// position to be filled in.
func (m *mtpDrafter) one1() model.Batch {
	if m.one.Tokens == nil {
		m.one = model.Batch{Tokens: make([]int32, 1), Pos: make([]int32, 1), Parent: []int32{-1}}
	}
	return m.one
}

// topK fills m.top with the k largest logits (best first) and returns the
// best token and log-sum-exp of the row.
func (m *mtpDrafter) topK(k int) (int32, float64) {
	row := m.logits[:m.vocab]
	m.top = m.top[:0]
	maxL := float32(math.Inf(-1))
	for i, l := range row {
		if l > maxL {
			maxL = l
		}
		if len(m.top) == k && l <= m.top[k-1].logit {
			continue
		}
		if len(m.top) < k {
			m.top = append(m.top, topEntry{})
		}
		j := len(m.top) - 1
		for j > 0 && l > m.top[j-1].logit {
			m.top[j] = m.top[j-1]
			j--
		}
		m.top[j] = topEntry{tok: int32(i), logit: l}
	}
	sum := 0.0
	for _, l := range row {
		sum += math.Exp(float64(l - maxL))
	}
	return m.top[0].tok, float64(maxL) + math.Log(sum)
}

func growI32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
