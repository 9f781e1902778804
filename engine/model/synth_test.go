package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// A tiny qwen35 model with random weights, written in memory with llama.cpp's
// metadata keys and tensor names, plus a float64 reference forward pass of
// the equations in model-numerics.md (§1.2-1.6) that the tests hold the Go
// model against. Parity with llama.cpp itself comes from engine/quantize's
// synth files; this checks the wiring.

type synthSpec struct {
	vocab, embd, ffn        int
	heads, kvHeads, headDim int
	ropeDims                int
	sections                [4]int
	base, eps               float32
	kernel, stateDim        int
	kHeads, vHeads          int
	recurrent               []bool // per trunk layer
	mtp                     bool
	recurrentArray          bool // write attention.recurrent_layers instead of full_attention_interval
	dropTensor, dropKey     string
	wrongShape              string
	extraKV                 map[string]any // more metadata (FP8 KV scales)
}

func defaultSpec() synthSpec {
	return synthSpec{
		vocab: 97, embd: 32, ffn: 48,
		heads: 4, kvHeads: 2, headDim: 16, ropeDims: 8,
		sections: [4]int{1, 1, 1, 1}, base: 100, eps: 1e-6,
		kernel: 4, stateDim: 8, kHeads: 2, vHeads: 4,
		recurrent: []bool{true, true, true, false, true, true, true, false},
		mtp:       true,
	}
}

// synthModel is the spec, its weights by tensor name, and the parsed file.
type synthModel struct {
	spec synthSpec
	w    map[string][]float32
	file *gguf.File
}

