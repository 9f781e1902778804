package convert

import (
	"fmt"
	"math"
)

// qwen35DefaultSections is the mrope_section llama.cpp writes when a
// checkpoint has none (conversion/qwen.py _Qwen35MRopeMixin).
var qwen35DefaultSections = []int32{11, 11, 10, 0}

func plusOne(x float64) float64 { return x + 1 }
func negExp(x float64) float64  { return -math.Exp(x) }

// planQwen35 maps the Qwen3.5/3.6 dense text model (llama.cpp
// conversion/qwen.py: Qwen3_5TextModel = _Qwen35MRopeMixin +
// _LinearAttentionVReorderBase + Qwen3NextModel + _QwenMtpMixin) to
// engine/model's qwen35 loader. mtpSeen is the number of mtp.layers.* blocks
// in the checkpoint.
func planQwen35(hp hparams, mtpSeen int, noMTP bool) (plan, error) {
	d, err := readCommon(hp)
	if err != nil {
		return plan{}, err
	}
	var K, dk, dv, hk, hv int
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"linear_conv_kernel_dim", &K}, {"linear_key_head_dim", &dk}, {"linear_value_head_dim", &dv},
		{"linear_num_key_heads", &hk}, {"linear_num_value_heads", &hv},
	} {
		if *f.dst, err = hp.int(f.key); err != nil {
			return plan{}, err
		}
		if *f.dst == 0 {
			return plan{}, fmt.Errorf("%s: key %q is 0", hp.path, f.key)
		}
	}
	if hv%hk != 0 {
		return plan{}, fmt.Errorf("%s: linear_num_value_heads = %d is not a multiple of linear_num_key_heads = %d", hp.path, hv, hk)
	}
	if dk != dv {
		return plan{}, fmt.Errorf("%s: linear_key_head_dim = %d differs from linear_value_head_dim = %d; the qwen35 loader wants them equal", hp.path, dk, dv)
	}
	if gate, err := hp.optBool("attn_output_gate", true); err != nil {
		return plan{}, err
	} else if !gate {
		return plan{}, fmt.Errorf("%s: attn_output_gate = false is not the qwen35 architecture", hp.path)
	}
	interval, err := hp.optInt("full_attention_interval", 4)
	if err != nil {
		return plan{}, err
	}
	if interval == 0 {
		return plan{}, fmt.Errorf("%s: full_attention_interval is 0", hp.path)
	}
	recurrent := make([]bool, d.layers)
	layerTypes, haveTypes := hp.m["layer_types"].([]any)
	if haveTypes {
		if len(layerTypes) != d.layers {
			return plan{}, fmt.Errorf("%s: layer_types has %d entries, want num_hidden_layers = %d", hp.path, len(layerTypes), d.layers)
		}
		for i, t := range layerTypes {
			switch t {
			case "linear_attention":
				recurrent[i] = true
			case "full_attention":
			default:
				return plan{}, fmt.Errorf("%s: layer_types[%d] = %v: want \"linear_attention\" or \"full_attention\"", hp.path, i, t)
			}
		}
	} else {
		for i := range recurrent {
			recurrent[i] = (i+1)%interval != 0
		}
	}

	nMTP, err := hp.optInt("mtp_num_hidden_layers", 0)
	if err != nil {
		return plan{}, err
	}
	if nMTP == 0 {
		nMTP = mtpSeen // llama.cpp counts the blocks when the config has no count
	}
	if noMTP {
		nMTP = 0
	}
	if nMTP > 1 {
		return plan{}, fmt.Errorf("%s: mtp_num_hidden_layers = %d; the qwen35 loader takes one MTP block", hp.path, nMTP)
	}
	if nMTP == 1 && mtpSeen == 0 {
		return plan{}, fmt.Errorf("%s: mtp_num_hidden_layers = 1 but the checkpoint has no mtp.layers.0.* tensors (convert with MTP off)", hp.path)
	}

	// Partial RoPE and its sections.
	factor := 0.25
	if v, ok := d.rope["partial_rotary_factor"]; ok && v != nil {
		if factor, err = hp.toFloat("rope_parameters.partial_rotary_factor", v); err != nil {
			return plan{}, err
		}
	} else if hp.has("partial_rotary_factor") {
		if factor, err = hp.float("partial_rotary_factor"); err != nil {
			return plan{}, err
		}
	}
	ropeDims := int(float64(d.headDim) * factor)
	sections := qwen35DefaultSections
	if raw, ok := d.rope["mrope_section"]; ok && raw != nil {
		list, ok := raw.([]any)
		if !ok || len(list) == 0 || len(list) > 4 {
			return plan{}, fmt.Errorf("%s: mrope_section = %v: want up to 4 integers", hp.path, raw)
		}
		sections = make([]int32, 4)
		for i, v := range list {
			n, err := hp.toInt("mrope_section", v)
			if err != nil {
				return plan{}, err
			}
			sections[i] = int32(n)
		}
	}
	scaling, err := d.ropeScaling(hp, "qwen35")
	if err != nil {
		return plan{}, err
	}

	const a = "qwen35."
	blocks := d.layers + nMTP
	p := plan{arch: "qwen35", layers: d.layers, mtp: nMTP}
	p.meta = []kv{{a + "block_count", uint32(blocks)}}
	if d.ctx > 0 {
		p.meta = append(p.meta, kv{a + "context_length", uint32(d.ctx)})
	}
	p.meta = append(p.meta,
		kv{a + "embedding_length", uint32(d.embd)},
		kv{a + "feed_forward_length", uint32(d.ffn)},
		kv{a + "attention.head_count", uint32(d.heads)},
		kv{a + "attention.head_count_kv", uint32(d.kvHeads)},
	)
	p.meta = append(p.meta, scaling...)
	if d.ropeThetaSet {
		p.meta = append(p.meta, kv{a + "rope.freq_base", float32(d.ropeTheta)})
	}
	p.meta = append(p.meta, kv{a + "attention.layer_norm_rms_epsilon", float32(d.eps)})
	if d.headDimSet {
		p.meta = append(p.meta, kv{a + "attention.key_length", uint32(d.headDim)}, kv{a + "attention.value_length", uint32(d.headDim)})
	}
	if nMTP > 0 {
		p.meta = append(p.meta, kv{a + "nextn_predict_layers", uint32(nMTP)})
	}
	p.meta = append(p.meta,
		kv{a + "ssm.conv_kernel", uint32(K)},
		kv{a + "ssm.state_size", uint32(dk)},
		kv{a + "ssm.group_count", uint32(hk)},
		kv{a + "ssm.time_step_rank", uint32(hv)},
		kv{a + "ssm.inner_size", uint32(dv * hv)},
	)
	if haveTypes {
		flags := make([]bool, blocks)
		copy(flags, recurrent)
		p.meta = append(p.meta, kv{a + "attention.recurrent_layers", flags})
	}
	p.meta = append(p.meta,
		kv{a + "full_attention_interval", uint32(interval)},
		kv{a + "rope.dimension_count", uint32(ropeDims)},
		kv{a + "rope.dimension_sections", sections},
	)

	E, V := int64(d.embd), int64(d.vocab)
	p.jobs = []job{
		{dst: "token_embd.weight", src: "model.embed_tokens.weight", shape: []int64{V, E}},
		{dst: "output_norm.weight", src: "model.norm.weight", shape: []int64{E}, vec: true, fn: plusOne},
		{dst: "output.weight", src: "lm_head.weight", shape: []int64{V, E}, optional: d.tied},
	}
	q := qwen35Layer{d: d, K: K, dk: dk, dv: dv, hk: hk, hv: hv}
	for i := 0; i < d.layers; i++ {
		s := fmt.Sprintf("model.layers.%d.", i)
		g := fmt.Sprintf("blk.%d.", i)
		if recurrent[i] {
			p.jobs = append(p.jobs, q.deltaNet(s, g)...)
		} else {
			p.jobs = append(p.jobs, q.attention(s, g)...)
		}
		p.jobs = append(p.jobs, q.ffn(s, g)...)
	}
	if nMTP == 1 {
		g := fmt.Sprintf("blk.%d.", d.layers)
		p.jobs = append(p.jobs, q.attention("mtp.layers.0.", g)...)
		p.jobs = append(p.jobs, q.ffn("mtp.layers.0.", g)...)
		p.jobs = append(p.jobs,
			job{dst: g + "nextn.eh_proj.weight", src: "mtp.fc.weight", shape: []int64{E, 2 * E}},
			job{dst: g + "nextn.enorm.weight", src: "mtp.pre_fc_norm_embedding.weight", shape: []int64{E}, vec: true, fn: plusOne},
			job{dst: g + "nextn.hnorm.weight", src: "mtp.pre_fc_norm_hidden.weight", shape: []int64{E}, vec: true, fn: plusOne},
			job{dst: g + "nextn.shared_head_norm.weight", src: "mtp.norm.weight", shape: []int64{E}, vec: true, fn: plusOne},
		)
	}
	return p, nil
}

