package model

import (
	"fmt"
	"math"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// linear is one weight matrix applied as y = (W x) * scale + bias, the way
// llama.cpp's build_lora_mm and build_qkv apply it: scale is the optional
// per-tensor `<name>.scale` that NVFP4 files carry, bias an optional
// `<base>.bias`.
type linear struct {
	m          tensor.Matrix
	name       string    // the weight's base name, e.g. "blk.0.attn_q"
	scale      float32   // 0: none
	inputScale float32   // `<name>.input_scale` (NVFP4 activations), 0: none; also in m.InputScale for W4A4
	bias       []float32 // nil: none
}

// loader reads one architecture's metadata and tensors from a GGUF file and
// turns every problem into an error that names the key or tensor, and what
// was expected.
type loader struct {
	f    *gguf.File
	arch string
}

func (l *loader) errorf(format string, args ...any) error {
	return fmt.Errorf("model %s: "+format, append([]any{l.f.Path}, args...)...)
}

func (l *loader) key(name string) string { return l.arch + "." + name }

// count reads a required non-negative integer key arch.name.
func (l *loader) count(name string) (int, error) {
	v, ok := l.f.GetUint(l.key(name))
	if !ok {
		if _, present := l.f.Lookup(l.key(name)); present {
			return 0, l.errorf("metadata key %q is not a non-negative integer", l.key(name))
		}
		return 0, l.errorf("metadata key %q missing (want an unsigned integer)", l.key(name))
	}
	if v > math.MaxInt32 {
		return 0, l.errorf("metadata key %q = %d is out of range", l.key(name), v)
	}
	return int(v), nil
}

// optCount reads an optional integer key, def when absent.
func (l *loader) optCount(name string, def int) (int, error) {
	if _, ok := l.f.Lookup(l.key(name)); !ok {
		return def, nil
	}
	return l.count(name)
}

// float reads a required float key.
func (l *loader) float(name string) (float32, error) {
	v, ok := l.f.GetFloat(l.key(name))
	if !ok {
		if _, present := l.f.Lookup(l.key(name)); present {
			return 0, l.errorf("metadata key %q is not a number", l.key(name))
		}
		return 0, l.errorf("metadata key %q missing (want a float32)", l.key(name))
	}
	return float32(v), nil
}

func (l *loader) optFloat(name string, def float32) (float32, error) {
	if _, ok := l.f.Lookup(l.key(name)); !ok {
		return def, nil
	}
	return l.float(name)
}

// shapeString writes a ggml shape the way llama.cpp prints it, ne[0] first.
func shapeString(shape []int64) string {
	s := "["
	for i, d := range shape {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprint(d)
	}
	return s + "]"
}

// tensor finds a required tensor and checks its shape (ne, innermost first).
func (l *loader) tensor(name string, shape ...int64) (*gguf.TensorInfo, error) {
	t, ok, err := l.optTensor(name, shape...)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, l.errorf("tensor %q missing (want shape %s)", name, shapeString(shape))
	}
	return t, nil
}

// optTensor finds an optional tensor; a present tensor of the wrong shape
// is an error.
func (l *loader) optTensor(name string, shape ...int64) (*gguf.TensorInfo, bool, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return nil, false, nil
	}
	if !sameShape(t.Shape, shape) {
		return nil, false, l.errorf("tensor %q has shape %s, want %s", name, shapeString(t.Shape), shapeString(shape))
	}
	return t, true, nil
}