func buildSynth(t testing.TB, spec synthSpec, seed uint64) *synthModel {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	sm := &synthModel{spec: spec, w: map[string][]float32{}}
	wr := gguf.NewWriter()
	kv := func(k string, v any) {
		if k == spec.dropKey {
			return
		}
		if err := wr.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	add := func(name string, data []float32, shape ...int64) {
		sm.w[name] = data
		if name == spec.dropTensor {
			return
		}
		if name == spec.wrongShape {
			shape = append([]int64{shape[0] + 1}, shape[1:]...)
			n := 1
			for _, d := range shape {
				n *= int(d)
			}
			data = append(append([]float32{}, data...), make([]float32, n-len(data))...)
		}
		buf := make([]byte, 4*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if err := wr.AddTensor(name, tensor.F32, shape, buf); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range spec.extraKV {
		kv(k, v)
	}
	uniform := func(n int, a float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * a)
		}
		return v
	}
	around := func(n int, c, a float64) []float32 {
		v := uniform(n, a)
		for i := range v {
			v[i] += float32(c)
		}
		return v
	}
	mat := func(name string, cols, rows int) {
		add(name, uniform(cols*rows, 1/math.Sqrt(float64(cols))), int64(cols), int64(rows))
	}
	vec := func(name string, n int) { add(name, around(n, 1, 0.2), int64(n)) }

	s := spec
	nLayers := len(s.recurrent)
	blocks := nLayers
	if s.mtp {
		blocks++
	}
	kv("general.architecture", "qwen35")
	kv("qwen35.block_count", uint32(blocks))
	if s.mtp {
		kv("qwen35.nextn_predict_layers", uint32(1))
	}
	kv("qwen35.context_length", uint32(256))
	kv("qwen35.embedding_length", uint32(s.embd))
	kv("qwen35.feed_forward_length", uint32(s.ffn))
	kv("qwen35.attention.head_count", uint32(s.heads))
	kv("qwen35.attention.head_count_kv", uint32(s.kvHeads))
	kv("qwen35.attention.key_length", uint32(s.headDim))
	kv("qwen35.attention.value_length", uint32(s.headDim))
	kv("qwen35.rope.dimension_count", uint32(s.ropeDims))
	kv("qwen35.rope.freq_base", s.base)
	kv("qwen35.rope.dimension_sections", []int32{int32(s.sections[0]), int32(s.sections[1]), int32(s.sections[2]), int32(s.sections[3])})
	kv("qwen35.attention.layer_norm_rms_epsilon", s.eps)
	kv("qwen35.ssm.conv_kernel", uint32(s.kernel))
	kv("qwen35.ssm.state_size", uint32(s.stateDim))
	kv("qwen35.ssm.group_count", uint32(s.kHeads))
	kv("qwen35.ssm.time_step_rank", uint32(s.vHeads))
	kv("qwen35.ssm.inner_size", uint32(s.vHeads*s.stateDim))
	if s.recurrentArray {
		flags := append(append([]bool{}, s.recurrent...), make([]bool, blocks-nLayers)...)
		kv("qwen35.attention.recurrent_layers", flags)
	} else {
		kv("qwen35.full_attention_interval", uint32(4))
	}
	kv("qwen35.vocab_size", uint32(s.vocab))

	add("token_embd.weight", uniform(s.embd*s.vocab, 1), int64(s.embd), int64(s.vocab))
	vec("output_norm.weight", s.embd)
	mat("output.weight", s.embd, s.vocab)

	keyDim, valueDim := s.kHeads*s.stateDim, s.vHeads*s.stateDim
	convDim := 2*keyDim + valueDim
	attn := func(p string) {
		mat(p+"attn_q.weight", s.embd, 2*s.heads*s.headDim)
		mat(p+"attn_k.weight", s.embd, s.kvHeads*s.headDim)
		mat(p+"attn_v.weight", s.embd, s.kvHeads*s.headDim)
		mat(p+"attn_output.weight", s.heads*s.headDim, s.embd)
		vec(p+"attn_q_norm.weight", s.headDim)
		vec(p+"attn_k_norm.weight", s.headDim)
	}
	ffn := func(p string) {
		mat(p+"ffn_gate.weight", s.embd, s.ffn)
		mat(p+"ffn_up.weight", s.embd, s.ffn)
		mat(p+"ffn_down.weight", s.ffn, s.embd)
	}
	for i := 0; i < nLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", s.embd)
		vec(p+"post_attention_norm.weight", s.embd)
		if s.recurrent[i] {
			mat(p+"attn_qkv.weight", s.embd, convDim)
			mat(p+"attn_gate.weight", s.embd, valueDim)
			add(p+"ssm_conv1d.weight", uniform(s.kernel*convDim, 0.6), int64(s.kernel), int64(convDim))
			add(p+"ssm_dt.bias", uniform(s.vHeads, 0.5), int64(s.vHeads))
			a := uniform(s.vHeads, 0.7)
			for j := range a {
				a[j] = -float32(math.Exp(float64(a[j]))) // ssm_a = -exp(A_log)
			}
			add(p+"ssm_a", a, int64(s.vHeads))
			mat(p+"ssm_beta.weight", s.embd, s.vHeads)
			mat(p+"ssm_alpha.weight", s.embd, s.vHeads)
			vec(p+"ssm_norm.weight", s.stateDim)
			mat(p+"ssm_out.weight", valueDim, s.embd)
		} else {
			attn(p)
		}
		ffn(p)
	}
	if s.mtp {
		p := fmt.Sprintf("blk.%d.", nLayers)
		vec(p+"attn_norm.weight", s.embd)
		vec(p+"post_attention_norm.weight", s.embd)
		attn(p)
		ffn(p)
		mat(p+"nextn.eh_proj.weight", 2*s.embd, s.embd)
		vec(p+"nextn.enorm.weight", s.embd)
		vec(p+"nextn.hnorm.weight", s.embd)
		vec(p+"nextn.shared_head_norm.weight", s.embd)
	}

	var buf bytes.Buffer
	if _, err := wr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("synth-qwen35.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sm.file = f
	return sm
}

func (sm *synthModel) load(t testing.TB, kv tensor.DType) Model {
	t.Helper()
	m, err := Load(sm.file, Options{KVType: kv, Pool: testPool(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ---- float64 reference ----

type refModel struct {
	sm *synthModel
	// per layer history
	keys, vals [][][]float64 // layer -> token -> kv vector
	conv       [][][]float64 // layer -> last K-1 conv inputs
	state      [][]float64   // layer -> per value head d_k×d_k, S[h][i*dk+j] = S_h[i][j] (row i: key dim)
	// fp8, when set, stores K and V as the FP8 cache does: E4M3 codes of
	// x/scale, read back as code*scale, with the per-block scales below
	// (1 where nil or short).
	fp8            bool
	kScale, vScale []float32
}

// fp8Round rounds the keys or values of block l as the FP8 cache stores
// them.
func (r *refModel) fp8Round(x []float64, scales []float32, l int) {
	sc := float32(1)
	if l < len(scales) {
		sc = scales[l]
	}
	for i, v := range x {
		x[i] = float64(tensor.E4M3ToF32(tensor.F32ToE4M3(float32(v)/sc))) * float64(sc)
	}
}

func newRef(sm *synthModel) *refModel {
	n := len(sm.spec.recurrent) + 1 // + MTP block
	r := &refModel{sm: sm,
		keys: make([][][]float64, n), vals: make([][][]float64, n),
		conv: make([][][]float64, n), state: make([][]float64, n)}
	return r
}

// outputName is the LM head: output.weight, or the tied token embedding
// when the file has none.
func (r *refModel) outputName() string {
	if r.sm.spec.dropTensor == "output.weight" {
		return "token_embd.weight"
	}
	return "output.weight"
}

func (r *refModel) wt(name string) []float32 {
	w, ok := r.sm.w[name]
	if !ok {
		panic("reference: no tensor " + name)
	}
	return w
}

func matVec(w []float32, x []float64, rows int) []float64 {
	cols := len(x)
	y := make([]float64, rows)
	for i := range y {
		var s float64
		for c := 0; c < cols; c++ {
			s += float64(w[i*cols+c]) * x[c]
		}
		y[i] = s
	}
	return y
}

func rmsRef(x []float64, w []float32, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * sc
		if w != nil {
			y[i] *= float64(w[i])
		}
	}
	return y
}

func siluRef(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoidRef(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// forward runs one token at position pos through the trunk and returns the
// logits and the final normed hidden state.
func (r *refModel) forward(tok, pos int) (logits, hidden []float64) {
	s := r.sm.spec
	eps := float64(s.eps)
	emb := r.wt("token_embd.weight")[tok*s.embd : (tok+1)*s.embd]
	x := make([]float64, s.embd)
	for i := range x {
		x[i] = float64(emb[i])
	}
	for l, rec := range s.recurrent {
		p := fmt.Sprintf("blk.%d.", l)
		h := rmsRef(x, r.wt(p+"attn_norm.weight"), eps)
		var y []float64
		if rec {
			y = r.deltaNet(l, p, h)
		} else {
			y = r.attention(l, p, h, pos)
		}
		for i := range x {
			x[i] += y[i]
		}
		r.ffn(p, x)
	}
	hidden = rmsRef(x, r.wt("output_norm.weight"), eps)
	return matVec(r.wt(r.outputName()), hidden, s.vocab), hidden
}

func (r *refModel) ffn(p string, x []float64) {
	s := r.sm.spec
	h := rmsRef(x, r.wt(p+"post_attention_norm.weight"), float64(s.eps))
	g := matVec(r.wt(p+"ffn_gate.weight"), h, s.ffn)
	u := matVec(r.wt(p+"ffn_up.weight"), h, s.ffn)
	for i := range g {
		g[i] = siluRef(g[i]) * u[i]
	}
	y := matVec(r.wt(p+"ffn_down.weight"), g, s.embd)
	for i := range x {
		x[i] += y[i]
	}
}

// attention is the gated full-attention layer (§1.5) with qwen35's
// interleaved multi-section RoPE for text positions.
func (r *refModel) attention(l int, p string, h []float64, pos int) []float64 {
	s := r.sm.spec
	hd, eps := s.headDim, float64(s.eps)
	qg := matVec(r.wt(p+"attn_q.weight"), h, 2*s.heads*hd)
	k := matVec(r.wt(p+"attn_k.weight"), h, s.kvHeads*hd)
	v := matVec(r.wt(p+"attn_v.weight"), h, s.kvHeads*hd)
	q := make([]float64, s.heads*hd)
	gate := make([]float64, s.heads*hd)
	for hh := 0; hh < s.heads; hh++ {
		copy(q[hh*hd:], rmsRef(qg[2*hh*hd:(2*hh+1)*hd], r.wt(p+"attn_q_norm.weight"), eps))
		copy(gate[hh*hd:], qg[(2*hh+1)*hd:(2*hh+2)*hd])
		r.rope(q[hh*hd:(hh+1)*hd], pos)
	}
	for hh := 0; hh < s.kvHeads; hh++ {
		copy(k[hh*hd:], rmsRef(k[hh*hd:(hh+1)*hd], r.wt(p+"attn_k_norm.weight"), eps))
		r.rope(k[hh*hd:(hh+1)*hd], pos)
	}
	if r.fp8 {
		r.fp8Round(k, r.kScale, l)
		r.fp8Round(v, r.vScale, l)
	}
	r.keys[l] = append(r.keys[l], k)
	r.vals[l] = append(r.vals[l], v)
	o := make([]float64, s.heads*hd)
	group := s.heads / s.kvHeads
	for hh := 0; hh < s.heads; hh++ {
		kh := hh / group
		qv := q[hh*hd : (hh+1)*hd]
		sc := make([]float64, len(r.keys[l]))
		mx := math.Inf(-1)
		for t, kk := range r.keys[l] {
			var d float64
			for i := 0; i < hd; i++ {
				d += qv[i] * kk[kh*hd+i]
			}
			sc[t] = d / math.Sqrt(float64(hd))
			mx = math.Max(mx, sc[t])
		}
		var sum float64
		for t := range sc {
			sc[t] = math.Exp(sc[t] - mx)
			sum += sc[t]
		}
		for t, vv := range r.vals[l] {
			for i := 0; i < hd; i++ {
				o[hh*hd+i] += sc[t] / sum * vv[kh*hd+i]
			}
		}
	}
	for i := range o {
		o[i] *= sigmoidRef(gate[i])
	}
	return matVec(r.wt(p+"attn_output.weight"), o, s.embd)
}

// rope rotates the first ropeDims of x NeoX-style; pairs of the "extra"
// section (position 0 for text tokens) stay put.
func (r *refModel) rope(x []float64, pos int) {
	s := r.sm.spec
	half := s.ropeDims / 2
	sect := s.sections[0] + s.sections[1] + s.sections[2] + s.sections[3]
	for i := 0; i < half; i++ {
		sec := i % sect
		text := (sec%3 == 1 && sec < 3*s.sections[1]) || (sec%3 == 2 && sec < 3*s.sections[2]) || (sec%3 == 0 && sec < 3*s.sections[0])
		theta := 0.0
		if text {
			theta = float64(pos) * math.Pow(float64(s.base), -2*float64(i)/float64(s.ropeDims))
		}
		c, sn := math.Cos(theta), math.Sin(theta)
		x0, x1 := x[i], x[i+half]
		x[i] = x0*c - x1*sn
		x[i+half] = x0*sn + x1*c
	}
}

// deltaNet is the Gated DeltaNet layer of §1.6, one token.
func (r *refModel) deltaNet(l int, p string, h []float64) []float64 {
	s := r.sm.spec
	dk, K := s.stateDim, s.kernel
	keyDim, valueDim := s.kHeads*dk, s.vHeads*dk
	C := 2*keyDim + valueDim
	eps := float64(s.eps)
	mix := matVec(r.wt(p+"attn_qkv.weight"), h, C)
	z := matVec(r.wt(p+"attn_gate.weight"), h, valueDim)
	b := matVec(r.wt(p+"ssm_beta.weight"), h, s.vHeads)
	a := matVec(r.wt(p+"ssm_alpha.weight"), h, s.vHeads)
	if r.conv[l] == nil {
		for j := 0; j < K-1; j++ {
			r.conv[l] = append(r.conv[l], make([]float64, C))
		}
		r.state[l] = make([]float64, s.vHeads*dk*dk)
	}
	cw := r.wt(p + "ssm_conv1d.weight")
	c := make([]float64, C)
	for ch := 0; ch < C; ch++ {
		var sum float64
		for j := 0; j < K; j++ {
			u := mix[ch]
			if j < K-1 {
				u = r.conv[l][j][ch]
			}
			sum += float64(cw[ch*K+j]) * u
		}
		c[ch] = siluRef(sum)
	}
	r.conv[l] = append(r.conv[l][1:], mix)
	l2 := func(x []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v / math.Sqrt(ss+eps)
		}
		return y
	}
	dt, A := r.wt(p+"ssm_dt.bias"), r.wt(p+"ssm_a")
	norm := r.wt(p + "ssm_norm.weight")
	y := make([]float64, valueDim)
	for hv := 0; hv < s.vHeads; hv++ {
		kh := hv % s.kHeads
		q := l2(c[kh*dk : (kh+1)*dk])
		k := l2(c[keyDim+kh*dk : keyDim+(kh+1)*dk])
		v := c[2*keyDim+hv*dk : 2*keyDim+(hv+1)*dk]
		beta := sigmoidRef(b[hv])
		x := a[hv] + float64(dt[hv])
		sp := math.Log1p(math.Exp(x))
		g := float64(A[hv]) * sp
		S := r.state[l][hv*dk*dk : (hv+1)*dk*dk] // S[i*dk+j], i over keys
		for i := range S {
			S[i] *= math.Exp(g)
		}
		delta := make([]float64, dk)
		for j := 0; j < dk; j++ {
			var kv float64
			for i := 0; i < dk; i++ {
				kv += S[i*dk+j] * k[i]
			}
			delta[j] = beta * (v[j] - kv)
		}
		for i := 0; i < dk; i++ {
			for j := 0; j < dk; j++ {
				S[i*dk+j] += k[i] * delta[j]
			}
		}
		o := make([]float64, dk)
		for j := 0; j < dk; j++ {
			for i := 0; i < dk; i++ {
				o[j] += S[i*dk+j] * q[i]
			}
			o[j] /= math.Sqrt(float64(dk))
		}
		on := rmsRef(o, norm, eps)
		for j := 0; j < dk; j++ {
			y[hv*dk+j] = on[j] * siluRef(z[hv*dk+j])
		}
	}
	return matVec(r.wt(p+"ssm_out.weight"), y, s.embd)
}

// mtp runs the MTP block on token tok (x_{t+1}) with the trunk's hidden h_t.
func (r *refModel) mtp(tok, pos int, hidden []float64) (logits, out []float64) {
	s := r.sm.spec
	eps := float64(s.eps)
	l := len(s.recurrent)
	p := fmt.Sprintf("blk.%d.", l)
	emb := r.wt("token_embd.weight")[tok*s.embd : (tok+1)*s.embd]
	e := make([]float64, s.embd)
	for i := range e {
		e[i] = float64(emb[i])
	}
	cat := append(rmsRef(e, r.wt(p+"nextn.enorm.weight"), eps), rmsRef(hidden, r.wt(p+"nextn.hnorm.weight"), eps)...)
	x := matVec(r.wt(p+"nextn.eh_proj.weight"), cat, s.embd)
	h := rmsRef(x, r.wt(p+"attn_norm.weight"), eps)
	y := r.attention(l, p, h, pos)
	for i := range x {
		x[i] += y[i]
	}
	r.ffn(p, x)
	out = rmsRef(x, r.wt(p+"nextn.shared_head_norm.weight"), eps)
	return matVec(r.wt(r.outputName()), out, s.vocab), out
}

// relDiff reports the largest difference between got and want relative to
// want's largest magnitude.
func relDiff(got []float32, want []float64) float64 {
	var maxd, maxw float64
	for i := range want {
		maxd = math.Max(maxd, math.Abs(float64(got[i])-want[i]))
		maxw = math.Max(maxw, math.Abs(want[i]))
	}
	return maxd / maxw
}
