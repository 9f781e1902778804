package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

// gpuMTP is the multi-token-prediction head on the device (model.MTPHead):
// logits = head(norm(block(eh_proj([norm(embed(x)); norm(h)])))), with its
// own KV cache in its own state.
type gpuMTP struct {
	m            *gpuModel
	embed        *Matrix
	enorm, hnorm *Buffer
	ehProj       gpuLinear
	layers       []gpuLayer
	headNorm     *Buffer
	head         gpuLinear
}

func (m *gpuModel) loadMTP(w *model.MTPWeights) (*gpuMTP, error) {
	h := &gpuMTP{m: m, layers: make([]gpuLayer, 1)}
	var err error
	// The head often shares the trunk's embedding and output: upload once.
	h.embed = m.embed
	if w.Embed.Data == nil || &w.Embed.Data[0] != &m.w.Embed.Data[0] {
		if h.embed, err = m.matrix("nextn.embed_tokens", w.Embed); err != nil {
			return nil, err
		}
	}
	h.head = m.output
	if w.Head.W.Data == nil || &w.Head.W.Data[0] != &m.w.Output.W.Data[0] {
		if h.head, err = m.linear(w.Head); err != nil {
			return nil, err
		}
	}
	if h.enorm, err = m.vector(w.ENorm); err != nil {
		return nil, err
	}
	if h.hnorm, err = m.vector(w.HNorm); err != nil {
		return nil, err
	}
	if h.headNorm, err = m.vector(w.HeadNorm); err != nil {
		return nil, err
	}
	if h.ehProj, err = m.linear(w.EHProj); err != nil {
		return nil, err
	}
	lw := w.Layer
	if err := m.layer(&h.layers[0], &lw); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *gpuMTP) NewState(maxTokens int) model.State {
	s, err := newState(h.m, h.layers, maxTokens, true)
	if err != nil {
		return &gpuState{m: h.m, mtp: true, err: err}
	}
	return s
}

func (h *gpuMTP) Forward(st model.State, b model.Batch, hidden, logits, hiddenOut []float32) error {
	s, err := h.m.begin(st, true, &b, logits, hiddenOut, false)
	if err != nil {
		return err
	}
	if len(hidden) < len(b.Tokens)*h.m.hp.Embd {
		return fmt.Errorf("GPU model: MTP hidden has %d floats, %d tokens need %d", len(hidden), len(b.Tokens), len(b.Tokens)*h.m.hp.Embd)
	}
	return s.forward(&b, logits, hidden, hiddenOut, nil)
}

// mtpInput records the head's input rows into p.x: eh_proj of the normed
// embedding of each of the nt tokens beside the normed trunk hidden state
// it follows (inHidden, E floats a token).
func (m *gpuModel) mtpInput(r *Recorder, p *passBufs, nt int, inHidden []float32) error {
	h := m.mtp
	E := m.hp.Embd
	hin, err := p.grow(&p.hin, int64(nt*E*4), true)
	if err != nil {
		return err
	}
	copy(bytesF32(hin.Bytes()), inHidden[:nt*E])
	r.GetRows(p.g.All(), h.embed, p.ids.All(), nt)
	r.Barrier()
	r.RMSNorm(p.g.All(), p.g.All(), h.enorm.All(), nt, E, m.w.Eps)
	r.RMSNorm(p.h.All(), hin.All(), h.hnorm.All(), nt, E, m.w.Eps)
	r.Barrier()
	row := int64(E * 4)
	for i := int64(0); i < int64(nt); i++ {
		r.Copy(p.cat.Slice(2*i*row, row), p.g.Slice(i*row, row), row)
		r.Copy(p.cat.Slice((2*i+1)*row, row), p.h.Slice(i*row, row), row)
	}
	r.Barrier()
	m.apply(r, p, &h.ehProj, p.x, p.cat, nt)
	return nil
}
