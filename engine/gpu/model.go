package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// chunkTokens bounds the tokens of one recorded forward pass: a longer
// chain (a prompt) runs as several passes, so that the scratch a state
// keeps on the device stays small.
const chunkTokens = 256

// maxTreeNodes bounds a tree (or verify) batch: it must fit one pass.
const maxTreeNodes = 128

// gpuModel is the GPU twin of a CPU model: the same weights on the device,
// the same architecture, the same Batch contract.
type gpuModel struct {
	dev    *Device
	w      *model.Weights
	hp     model.Hyper
	act    tensor.NVFP4Activations
	embed  *Matrix
	layers []gpuLayer
	norm   *Buffer
	output gpuLinear
	mtp    *gpuMTP
	multi  multiPass             // the scratch of passes over several sequences
	owned  []interface{ Free() } // everything uploaded, freed by Close
	span   *hostSpan             // the imported file pages (nil: weights copied)
	// Imported and Copied count the matrices used in place from the mapped
	// file and those copied to device memory.
	imported, copied int
}

type gpuLinear struct {
	name  string
	m     *Matrix
	scale float32
	bias  *Buffer // nil: none
}

type gpuLayer struct {
	w                 *model.LayerWeights
	attnNorm, ffnNorm *Buffer
	// attention
	q, k, v, o   gpuLinear
	qNorm, kNorm *Buffer
	// DeltaNet
	delta                    *DeltaLayer
	qkv, z, beta, alpha, out gpuLinear
	gate, up, down           gpuLinear
}

// Load builds the GPU twin of a model that model.Load made (the CPU model
// names, checks and maps the weights; this copies them to the device),
// with act the arithmetic of products with NVFP4 weights, as the CPU pool
// has it. The result implements model.Model; its states live on the
// device. A model that does not fit (memory, or a tensor larger than one
// binding may address) is an error naming what does not fit.
func Load(dev *Device, cpu model.Model, act tensor.NVFP4Activations) (model.Model, error) {
	w, err := model.Describe(cpu)
	if err != nil {
		return nil, err
	}
	return load(dev, w, act, dev.sharesHostMemory())
}

// load builds the model, with the weights imported in place when
// inPlace (and the driver takes them), else copied.
func load(dev *Device, w *model.Weights, act tensor.NVFP4Activations, inPlace bool) (model.Model, error) {
	var err error
	m := &gpuModel{dev: dev, w: w, hp: w.Hyper, act: act}
	if inPlace {
		// a driver that refuses the import leaves the weights to be copied
		m.span, _ = dev.importSpan(w.Matrices())
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	if m.embed, err = m.matrix("token_embd", w.Embed); err != nil {
		return nil, err
	}
	if m.norm, err = m.vector(w.OutNorm); err != nil {
		return nil, err
	}
	if m.output, err = m.linear(w.Output); err != nil {
		return nil, err
	}
	m.layers = make([]gpuLayer, len(w.Layers))
	for i := range w.Layers {
		if err := m.layer(&m.layers[i], &w.Layers[i]); err != nil {
			return nil, err
		}
	}
	if w.MTP != nil {
		if m.mtp, err = m.loadMTP(w.MTP); err != nil {
			return nil, err
		}
	}
	ok = true
	return m, nil
}

// Close frees the model's weights on the device.
func (m *gpuModel) Close() {
	m.multi.free()
	for _, o := range m.owned {
		o.Free()
	}
	m.owned = nil
	m.span.Free()
	m.span = nil
}

// WeightsInPlace says how many matrices are used in place from the mapped
// file and how many were copied to device memory.
func (m *gpuModel) WeightsInPlace() (imported, copied int) { return m.imported, m.copied }

func (m *gpuModel) matrix(name string, t tensor.Matrix) (*Matrix, error) {
	if m.span != nil {
		if mm, err := m.span.matrix(t); err == nil {
			m.owned = append(m.owned, mm)
			m.imported++
			return mm, nil
		}
	}
	mm, err := m.dev.UploadMatrix(name, t)
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, mm)
	m.copied++
	return mm, nil
}

func (m *gpuModel) vector(v []float32) (*Buffer, error) {
	if v == nil {
		return nil, nil
	}
	b, err := m.dev.UploadF32(v)
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, b)
	return b, nil
}

func (m *gpuModel) linear(l model.Linear) (gpuLinear, error) {
	g := gpuLinear{name: l.Name, scale: l.Scale}
	var err error
	if g.m, err = m.matrix(l.Name, l.W); err != nil {
		return g, err
	}
	if g.bias, err = m.vector(l.Bias); err != nil {
		return g, err
	}
	return g, nil
}

