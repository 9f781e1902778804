package model

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Weights is a read-only view of a loaded model's parameters and the
// choices its loader made, for another backend (engine/gpu) that runs the
// same architecture from the same file: loading, naming and validating
// stay here, once. Slices and matrices alias the model's (the mapped
// file): never write them.
type Weights struct {
	Hyper  Hyper
	KVType tensor.DType
	Eps    float32
	Embed  tensor.Matrix
	Layers []LayerWeights
	// GatherEarly: llama drops the rows without logits before the last
	// block's feed-forward part, qwen35 after the last block (runLayers).
	GatherEarly bool
	OutNorm     []float32
	Output      Linear
	MTP         *MTPWeights // nil when the file has no MTP head
}

// Linear is a weight matrix applied as y = (W x) * Scale + Bias (Scale 0:
// none, Bias nil: none). W.InputScale is the NVFP4 activation scale.
type Linear struct {
	W     tensor.Matrix
	Name  string // the weight's base name, e.g. "blk.0.attn_q"
	Scale float32
	Bias  []float32
}

// LayerWeights is one decoder block: exactly one of Attn and Delta is set.
type LayerWeights struct {
	AttnNorm       []float32
	Attn           *AttentionWeights
	Delta          *DeltaNetWeights
	FFNNorm        []float32
	Gate, Up, Down Linear
}

// AttentionWeights is a full attention layer (attention.go says how it
// computes).
type AttentionWeights struct {
	Heads, KVHeads, HeadDim int
	Gated                   bool // qwen35: Q yields [query | gate] per head; out *= sigmoid(gate)
	Q, K, V, O              Linear
	QNorm, KNorm            []float32 // per-head RMSNorm weights; nil: none
	Eps                     float32
	Scale                   float32 // the softmax scale, 1/sqrt(HeadDim)
	KScale, VScale          float32 // FP8 KV cache scales
	Rope                    Rope
}

// Rope is a model's rotary embedding: which pairs rotate, and the exact
// cos/sin the CPU engine uses at each position (cached per batch, so a
// backend that uploads the table computes the same rotations).
type Rope struct{ r rope }

// Dims is the number of leading dimensions of each head that rotate.
func (r Rope) Dims() int { return r.r.dims }

// NeoX reports NeoX pairing (i, i+Dims/2) (qwen35's IMRoPE too); false is
// llama's adjacent pairs (2i, 2i+1).
func (r Rope) NeoX() bool { return r.r.mode != ropeNormal }

// Table writes cos and sin of every pair's angle at pos into cs (Dims
// floats: cos, sin of pair 0, then pair 1, ...), as the CPU engine does.
func (r Rope) Table(cs []float32, pos int32) { r.r.cache(cs, pos) }

// DeltaNetWeights is a Gated DeltaNet layer (deltanet.go says how it
// computes).
type DeltaNetWeights struct {
	KHeads, VHeads, HeadDim, Kernel int
	KeyDim, ValueDim, ConvDim       int
	QKV, Z, Beta, Alpha, Out        Linear
	Conv                            []float32 // per channel, Kernel taps oldest first
	DTBias, A                       []float32 // per value head
	Norm                            []float32 // gated RMSNorm weight (head size)
	Eps                             float32
	Scale                           float32 // the query scale, 1/sqrt(HeadDim)
}

// MTPWeights is the multi-token-prediction head (mtp.go says how it
// computes): logits = Head(HeadNorm(Layer(EHProj([ENorm(embed(x)); HNorm(h)])))).
type MTPWeights struct {
	Embed        tensor.Matrix
	ENorm, HNorm []float32
	EHProj       Linear
	Layer        LayerWeights
	HeadNorm     []float32
	Head         Linear
}

// Describe returns the parameters of a model that Load built.
func Describe(m Model) (*Weights, error) {
	d, ok := m.(*decoder)
	if !ok {
		return nil, fmt.Errorf("model: Describe: %T was not made by model.Load", m)
	}
	w := &Weights{Hyper: d.hp, KVType: d.kvType, Eps: d.eps, Embed: d.embed, GatherEarly: d.gatherEarly,
		OutNorm: d.outNorm, Output: exportLinear(&d.output)}
	w.Hyper.Recurrent = append([]bool(nil), d.hp.Recurrent...)
	for i := range d.layers {
		w.Layers = append(w.Layers, exportLayer(&d.layers[i]))
	}
	if d.mtp != nil {
		m := d.mtp
		w.MTP = &MTPWeights{Embed: m.embed, ENorm: m.enorm, HNorm: m.hnorm, EHProj: exportLinear(&m.ehProj),
			Layer: exportLayer(&m.layers[0]), HeadNorm: m.headNorm, Head: exportLinear(&m.head)}
	}
	return w, nil
}

func exportLinear(l *linear) Linear {
	return Linear{W: l.m, Name: l.name, Scale: l.scale, Bias: l.bias}
}

