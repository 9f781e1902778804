package model

import "fmt"

// A llama model has no MTP head of its own; `edgellmd draft fit` adds one
// in the layout llama.cpp uses for qwen35's: llama.nextn_predict_layers = 1,
// block_count counting it, and the block stored as the last layer
// blk.<layers>.* (a llama block: attn_norm, attn_q/k/v/output, ffn_norm,
// ffn_gate/up/down) with nextn.eh_proj, nextn.enorm and nextn.hnorm beside
// it. The head shares the trunk's token embedding, final norm and LM head
// unless nextn.embed_tokens, nextn.shared_head_norm or
// nextn.shared_head_head are present.

// llamaMTPLayers reads llama.nextn_predict_layers (0 or 1) and checks it
// against block_count.
func llamaMTPLayers(l *loader, blocks int) (int, error) {
	n, err := l.optCount("nextn_predict_layers", 0)
	if err != nil {
		return 0, err
	}
	if n > 1 || n >= blocks {
		return 0, l.errorf("metadata key %q = %d: want 0 or 1, less than %q = %d", l.key("nextn_predict_layers"), n, l.key("block_count"), blocks)
	}
	return n, nil
}

// loadLlamaMTP reads the MTP block blk.<layers>.* of a llama file.
func loadLlamaMTP(l *loader, d *decoder, r rope) (*mtpHead, error) {
	hp := &d.hp
	E := hp.Embd
	p := fmt.Sprintf("blk.%d.", hp.Layers)
	eh, err := l.matrix(p+"nextn.eh_proj", 2*E, E)
	if err != nil {
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
	if L.attn, err = loadAttention(l, p, hp, false, r); err != nil {
		return nil, err
	}
	if L.ffnNorm, err = l.vector(p+"ffn_norm.weight", E); err != nil {
		return nil, err
	}
	if L.mlp, err = loadMLP(l, p, E, hp.FFN); err != nil {
		return nil, err
	}
	m.layers = []layer{L}
	return m, nil
}