type qwen35Layer struct {
	d                 commonDims
	K, dk, dv, hk, hv int
}

// attention is a gated full-attention block: q_proj yields query and gate
// per head (2*heads*head_dim rows); q_norm and k_norm are zero-centred.
func (q qwen35Layer) attention(s, g string) []job {
	E, hd := int64(q.d.embd), int64(q.d.headDim)
	H, KV := int64(q.d.heads), int64(q.d.kvHeads)
	return []job{
		{dst: g + "attn_norm.weight", src: s + "input_layernorm.weight", shape: []int64{E}, vec: true, fn: plusOne},
		{dst: g + "attn_q.weight", src: s + "self_attn.q_proj.weight", shape: []int64{2 * H * hd, E}},
		{dst: g + "attn_k.weight", src: s + "self_attn.k_proj.weight", shape: []int64{KV * hd, E}},
		{dst: g + "attn_v.weight", src: s + "self_attn.v_proj.weight", shape: []int64{KV * hd, E}},
		{dst: g + "attn_output.weight", src: s + "self_attn.o_proj.weight", shape: []int64{E, H * hd}},
		{dst: g + "attn_q_norm.weight", src: s + "self_attn.q_norm.weight", shape: []int64{hd}, vec: true, fn: plusOne},
		{dst: g + "attn_k_norm.weight", src: s + "self_attn.k_norm.weight", shape: []int64{hd}, vec: true, fn: plusOne},
	}
}