func exportLayer(L *layer) LayerWeights {
	lw := LayerWeights{AttnNorm: L.attnNorm, FFNNorm: L.ffnNorm,
		Gate: exportLinear(&L.mlp.gate), Up: exportLinear(&L.mlp.up), Down: exportLinear(&L.mlp.down)}
	if a := L.attn; a != nil {
		lw.Attn = &AttentionWeights{Heads: a.heads, KVHeads: a.kvHeads, HeadDim: a.headDim, Gated: a.gated,
			Q: exportLinear(&a.wq), K: exportLinear(&a.wk), V: exportLinear(&a.wv), O: exportLinear(&a.wo),
			QNorm: a.qNorm, KNorm: a.kNorm, Eps: a.eps, Scale: a.scale, KScale: a.kScale, VScale: a.vScale, Rope: Rope{a.rope}}
	}
	if dn := L.delta; dn != nil {
		lw.Delta = &DeltaNetWeights{KHeads: dn.kHeads, VHeads: dn.vHeads, HeadDim: dn.headDim, Kernel: dn.kernel,
			KeyDim: dn.keyDim, ValueDim: dn.valueDim, ConvDim: dn.convDim,
			QKV: exportLinear(&dn.wqkv), Z: exportLinear(&dn.wz), Beta: exportLinear(&dn.wBeta), Alpha: exportLinear(&dn.wAlpha), Out: exportLinear(&dn.wOut),
			Conv: dn.conv, DTBias: dn.dtBias, A: dn.a, Norm: dn.norm, Eps: dn.eps, Scale: dn.scale}
	}
	return lw
}

// Check validates b against a vocabulary of vocab tokens (sizes, token
// range, parents before children) and reports whether it is a chain.
func (b *Batch) Check(vocab int) (chain bool, err error) { return b.check(vocab) }

// WantsLogits reports whether token i of b gets a row of logits.
func (b *Batch) WantsLogits(i int) bool { return b.wantsLogits(i) }

// KVLayer is one layer's rows of a KVRows: one pair of slices is set, by
// the KV type (F16 bits, F32, or E4M3 codes of K/k_scale and V/v_scale);
// none for a layer without attention. Rows follow one another, KV heads ×
// head size values each.
type KVLayer struct {
	K16, V16 []uint16
	K32, V32 []float32
	K8, V8   []byte
}

// NewKVRows wraps n tokens' rows of every layer (taken, not copied) as
// KVRows, for a backend whose state lives elsewhere (engine/gpu).
func NewKVRows(n int, layers []KVLayer) *KVRows {
	r := &KVRows{n: n, layers: make([]kvRows, len(layers))}
	for i, l := range layers {
		r.layers[i] = kvRows{k16: l.K16, v16: l.V16, k32: l.K32, v32: l.V32, k8: l.K8, v8: l.V8}
	}
	return r
}

// Layers is the number of layers the rows cover.
func (r *KVRows) Layers() int { return len(r.layers) }

// Layer returns layer i's rows (shared: never write them).
func (r *KVRows) Layer(i int) KVLayer {
	l := &r.layers[i]
	return KVLayer{K16: l.k16, V16: l.v16, K32: l.k32, V32: l.v32, K8: l.k8, V8: l.v8}
}

// RecurrentLayer is one DeltaNet layer's state (value heads × d_v rows of
// d_k, ggml's layout) and conv window (the last kernel-1 conv inputs,
// oldest first); both nil for an attention layer.
type RecurrentLayer struct{ S, Conv []float32 }

// NewRecurrent wraps per-layer recurrent states (taken, not copied).
func NewRecurrent(layers []RecurrentLayer) *Recurrent {
	r := &Recurrent{layers: make([]recCopy, len(layers))}
	for i, l := range layers {
		r.layers[i] = recCopy{s: l.S, conv: l.Conv}
	}
	return r
}

// Layers is the number of layers the copy covers.
func (r *Recurrent) Layers() int { return len(r.layers) }

// Layer returns layer i's state (shared: never write it).
func (r *Recurrent) Layer(i int) RecurrentLayer {
	return RecurrentLayer{S: r.layers[i].s, Conv: r.layers[i].conv}
}

// Matrices lists every weight matrix of the model (slices of the mapped
// file), for a backend that imports the file's pages instead of copying.
func (w *Weights) Matrices() []tensor.Matrix {
	ms := []tensor.Matrix{w.Embed, w.Output.W}
	layer := func(L *LayerWeights) {
		ms = append(ms, L.Gate.W, L.Up.W, L.Down.W)
		if a := L.Attn; a != nil {
			ms = append(ms, a.Q.W, a.K.W, a.V.W, a.O.W)
		}
		if d := L.Delta; d != nil {
			ms = append(ms, d.QKV.W, d.Z.W, d.Beta.W, d.Alpha.W, d.Out.W)
		}
	}
	for i := range w.Layers {
		layer(&w.Layers[i])
	}
	if m := w.MTP; m != nil {
		ms = append(ms, m.Embed, m.EHProj.W, m.Head.W)
		layer(&m.Layer)
	}
	return ms
}
