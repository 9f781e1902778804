package model

import (
	"fmt"
)

// loadQwen35 builds the `qwen35` hybrid (Qwen3.5/3.6 dense; llama.cpp's
// src/models/qwen35.cpp and the hparams in llama_model_qwen35::
// load_arch_hparams): Gated DeltaNet layers and gated full-attention
// layers (by default 3 then 1, repeated), post-attention norm, SwiGLU, and
// an optional MTP block stored as layer block_count-1 (nextn_predict_layers
// = 1). Every norm weight except ssm_norm already has the +1 of Qwen's
// zero-centred RMSNorm folded in by llama.cpp's converter.
func loadQwen35(l *loader, opt Options) (Model, error) {
	hp := Hyper{Arch: "qwen35"}
	var err error
	if err = l.commonHyper(&hp); err != nil {
		return nil, err
	}
	blocks, err := l.count("block_count")
	if err != nil {
		return nil, err
	}
	if hp.MTPLayers, err = l.optCount("nextn_predict_layers", 0); err != nil {
		return nil, err
	}
	if hp.MTPLayers > blocks {
		return nil, l.errorf("metadata key %q = %d exceeds %q = %d", l.key("nextn_predict_layers"), hp.MTPLayers, l.key("block_count"), blocks)
	}
	hp.Layers = blocks - hp.MTPLayers
	if err = l.qwen35Hyper(&hp, blocks); err != nil {
		return nil, err
	}
	freqScale, err := l.ropeScale()
	if err != nil {
		return nil, err
	}
	r := newRope(ropeIMRope, hp.RopeDims, hp.RopeBase, freqScale, nil, hp.RopeSections)

	d := &decoder{hp: hp, pool: opt.Pool, kvType: opt.KVType, eps: hp.NormEps, observe: opt.Observe, sgemmF32: opt.SgemmF32}
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
		if hp.Recurrent[i] {
			L.delta, err = loadDeltaNet(l, p, &hp)
		} else {
			L.attn, err = loadAttention(l, p, &hp, true, r)
		}
		if err != nil {
			return nil, err
		}
		if L.ffnNorm, err = l.vector(p+"post_attention_norm.weight", hp.Embd); err != nil {
			return nil, err
		}
		if L.mlp, err = loadMLP(l, p, hp.Embd, hp.FFN); err != nil {
			return nil, err
		}
	}
	if hp.MTPLayers > 0 {
		if d.mtp, err = loadMTP(l, d, r); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// qwen35Hyper reads the DeltaNet and RoPE-section keys and the layer types.
func (l *loader) qwen35Hyper(hp *Hyper, blocks int) error {
	var err error
	if hp.ConvKernel, err = l.count("ssm.conv_kernel"); err != nil {
		return err
	}
	inner, err := l.count("ssm.inner_size")
	if err != nil {
		return err
	}
	if hp.StateDim, err = l.count("ssm.state_size"); err != nil {
		return err
	}
	if hp.ValueHeads, err = l.count("ssm.time_step_rank"); err != nil {
		return err
	}
	if hp.KeyHeads, err = l.count("ssm.group_count"); err != nil {
		return err
	}
	if hp.ConvKernel < 1 || hp.StateDim == 0 || hp.KeyHeads == 0 || hp.ValueHeads%hp.KeyHeads != 0 {
		return l.errorf("DeltaNet sizes: %q = %d, %q = %d, %q = %d, %q = %d: want a kernel >= 1, a state size > 0 and value heads a multiple of key heads",
			l.key("ssm.conv_kernel"), hp.ConvKernel, l.key("ssm.state_size"), hp.StateDim,
			l.key("ssm.time_step_rank"), hp.ValueHeads, l.key("ssm.group_count"), hp.KeyHeads)
	}
	if inner != hp.StateDim*hp.ValueHeads {
		return l.errorf("metadata key %q = %d, want %q × %q = %d (value heads as large as key heads)",
			l.key("ssm.inner_size"), inner, l.key("ssm.state_size"), l.key("ssm.time_step_rank"), hp.StateDim*hp.ValueHeads)
	}

	key := l.key("rope.dimension_sections")
	secs, ok := l.f.GetInt32s(key)
	if !ok || len(secs) == 0 || len(secs) > 4 {
		return l.errorf("metadata key %q missing or malformed (want an array of up to 4 integers, e.g. [11 11 10 0])", key)
	}
	sum := 0
	for i, v := range secs {
		if v < 0 {
			return l.errorf("metadata key %q has a negative section %d", key, v)
		}
		hp.RopeSections[i] = int(v)
		sum += int(v)
	}
	if sum == 0 || sum > hp.HeadDim {
		return l.errorf("metadata key %q sums to %d; want 1 to the head size %d", key, sum, hp.HeadDim)
	}

	hp.Recurrent = make([]bool, hp.Layers)
	rkey := l.key("attention.recurrent_layers")
	if kv, ok := l.f.Lookup(rkey); ok {
		flags, ok := boolArray(kv.Value)
		if !ok || len(flags) != blocks {
			return l.errorf("metadata key %q: want %d booleans, one per block", rkey, blocks)
		}
		copy(hp.Recurrent, flags[:hp.Layers])
	} else {
		interval, err := l.optCount("full_attention_interval", 4)
		if err != nil {
			return err
		}
		if interval == 0 {
			return l.errorf("metadata key %q is 0", l.key("full_attention_interval"))
		}
		for i := range hp.Recurrent {
			hp.Recurrent[i] = (i+1)%interval != 0
		}
	}
	return nil
}

// boolArray reads a GGUF array of bools or integers as flags.
func boolArray(v any) ([]bool, bool) {
	switch a := v.(type) {
	case []bool:
		return a, true
	case []int8:
		return nonZero(a), true
	case []uint8:
		return nonZero(a), true
	case []int16:
		return nonZero(a), true
	case []uint16:
		return nonZero(a), true
	case []int32:
		return nonZero(a), true
	case []uint32:
		return nonZero(a), true
	case []int64:
		return nonZero(a), true
	case []uint64:
		return nonZero(a), true
	}
	return nil, false
}

func nonZero[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64](a []T) []bool {
	out := make([]bool, len(a))
	for i, x := range a {
		out[i] = x != 0
	}
	return out
}

// loadDeltaNet reads one Gated DeltaNet layer's tensors.
func loadDeltaNet(l *loader, p string, hp *Hyper) (*deltaNet, error) {
	E, dk := hp.Embd, hp.StateDim
	dn := &deltaNet{
		kHeads: hp.KeyHeads, vHeads: hp.ValueHeads, headDim: dk, kernel: hp.ConvKernel,
		keyDim: hp.KeyHeads * dk, valueDim: hp.ValueHeads * dk,
		eps: hp.NormEps, scale: deltaScale(dk),
	}
	dn.convDim = 2*dn.keyDim + dn.valueDim
	var err error
	if dn.wqkv, err = l.matrix(p+"attn_qkv", E, dn.convDim); err != nil {
		return nil, err
	}
	if dn.wz, err = l.matrix(p+"attn_gate", E, dn.valueDim); err != nil {
		return nil, err
	}
	if dn.wBeta, err = l.matrix(p+"ssm_beta", E, dn.vHeads); err != nil {
		return nil, err
	}
	if dn.wAlpha, err = l.matrix(p+"ssm_alpha", E, dn.vHeads); err != nil {
		return nil, err
	}
	if dn.wOut, err = l.matrix(p+"ssm_out", dn.valueDim, E); err != nil {
		return nil, err
	}
	t, err := l.tensor(p+"ssm_conv1d.weight", int64(dn.kernel), int64(dn.convDim))
	if err != nil {
		return nil, err
	}
	if dn.conv, err = l.floats(t, dn.kernel*dn.convDim); err != nil {
		return nil, err
	}
	if dn.dtBias, err = l.vector(p+"ssm_dt.bias", dn.vHeads); err != nil {
		return nil, err
	}
	if dn.a, err = l.vector(p+"ssm_a", dn.vHeads); err != nil {
		return nil, err
	}
	if dn.norm, err = l.vector(p+"ssm_norm.weight", dk); err != nil {
		return nil, err
	}
	return dn, nil
}

// loadMTP reads the MTP block blk.<layers>.*, when the file has its
// nextn.eh_proj; a file converted without MTP has none and gets no head.
func loadMTP(l *loader, d *decoder, r rope) (*mtpHead, error) {
	hp := &d.hp
	E := hp.Embd
	p := fmt.Sprintf("blk.%d.", hp.Layers)
	eh, ok, err := l.optMatrix(p+"nextn.eh_proj", 2*E, E)
	if err != nil || !ok {
		return nil, err
	}
	m, err := loadMTPParts(l, d, p, eh)
	if err != nil {
		return nil, err
	}
	L := layer{}
	if L.attnNorm, err = l.vector(p+"attn_norm.weight", E); err != nil {
		return nil, err
	}
	if L.attn, err = loadAttention(l, p, hp, true, r); err != nil {
		return nil, err
	}
	if L.ffnNorm, err = l.vector(p+"post_attention_norm.weight", E); err != nil {
		return nil, err
	}
	if L.mlp, err = loadMLP(l, p, E, hp.FFN); err != nil {
		return nil, err
	}
	m.layers = []layer{L}
	return m, nil
}
