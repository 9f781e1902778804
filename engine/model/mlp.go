package model

import "github.com/edgellmd/edgellmd/engine/tensor"

// mlp is the SwiGLU feed-forward block: down(silu(gate(x)) * up(x))
// (llama.cpp build_ffn with LLM_FFN_SILU, LLM_FFN_PAR).
type mlp struct {
	gate, up, down linear
}

func (m *mlp) forward(d *decoder, r *rowBufs, h []float32, n int, out []float32) {
	F := m.gate.m.Rows
	a := r.ffa[:n*F]
	b := r.ffb[:n*F]
	d.mm(&m.gate, a, h, n)
	d.mm(&m.up, b, h, n)
	for r := 0; r < n; r++ {
		// row by row: ggml's swiglu runs per row, so SIMD blocks start at
		// each row's first value
		row := a[r*F : (r+1)*F]
		d.silu(row)
		tensor.Mul(row, b[r*F:(r+1)*F])
	}
	d.mm(&m.down, out, a, n)
}

// loadMLP reads blk.N.ffn_{gate,up,down}.
func loadMLP(l *loader, prefix string, embd, ffn int) (mlp, error) {
	var m mlp
	var err error
	if m.gate, err = l.matrix(prefix+"ffn_gate", embd, ffn); err != nil {
		return m, err
	}
	if m.up, err = l.matrix(prefix+"ffn_up", embd, ffn); err != nil {
		return m, err
	}
	if m.down, err = l.matrix(prefix+"ffn_down", ffn, embd); err != nil {
		return m, err
	}
	return m, nil
}