func sameShape(got, want []int64) bool {
	// ggml drops trailing 1s: [n] and [n 1] are the same tensor.
	for len(got) > 1 && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	for len(want) > 1 && want[len(want)-1] == 1 {
		want = want[:len(want)-1]
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// matrix loads a required weight of cols inputs and rows outputs (ggml
// shape [cols rows]) with its optional .scale, .input_scale and bias.
func (l *loader) matrix(base string, cols, rows int) (linear, error) {
	lin, ok, err := l.optMatrix(base, cols, rows)
	if err != nil {
		return linear{}, err
	}
	if !ok {
		return linear{}, l.errorf("tensor %q missing (want shape %s)", base+".weight", shapeString([]int64{int64(cols), int64(rows)}))
	}
	return lin, nil
}

// optMatrix loads `<base>.weight` when the file has it.
func (l *loader) optMatrix(base string, cols, rows int) (linear, bool, error) {
	t, ok, err := l.optTensor(base+".weight", int64(cols), int64(rows))
	if err != nil || !ok {
		return linear{}, false, err
	}
	m, err := l.asMatrix(t)
	if err != nil {
		return linear{}, false, err
	}
	lin := linear{m: m, name: base}
	if lin.scale, err = l.optScalar(base + ".scale"); err != nil {
		return linear{}, false, err
	}
	if lin.inputScale, err = l.optScalar(base + ".input_scale"); err != nil {
		return linear{}, false, err
	}
	if lin.inputScale < 0 || math.IsNaN(float64(lin.inputScale)) || math.IsInf(float64(lin.inputScale), 0) {
		return linear{}, false, l.errorf("tensor %q = %g: want a positive finite activation scale", base+".input_scale", lin.inputScale)
	}
	lin.m.InputScale = lin.inputScale
	if lin.bias, _, err = l.optVector(base+".bias", rows); err != nil {
		return linear{}, false, err
	}
	return lin, true, nil
}

func (l *loader) asMatrix(t *gguf.TensorInfo) (tensor.Matrix, error) {
	if len(t.Shape) < 2 {
		return tensor.Matrix{}, l.errorf("tensor %q has shape %s, want a matrix", t.Name, shapeString(t.Shape))
	}
	m, err := tensor.NewMatrix(t.Type, int(t.Shape[1]), int(t.Shape[0]), l.f.TensorData(t))
	if err != nil {
		return tensor.Matrix{}, l.errorf("tensor %q: %w", t.Name, err)
	}
	return m, nil
}

// vector loads a required 1-D tensor of n values as float32 (copied: norms
// and biases are small).
func (l *loader) vector(name string, n int) ([]float32, error) {
	v, ok, err := l.optVector(name, n)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, l.errorf("tensor %q missing (want shape [%d])", name, n)
	}
	return v, nil
}

func (l *loader) optVector(name string, n int) ([]float32, bool, error) {
	t, ok, err := l.optTensor(name, int64(n))
	if err != nil || !ok {
		return nil, false, err
	}
	v, err := l.floats(t, n)
	return v, err == nil, err
}

// floats dequantizes all n values of t.
func (l *loader) floats(t *gguf.TensorInfo, n int) ([]float32, error) {
	v := make([]float32, n)
	if err := tensor.DequantizeRow(t.Type, v, l.f.TensorData(t)); err != nil {
		return nil, l.errorf("tensor %q: %w", t.Name, err)
	}
	return v, nil
}

// optScalar reads a one-value tensor such as `<name>.scale`; 0 when absent.
func (l *loader) optScalar(name string) (float32, error) {
	v, ok, err := l.optVector(name, 1)
	if err != nil || !ok {
		return 0, err
	}
	return v[0], nil
}

// embedding loads token_embd.weight (embd × vocab).
func (l *loader) embedding(name string, embd, vocab int) (tensor.Matrix, error) {
	t, err := l.tensor(name, int64(embd), int64(vocab))
	if err != nil {
		return tensor.Matrix{}, err
	}
	return l.asMatrix(t)
}

// vocabSize is arch.vocab_size, or the length of tokenizer.ggml.tokens, or
// the embedding's row count, as llama.cpp takes it.
func (l *loader) vocabSize() (int, error) {
	if _, ok := l.f.Lookup(l.key("vocab_size")); ok {
		return l.count("vocab_size")
	}
	if toks, ok := l.f.GetStrings("tokenizer.ggml.tokens"); ok {
		return len(toks), nil
	}
	if t, ok := l.f.Tensor("token_embd.weight"); ok && len(t.Shape) == 2 {
		return int(t.Shape[1]), nil
	}
	return 0, l.errorf("cannot tell the vocabulary size: no %q, no tokenizer.ggml.tokens, no token_embd.weight", l.key("vocab_size"))
}

// output loads the LM head: output.weight, or the tied token embedding when
// the file has none (llama.cpp's TENSOR_DUPLICATED fallback).
func (l *loader) output(embd, vocab int) (linear, error) {
	lin, ok, err := l.optMatrix("output", embd, vocab)
	if err != nil {
		return linear{}, err
	}
	if ok {
		return lin, nil
	}
	return l.matrix("token_embd", embd, vocab)
}

// The FP8 KV cache scales of a file: F32 arrays indexed by block number N
// (the N of blk.N, MTP blocks included), FP8 value = code * scale. They are
// metadata, not tensors, because llama.cpp refuses a file with tensors it
// does not create (llama_model_loader::done_getting_tensors), and its
// converter drops ModelOpt's k_scale/v_scale. See doc.go.
const (
	kvKScaleKey = "edgellmd.kv_cache.k_scale"
	kvVScaleKey = "edgellmd.kv_cache.v_scale"
)

// kvScales returns the k and v scales of the attention block with the given
// tensor prefix ("blk.N."): the file's values, or 1 where it has none (no
// key, or an array too short for N).
func (l *loader) kvScales(prefix string) (k, v float32, err error) {
	var n int
	if _, err := fmt.Sscanf(prefix, "blk.%d.", &n); err != nil {
		return 0, 0, l.errorf("tensor prefix %q has no block number", prefix)
	}
	if k, err = l.kvScale(kvKScaleKey, n); err != nil {
		return 0, 0, err
	}
	if v, err = l.kvScale(kvVScaleKey, n); err != nil {
		return 0, 0, err
	}
	return k, v, nil
}

func (l *loader) kvScale(key string, n int) (float32, error) {
	if _, ok := l.f.Lookup(key); !ok {
		return 1, nil
	}
	a, ok := l.f.GetFloat32s(key)
	if !ok {
		return 0, l.errorf("metadata key %q is not an array of FLOAT32 (one scale per block)", key)
	}
	if n >= len(a) {
		return 1, nil
	}
	if err := tensor.CheckKVScale(a[n]); err != nil {
		return 0, l.errorf("metadata key %q[%d]: %w", key, n, err)
	}
	return a[n], nil
}
