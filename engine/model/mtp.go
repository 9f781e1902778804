package model

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// MTPHead is a multi-token-prediction head (Qwen3.5/3.6's `mtp.*`, stored
// by llama.cpp as the extra decoder block blk.N.nextn.* after the N trunk
// layers). Given the trunk's final normed hidden state h_t of a token and
// the embedding of the token that follows it, it predicts the token after
// that: logits = head(norm(block(eh_proj([norm(embed(x_{t+1})); norm(h_t)])))).
// Its normed output is the h for the next step, so it can be chained to
// draft several tokens. It has its own KV cache, kept in its own State;
// the positions in a batch are the caller's choice (vLLM and SGLang give
// row t the position of h_t).
type MTPHead interface {
	NewState(maxTokens int) State
	// Forward runs the head on b: for token i of b (x_{t+1}), hidden holds
	// the matching h_t (Hyper().Embd floats per token, all tokens). logits
	// and hiddenOut (may be nil) receive one row per token with Logits[i]
	// set. Chains commit at once, trees wait for Commit, as Model.Forward.
	Forward(st State, b Batch, hidden, logits, hiddenOut []float32) error
}

// mtpHead follows llama.cpp's qwen35 graph_mtp (src/models/qwen35.cpp).
type mtpHead struct {
	d        *decoder
	embed    tensor.Matrix // nextn.embed_tokens, or the trunk's token_embd
	enorm    []float32
	hnorm    []float32
	ehProj   linear // [2E] -> [E]
	layers   []layer
	headNorm []float32 // nextn.shared_head_norm, or output_norm
	head     linear    // nextn.shared_head_head, or the trunk's output
}

func (m *mtpHead) NewState(maxTokens int) State {
	return newState(m, m.layers, m.d.shape(), m.d.kvType, maxTokens)
}

// commitRecurrent: the head has attention only.
func (m *mtpHead) commitRecurrent(*state, []int) {}

func (m *mtpHead) Forward(st State, b Batch, hidden, logits, hiddenOut []float32) error {
	d := m.d
	s, nOut, err := d.begin(m, st, &b, logits, hiddenOut)
	if err != nil {
		return err
	}
	n := len(b.Tokens)
	E := d.hp.Embd
	if len(hidden) < n*E {
		return fmt.Errorf("model: MTP hidden has %d floats, %d tokens need %d", len(hidden), n, n*E)
	}
	p := s.alone()
	cat := p.rows.cat[:n*2*E]
	for i, t := range b.Tokens {
		e := cat[2*i*E : (2*i+1)*E]
		h := cat[(2*i+1)*E : (2*i+2)*E]
		m.embed.RowTo(e, int(t))
		tensor.RMSNorm(e, e, m.enorm, d.eps)
		tensor.RMSNorm(h, hidden[i*E:(i+1)*E], m.hnorm, d.eps)
	}
	x := p.rows.x[:n*E]
	d.mm(&m.ehProj, x, cat, n)
	rows := d.runLayers(p, m.layers, nOut)
	d.head(p.rows, x[:rows*E], rows, m.headNorm, &m.head, logits, hiddenOut)
	s.finish()
	return nil
}

// loadMTPParts reads the nextn.* tensors of the MTP block whose names start
// with p, around its input projection eh: the embedding and hidden-state
// norms, and the optional own embedding, head norm and head (else the
// trunk's). The caller adds the block's decoder layer.
func loadMTPParts(l *loader, d *decoder, p string, eh linear) (*mtpHead, error) {
	E, V := d.hp.Embd, d.hp.Vocab
	m := &mtpHead{d: d, ehProj: eh, embed: d.embed, headNorm: d.outNorm, head: d.output}
	var err error
	if m.enorm, err = l.vector(p+"nextn.enorm.weight", E); err != nil {
		return nil, err
	}
	if m.hnorm, err = l.vector(p+"nextn.hnorm.weight", E); err != nil {
		return nil, err
	}
	if t, ok, err := l.optTensor(p+"nextn.embed_tokens.weight", int64(E), int64(V)); err != nil {
		return nil, err
	} else if ok {
		if m.embed, err = l.asMatrix(t); err != nil {
			return nil, err
		}
	}
	if v, ok, err := l.optVector(p+"nextn.shared_head_norm.weight", E); err != nil {
		return nil, err
	} else if ok {
		m.headNorm = v
	}
	if h, ok, err := l.optMatrix(p+"nextn.shared_head_head", E, V); err != nil {
		return nil, err
	} else if ok {
		m.head = h
	}
	return m, nil
}