func (m *gpuModel) layer(g *gpuLayer, L *model.LayerWeights) error {
	g.w = L
	var err error
	if g.attnNorm, err = m.vector(L.AttnNorm); err != nil {
		return err
	}
	if g.ffnNorm, err = m.vector(L.FFNNorm); err != nil {
		return err
	}
	for _, p := range []struct {
		dst *gpuLinear
		src model.Linear
	}{{&g.gate, L.Gate}, {&g.up, L.Up}, {&g.down, L.Down}} {
		if *p.dst, err = m.linear(p.src); err != nil {
			return err
		}
	}
	if a := L.Attn; a != nil {
		for _, p := range []struct {
			dst *gpuLinear
			src model.Linear
		}{{&g.q, a.Q}, {&g.k, a.K}, {&g.v, a.V}, {&g.o, a.O}} {
			if *p.dst, err = m.linear(p.src); err != nil {
				return err
			}
		}
		if g.qNorm, err = m.vector(a.QNorm); err != nil {
			return err
		}
		if g.kNorm, err = m.vector(a.KNorm); err != nil {
			return err
		}
	}
	if dn := L.Delta; dn != nil {
		for _, p := range []struct {
			dst *gpuLinear
			src model.Linear
		}{{&g.qkv, dn.QKV}, {&g.z, dn.Z}, {&g.beta, dn.Beta}, {&g.alpha, dn.Alpha}, {&g.out, dn.Out}} {
			if *p.dst, err = m.linear(p.src); err != nil {
				return err
			}
		}
		if g.delta, err = m.dev.NewDeltaLayer(dn); err != nil {
			return err
		}
		m.owned = append(m.owned, g.delta)
	}
	return nil
}

func (m *gpuModel) Arch() string       { return m.hp.Arch }
func (m *gpuModel) Hyper() model.Hyper { return m.hp }

func (m *gpuModel) MTP() model.MTPHead {
	if m.mtp == nil {
		return nil
	}
	return m.mtp
}

func (m *gpuModel) NewState(maxTokens int) model.State {
	s, err := newState(m, m.layers, maxTokens, false)
	if err != nil {
		// model.Model's NewState cannot fail; a state that does not fit
		// in device memory fails every forward pass with the reason.
		return &gpuState{m: m, err: err}
	}
	return s
}

func (m *gpuModel) Forward(st model.State, b model.Batch, logits []float32) error {
	return m.ForwardHidden(st, b, logits, nil)
}

func (m *gpuModel) ForwardHidden(st model.State, b model.Batch, logits, hidden []float32) error {
	s, err := m.begin(st, false, &b, logits, hidden, false)
	if err != nil {
		return err
	}
	return s.forward(&b, logits, nil, hidden, nil)
}

// ForwardGreedy is Forward for greedy decoding: the logits stay on the
// device and only the most likely token of each row that wants logits
// comes back (top: one per such row; ties to the lowest id, as
// sample.Argmax). A decode step then reads back 4 bytes, not a vocabulary.
func (m *gpuModel) ForwardGreedy(st model.State, b model.Batch, top []int32) error {
	if nOut := outRows(&b, 0, len(b.Tokens)); len(top) < nOut {
		return fmt.Errorf("GPU model: top has room for %d tokens, %d rows want logits", len(top), nOut)
	}
	s, err := m.begin(st, false, &b, nil, nil, true)
	if err != nil {
		return err
	}
	return s.forward(&b, nil, nil, nil, top)
}

// begin checks a forward call as the CPU model does and readies the
// state for it.
func (m *gpuModel) begin(st model.State, mtp bool, b *model.Batch, logits, hidden []float32, greedy bool) (*gpuState, error) {
	s, chain, err := m.check(st, mtp, b, logits, hidden, greedy)
	if err != nil {
		return nil, err
	}
	s.ready(b, chain)
	return s, nil
}

// check checks a forward call of batch b on st, changing nothing, and
// returns the state and whether b is a chain.
func (m *gpuModel) check(st model.State, mtp bool, b *model.Batch, logits, hidden []float32, greedy bool) (*gpuState, bool, error) {
	s, ok := st.(*gpuState)
	if !ok || s.m != m || s.mtp != mtp {
		return nil, false, fmt.Errorf("GPU model: state was not made by this model (or is the MTP head's)")
	}
	if s.err != nil {
		return nil, false, s.err
	}
	if s.pending > 0 {
		return nil, false, fmt.Errorf("GPU model: a tree batch of %d tokens is pending; Commit a path first", s.pending)
	}
	chain, err := b.Check(m.hp.Vocab)
	if err != nil {
		return nil, false, err
	}
	n := len(b.Tokens)
	if s.n+n > s.max {
		return nil, false, fmt.Errorf("GPU model: state holds %d of %d tokens; a batch of %d does not fit", s.n, s.max, n)
	}
	nOut := outRows(b, 0, n)
	if !greedy && len(logits) < nOut*m.hp.Vocab {
		return nil, false, fmt.Errorf("GPU model: logits has room for %d floats, %d tokens want %d", len(logits), nOut, nOut*m.hp.Vocab)
	}
	if hidden != nil && len(hidden) < nOut*m.hp.Embd {
		return nil, false, fmt.Errorf("GPU model: hidden has room for %d floats, %d tokens want %d", len(hidden), nOut, nOut*m.hp.Embd)
	}
	if (!chain || b.Verify) && n > maxTreeNodes {
		return nil, false, fmt.Errorf("GPU model: a tree or verify batch of %d tokens is more than %d", n, maxTreeNodes)
	}
	return s, chain, nil
}

// ready readies the state for the pass of a batch that check passed.
func (s *gpuState) ready(b *model.Batch, chain bool) {
	s.chain, s.pendingBatch = chain, !chain || b.Verify
}