// deltaNet is a Gated DeltaNet block. Hugging Face stores the value heads
// grouped by key head (head j of group g at g*r + j); ggml broadcasts key
// heads tiled, so llama.cpp (_LinearAttentionVReorderBase) moves value head
// g*r + j to j*hk + g in every tensor indexed by value head: the v rows of
// in_proj_qkv and of conv1d, in_proj_z, in_proj_a/b, A_log, dt_bias, and the
// columns of out_proj.
func (q qwen35Layer) deltaNet(s, g string) []job {
	E := int64(q.d.embd)
	keyDim, valueDim := q.hk*q.dk, q.hv*q.dv
	convDim := 2*keyDim + valueDim
	vRows := q.vPerm(q.dv)
	qkvPerm := make([]int, convDim)
	for i := range qkvPerm {
		qkvPerm[i] = i
	}
	for i, from := range vRows {
		qkvPerm[2*keyDim+i] = 2*keyDim + from
	}
	heads := q.vPerm(1)
	return []job{
		{dst: g + "attn_norm.weight", src: s + "input_layernorm.weight", shape: []int64{E}, vec: true, fn: plusOne},
		{dst: g + "attn_qkv.weight", src: s + "linear_attn.in_proj_qkv.weight", shape: []int64{int64(convDim), E}, rowPerm: qkvPerm},
		{dst: g + "attn_gate.weight", src: s + "linear_attn.in_proj_z.weight", shape: []int64{int64(valueDim), E}, rowPerm: vRows},
		{dst: g + "ssm_conv1d.weight", src: s + "linear_attn.conv1d.weight", shape: []int64{int64(convDim), 1, int64(q.K)},
			vec: true, rowPerm: qkvPerm, ggufShape: []int64{int64(q.K), int64(convDim)}},
		{dst: g + "ssm_dt.bias", src: s + "linear_attn.dt_bias", shape: []int64{int64(q.hv)}, vec: true, rowPerm: heads},
		{dst: g + "ssm_a", src: s + "linear_attn.A_log", shape: []int64{int64(q.hv)}, vec: true, rowPerm: heads, fn: negExp},
		{dst: g + "ssm_beta.weight", src: s + "linear_attn.in_proj_b.weight", shape: []int64{int64(q.hv), E}, rowPerm: heads},
		{dst: g + "ssm_alpha.weight", src: s + "linear_attn.in_proj_a.weight", shape: []int64{int64(q.hv), E}, rowPerm: heads},
		{dst: g + "ssm_norm.weight", src: s + "linear_attn.norm.weight", shape: []int64{int64(q.dv)}, vec: true},
		{dst: g + "ssm_out.weight", src: s + "linear_attn.out_proj.weight", shape: []int64{E, int64(valueDim)},
			colGroup: q.dv, colPerm: heads},
	}
}

// ffn is the post-attention norm and the SwiGLU MLP.
func (q qwen35Layer) ffn(s, g string) []job {
	E, F := int64(q.d.embd), int64(q.d.ffn)
	return []job{
		{dst: g + "post_attention_norm.weight", src: s + "post_attention_layernorm.weight", shape: []int64{E}, vec: true, fn: plusOne},
		{dst: g + "ffn_gate.weight", src: s + "mlp.gate_proj.weight", shape: []int64{F, E}},
		{dst: g + "ffn_up.weight", src: s + "mlp.up_proj.weight", shape: []int64{F, E}},
		{dst: g + "ffn_down.weight", src: s + "mlp.down_proj.weight", shape: []int64{E, F}},
	}
}

// vPerm is llama.cpp's _reorder_v_heads over hv heads of d rows each:
// output row (j*hk + g)*d + t is input row (g*r + j)*d + t.
func (q qwen35Layer) vPerm(d int) []int {
	r := q.hv / q.hk
	perm := make([]int, q.hv*d)
	for g := 0; g < q.hk; g++ {
		for j := 0; j < r; j++ {
			for t := 0; t < d; t++ {
				perm[(j*q.hk+g)*d+t] = (g*r+j)*d + t
			}
		}
	}
	return perm
}
