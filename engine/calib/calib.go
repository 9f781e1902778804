// Package calib runs an unquantized model over calibration prompts and
// records what quantization needs to know about its activations: the
// largest magnitude going into each weight matrix (NVFP4 input scales)
// and the largest key and value of each attention layer (FP8 KV scales).
// engine/quantize turns the figures into scales.
package calib

import (
	"fmt"
	"math"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// calibChunk bounds the tokens of one forward pass while calibrating.
const calibChunk = 256

// Run runs the model in f (F32 KV cache, so keys and values are
// seen unrounded) over each prompt and records the activation and KV
// ranges. Prompts longer than the model's context are cut.
func Run(f *gguf.File, prompts [][]int32, threads int) (*quantize.Calibration, error) {
	cal := &quantize.Calibration{Input: map[string]float32{}}
	pool := tensor.NewPool(threads)
	defer pool.Close()
	observe := func(name string, x []float32, n, cols int) {
		m := cal.Input[name]
		for _, v := range x[:n*cols] {
			m = max(m, float32(math.Abs(float64(v))))
		}
		cal.Input[name] = m
	}
	m, err := model.Load(f, model.Options{KVType: tensor.F32, Pool: pool, Observe: observe})
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	hp := m.Hyper()
	longest := 0
	for _, p := range prompts {
		longest = max(longest, min(len(p), hp.Context))
	}
	if longest == 0 {
		return nil, fmt.Errorf("calibration: no tokens in %d prompts", len(prompts))
	}
	st := m.NewState(longest)
	logits := make([]float32, hp.Vocab)
	for i, p := range prompts {
		p = p[:min(len(p), longest)]
		if len(p) == 0 {
			continue
		}
		for _, t := range p {
			if t < 0 || int(t) >= hp.Vocab {
				return nil, fmt.Errorf("calibration prompt %d: token %d outside the vocabulary of %d", i+1, t, hp.Vocab)
			}
		}
		st.Reset()
		for start := 0; start < len(p); start += calibChunk {
			end := min(start+calibChunk, len(p))
			if err := m.Forward(st, model.ChainBatch(p[start:end], start, false), logits); err != nil {
				return nil, fmt.Errorf("calibration prompt %d: %w", i+1, err)
			}
		}
		rows, err := st.CopyKV(0, st.Len())
		if err != nil {
			return nil, fmt.Errorf("calibration prompt %d: %w", i+1, err)
		}
		k, v := rows.AbsMax()
		if cal.KAmax == nil {
			cal.KAmax, cal.VAmax = make([]float32, len(k)), make([]float32, len(v))
		}
		for l := range k {
			cal.KAmax[l] = max(cal.KAmax[l], k[l])
			cal.VAmax[l] = max(cal.VAmax[l], v[l])
		}
		cal.Tokens += len(p)
	}
	return cal, nil
}
