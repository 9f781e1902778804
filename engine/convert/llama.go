package convert

import (
	"fmt"
)

// commonDims are the config.json sizes both architectures read.
type commonDims struct {
	embd, ffn, layers, heads, kvHeads, headDim, vocab int
	headDimSet                                        bool
	eps                                               float64
	ctx                                               int // 0: absent
	ropeTheta                                         float64
	ropeThetaSet                                      bool
	rope                                              map[string]any // rope_parameters or rope_scaling
	tied                                              bool
}

func readCommon(hp hparams) (d commonDims, err error) {
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"hidden_size", &d.embd}, {"intermediate_size", &d.ffn}, {"num_hidden_layers", &d.layers},
		{"num_attention_heads", &d.heads}, {"vocab_size", &d.vocab},
	} {
		if *f.dst, err = hp.int(f.key); err != nil {
			return d, err
		}
		if *f.dst == 0 {
			return d, fmt.Errorf("%s: key %q is 0", hp.path, f.key)
		}
	}
	if d.kvHeads, err = hp.optInt("num_key_value_heads", d.heads); err != nil {
		return d, err
	}
	if d.kvHeads == 0 || d.heads%d.kvHeads != 0 {
		return d, fmt.Errorf("%s: num_key_value_heads = %d does not divide num_attention_heads = %d", hp.path, d.kvHeads, d.heads)
	}
	d.headDimSet = hp.has("head_dim")
	if d.headDim, err = hp.optInt("head_dim", d.embd/d.heads); err != nil {
		return d, err
	}
	if d.headDim == 0 {
		return d, fmt.Errorf("%s: head_dim is 0", hp.path)
	}
	if d.eps, err = hp.float("rms_norm_eps"); err != nil {
		return d, err
	}
	if d.ctx, err = hp.optInt("max_position_embeddings", 0); err != nil {
		return d, err
	}
	if d.tied, err = hp.optBool("tie_word_embeddings", false); err != nil {
		return d, err
	}
	if d.rope, err = hp.object("rope_parameters"); err != nil {
		return d, err
	}
	if d.rope == nil {
		if d.rope, err = hp.object("rope_scaling"); err != nil {
			return d, err
		}
	}
	// rope_theta at the top level, or inside rope_parameters (newer
	// transformers).
	if hp.has("rope_theta") {
		if d.ropeTheta, err = hp.float("rope_theta"); err != nil {
			return d, err
		}
		d.ropeThetaSet = true
	} else if v, ok := d.rope["rope_theta"]; ok && v != nil {
		if d.ropeTheta, err = hp.toFloat("rope_parameters.rope_theta", v); err != nil {
			return d, err
		}
		d.ropeThetaSet = true
	}
	return d, nil
}

// ropeScaling returns the rope scaling keys: none for the default RoPE, the
// linear factor, and an error for the kinds engine/model cannot run.
func (d *commonDims) ropeScaling(hp hparams, arch string) ([]kv, error) {
	typ, _ := d.rope["rope_type"].(string)
	if typ == "" {
		typ, _ = d.rope["type"].(string)
	}
	switch typ {
	case "", "default", "mrope":
		return nil, nil
	case "linear":
		f, err := hp.toFloat("rope_scaling.factor", d.rope["factor"])
		if err != nil {
			return nil, err
		}
		return []kv{{arch + ".rope.scaling.type", "linear"}, {arch + ".rope.scaling.factor", float32(f)}}, nil
	}
	return nil, fmt.Errorf("%s: RoPE scaling %q is not supported (want none or linear)", hp.path, typ)
}

