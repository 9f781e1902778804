package model

import (
	"fmt"
)

// loadLlama builds the dense `llama` architecture (src/models/llama.cpp):
// RMSNorm, grouped-query attention with adjacent-pair ("normal") RoPE over
// the whole head, SwiGLU, and output.weight or the tied token embedding.
func loadLlama(l *loader, opt Options) (Model, error) {
	hp := Hyper{Arch: "llama"}
	var err error
	if err = l.commonHyper(&hp); err != nil {
		return nil, err
	}
	if hp.Layers, err = l.count("block_count"); err != nil {
		return nil, err
	}
	if hp.MTPLayers, err = llamaMTPLayers(l, hp.Layers); err != nil { // llama_mtp.go
		return nil, err
	}
	hp.Layers -= hp.MTPLayers
	if hp.RopeDims != hp.HeadDim {
		return nil, l.errorf("metadata key %q = %d, but llama rotates whole heads of %d", l.key("rope.dimension_count"), hp.RopeDims, hp.HeadDim)
	}
	if n, _ := l.optCount("expert_count", 0); n > 0 {
		return nil, l.errorf("metadata key %q = %d: mixture-of-experts llama models are not supported", l.key("expert_count"), n)
	}
	freqScale, err := l.ropeScale()
	if err != nil {
		return nil, err
	}
	freqs, _, err := l.optVector("rope_freqs.weight", hp.RopeDims/2)
	if err != nil {
		return nil, err
	}
	r := newRope(ropeNormal, hp.RopeDims, hp.RopeBase, freqScale, freqs, [4]int{})

	d := &decoder{hp: hp, pool: opt.Pool, kvType: opt.KVType, eps: hp.NormEps, gatherEarly: true, observe: opt.Observe, sgemmF32: opt.SgemmF32}
	if err := l.trunkEnds(d); err != nil {
		return nil, err
	}
	d.layers = make([]layer, hp.Layers)
	for i := range d.layers {
		p := fmt.Sprintf("blk.%d.", i)
		L := &d.layers[i]
		if L.attnNorm, err = l.vector(p+"attn_norm.weight", hp.Embd); err != nil {
			return nil, err
		}
		if L.attn, err = loadAttention(l, p, &hp, false, r); err != nil {
			return nil, err
		}
		if L.ffnNorm, err = l.vector(p+"ffn_norm.weight", hp.Embd); err != nil {
			return nil, err
		}
		if L.mlp, err = loadMLP(l, p, hp.Embd, hp.FFN); err != nil {
			return nil, err
		}
	}
	if hp.MTPLayers > 0 {
		if d.mtp, err = loadLlamaMTP(l, d, r); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// commonHyper reads the keys both architectures share.
func (l *loader) commonHyper(hp *Hyper) error {
	var err error
	if hp.Vocab, err = l.vocabSize(); err != nil {
		return err
	}
	if hp.Context, err = l.count("context_length"); err != nil {
		return err
	}
	if hp.Embd, err = l.count("embedding_length"); err != nil {
		return err
	}
	if hp.FFN, err = l.count("feed_forward_length"); err != nil {
		return err
	}
	if hp.Heads, err = l.count("attention.head_count"); err != nil {
		return err
	}
	if hp.Heads == 0 {
		return l.errorf("metadata key %q is 0", l.key("attention.head_count"))
	}
	if hp.KVHeads, err = l.optCount("attention.head_count_kv", hp.Heads); err != nil {
		return err
	}
	if hp.KVHeads == 0 || hp.Heads%hp.KVHeads != 0 {
		return l.errorf("metadata key %q = %d does not divide %d query heads", l.key("attention.head_count_kv"), hp.KVHeads, hp.Heads)
	}
	if hp.HeadDim, err = l.optCount("attention.key_length", hp.Embd/hp.Heads); err != nil {
		return err
	}
	vd, err := l.optCount("attention.value_length", hp.HeadDim)
	if err != nil {
		return err
	}
	if vd != hp.HeadDim || hp.HeadDim == 0 {
		return l.errorf("metadata keys %q = %d and %q = %d: key and value heads must have the same non-zero size",
			l.key("attention.key_length"), hp.HeadDim, l.key("attention.value_length"), vd)
	}
	if hp.RopeDims, err = l.optCount("rope.dimension_count", hp.HeadDim); err != nil {
		return err
	}
	if hp.RopeDims%2 != 0 || hp.RopeDims > hp.HeadDim {
		return l.errorf("metadata key %q = %d: want an even number no larger than the head size %d", l.key("rope.dimension_count"), hp.RopeDims, hp.HeadDim)
	}
	if hp.RopeBase, err = l.optFloat("rope.freq_base", 10000); err != nil {
		return err
	}
	if hp.NormEps, err = l.float("attention.layer_norm_rms_epsilon"); err != nil {
		return err
	}
	if s, ok := l.f.GetString(l.key("rope.scaling.type")); ok && s != "none" && s != "linear" {
		return l.errorf("metadata key %q = %q: only linear RoPE scaling is supported", l.key("rope.scaling.type"), s)
	}
	return nil
}

// ropeScale is llama.cpp's freq_scale: 1/rope.scaling.factor (or the older
// rope.scale_linear), 1 when neither is set.
func (l *loader) ropeScale() (float32, error) {
	f, err := l.optFloat("rope.scaling.factor", 0)
	if err != nil {
		return 0, err
	}
	if f == 0 {
		if f, err = l.optFloat("rope.scale_linear", 0); err != nil {
			return 0, err
		}
	}
	if s, ok := l.f.GetString(l.key("rope.scaling.type")); ok && s == "none" {
		f = 0
	}
	if f == 0 {
		return 1, nil
	}
	return 1 / f, nil
}

// trunkEnds loads the token embedding, the final norm and the LM head.
func (l *loader) trunkEnds(d *decoder) error {
	var err error
	E, V := d.hp.Embd, d.hp.Vocab
	if d.embed, err = l.embedding("token_embd.weight", E, V); err != nil {
		return err
	}
	if d.outNorm, err = l.vector("output_norm.weight", E); err != nil {
		return err
	}
	d.output, err = l.output(E, V)
	return err
}