// planLlama maps a LlamaForCausalLM checkpoint (llama.cpp conversion/llama.py
// LlamaModel, TextModel.set_gguf_parameters; names from gguf-py's
// tensor_mapping.py).
func planLlama(hp hparams) (plan, error) {
	d, err := readCommon(hp)
	if err != nil {
		return plan{}, err
	}
	for _, k := range []string{"attention_bias", "mlp_bias"} {
		if b, err := hp.optBool(k, false); err != nil {
			return plan{}, err
		} else if b {
			return plan{}, fmt.Errorf("%s: %s = true: llama biases are not supported", hp.path, k)
		}
	}
	const a = "llama."
	p := plan{arch: "llama", layers: d.layers}
	p.meta = []kv{
		{a + "vocab_size", uint32(d.vocab)},
		{a + "block_count", uint32(d.layers)},
	}
	if d.ctx > 0 {
		p.meta = append(p.meta, kv{a + "context_length", uint32(d.ctx)})
	}
	p.meta = append(p.meta,
		kv{a + "embedding_length", uint32(d.embd)},
		kv{a + "feed_forward_length", uint32(d.ffn)},
		kv{a + "attention.head_count", uint32(d.heads)},
		kv{a + "attention.head_count_kv", uint32(d.kvHeads)},
	)
	scaling, err := d.ropeScaling(hp, "llama")
	if err != nil {
		return plan{}, err
	}
	p.meta = append(p.meta, scaling...)
	if d.ropeThetaSet {
		p.meta = append(p.meta, kv{a + "rope.freq_base", float32(d.ropeTheta)})
	}
	p.meta = append(p.meta, kv{a + "attention.layer_norm_rms_epsilon", float32(d.eps)})
	if d.headDimSet {
		p.meta = append(p.meta, kv{a + "attention.key_length", uint32(d.headDim)}, kv{a + "attention.value_length", uint32(d.headDim)})
	}
	p.meta = append(p.meta, kv{a + "rope.dimension_count", uint32(d.headDim)})
	if d.headDim%2 != 0 {
		return plan{}, fmt.Errorf("%s: head size %d is odd; RoPE needs pairs", hp.path, d.headDim)
	}

	E, F, hd := int64(d.embd), int64(d.ffn), int64(d.headDim)
	qRows, kvRows := int64(d.heads)*hd, int64(d.kvHeads)*hd
	qPerm := llamaRopePerm(d.heads, d.headDim)
	kPerm := llamaRopePerm(d.kvHeads, d.headDim)
	p.jobs = []job{
		{dst: "token_embd.weight", src: "model.embed_tokens.weight", shape: []int64{int64(d.vocab), E}},
		{dst: "output_norm.weight", src: "model.norm.weight", shape: []int64{E}, vec: true},
		{dst: "output.weight", src: "lm_head.weight", shape: []int64{int64(d.vocab), E}, optional: d.tied},
	}
	for i := 0; i < d.layers; i++ {
		s := fmt.Sprintf("model.layers.%d.", i)
		g := fmt.Sprintf("blk.%d.", i)
		p.jobs = append(p.jobs,
			job{dst: g + "attn_norm.weight", src: s + "input_layernorm.weight", shape: []int64{E}, vec: true},
			job{dst: g + "attn_q.weight", src: s + "self_attn.q_proj.weight", shape: []int64{qRows, E}, rowPerm: qPerm},
			job{dst: g + "attn_k.weight", src: s + "self_attn.k_proj.weight", shape: []int64{kvRows, E}, rowPerm: kPerm},
			job{dst: g + "attn_v.weight", src: s + "self_attn.v_proj.weight", shape: []int64{kvRows, E}},
			job{dst: g + "attn_output.weight", src: s + "self_attn.o_proj.weight", shape: []int64{E, qRows}},
			job{dst: g + "ffn_norm.weight", src: s + "post_attention_layernorm.weight", shape: []int64{E}, vec: true},
			job{dst: g + "ffn_gate.weight", src: s + "mlp.gate_proj.weight", shape: []int64{F, E}},
			job{dst: g + "ffn_up.weight", src: s + "mlp.up_proj.weight", shape: []int64{F, E}},
			job{dst: g + "ffn_down.weight", src: s + "mlp.down_proj.weight", shape: []int64{E, F}},
		)
	}
	return p, nil
}

// llamaRopePerm undoes the row permutation Hugging Face's
// convert_llama_weights_to_hf.py applies to q_proj and k_proj for its
// rotate-half RoPE: within each head, HF row half*hd/2 + i holds Meta's row
// 2i + half. llama.cpp's LlamaModel.permute puts them back (reshape
// (heads, 2, hd/2), swap the last two axes); the result is GGUF row
// 2i + half = HF row half*hd/2 + i.
func llamaRopePerm(heads, hd int) []int {
	perm := make([]int, heads*hd)
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for half := 0; half < 2; half++ {
				perm[h*hd+2*i+half] = h*hd + half*hd/2 + i
			}
		}
	}
	return perm
}
