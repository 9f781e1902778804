package gpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// The DeltaNet op against two references:
//
//   - dnRef, below: a plain-Go transliteration of engine/model/deltanet.go's
//     per-token math (forward's activations, convToken, shift, step via
//     runDelta, the gated norm), calling the same engine/tensor kernels the
//     CPU engine calls (ConvTaps, SiLU, RMSNorm, DeltaStep), on random
//     layers of several shapes;
//   - the CPU model itself (TestDeltaNetMatchesCPUModel): a synthetic qwen35
//     file loaded by model.Load, whose first layer's state after a chain and
//     after a tree plus Commit the GPU must reproduce.
//
// Tolerances. The GPU follows the CPU's order of operations (the conv taps
// and ggml_vec_dot_f32's lanes and reduction), but its exp, log, sqrt and
// division are Vulkan's (a few ulp where glibc's expf is within 0.502 ulp,
// and the CPU's SiLU uses ggml's own expf), its norms sum squares in float32
// where the CPU sums in float64, and the reference's expf is
// float32(math.Exp). Each of those moves a value by a few parts in 1e7;
// through the L2 norms, the recurrence (which carries every token's error
// into the state, damped by e^g < 1, so that it does not grow with the
// length of a chain) and the output norm, the largest difference measured
// on lavapipe is 1.6e-5 of the values' RMS (S after 42 tokens, head size
// 48), and below 2e-5 after chains of 3000 tokens. dnTol allows 6 times
// that for drivers whose exp is coarser (Vulkan permits 3 + 2|x| ulp); a
// wrong tap, head or window row moves values by tens of percent. The conv
// window is the inputs copied, so it must be exact; and tree nodes, chains
// and replays run the same shaders on the same numbers, so those must
// agree bit for bit.
const dnTol = 1e-4

// dnShape is a DeltaNet geometry.
type dnShape struct{ D, Hk, Hv, K int }

func (s dnShape) String() string { return fmt.Sprintf("d%d-k%d-v%d-conv%d", s.D, s.Hk, s.Hv, s.K) }

// dnShapes covers delta_scan's workgroups (32 rows of heads of 128 and 64,
// a whole head of 32, a head of 48 with ggml's leftover terms in the dot
// products), grouped key heads, and conv kernels with and without fused
// taps, and one without a window.
var dnShapes = []dnShape{
	{D: 32, Hk: 2, Hv: 4, K: 4}, // the synthetic model's
	{D: 128, Hk: 1, Hv: 2, K: 4},
	{D: 48, Hk: 2, Hv: 2, K: 3},
	{D: 64, Hk: 1, Hv: 1, K: 2},
	{D: 32, Hk: 1, Hv: 2, K: 1}, // no window
}

// dnWeights draws a layer like engine/quantize's synthetic qwen35 ones.
func dnWeights(rng *rand.Rand, s dnShape) *model.DeltaNetWeights {
	w := &model.DeltaNetWeights{KHeads: s.Hk, VHeads: s.Hv, HeadDim: s.D, Kernel: s.K,
		KeyDim: s.Hk * s.D, ValueDim: s.Hv * s.D, Eps: 1e-6, Scale: float32(1 / math.Sqrt(float64(s.D)))}
	w.ConvDim = 2*w.KeyDim + w.ValueDim
	uni := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return v
	}
	w.Conv = uni(s.K*w.ConvDim, -1, 1)
	w.DTBias = uni(s.Hv, -5, -1)
	w.A = uni(s.Hv, -4, -0.5)
	w.Norm = uni(s.D, 0.8, 1.2)
	return w
}

// dnInputs are a batch's projections, raw.
type dnInputs struct {
	n                   int
	qkv, z, beta, alpha []float32
}

func dnRandInputs(rng *rand.Rand, w *model.DeltaNetWeights, n int) dnInputs {
	normal := func(k int, sd float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(sd * rng.NormFloat64())
		}
		return v
	}
	return dnInputs{n: n, qkv: normal(n*w.ConvDim, 1), z: normal(n*w.ValueDim, 1),
		beta: normal(n*w.VHeads, 1), alpha: normal(n*w.VHeads, 0.5)}
}

// pick returns the inputs of the listed tokens, in that order.
func (in dnInputs) pick(w *model.DeltaNetWeights, idx []int) dnInputs {
	out := dnInputs{n: len(idx)}
	for _, i := range idx {
		out.qkv = append(out.qkv, in.qkv[i*w.ConvDim:(i+1)*w.ConvDim]...)
		out.z = append(out.z, in.z[i*w.ValueDim:(i+1)*w.ValueDim]...)
		out.beta = append(out.beta, in.beta[i*w.VHeads:(i+1)*w.VHeads]...)
		out.alpha = append(out.alpha, in.alpha[i*w.VHeads:(i+1)*w.VHeads]...)
	}
	return out
}

// dnRef is the CPU reference: engine/model/deltanet.go transliterated,
// token by token, with engine/tensor's kernels. Its expf is
// float32(math.Exp), which differs from the CPU engine's glibc expf by an
// ulp in a few calls in a thousand.
type dnRef struct {
	w       *model.DeltaNetWeights
	convT   []float32 // taps tap-major, for tensor.ConvTaps
	S, conv []float32
}

func newDNRef(w *model.DeltaNetWeights, S, conv []float32) *dnRef {
	r := &dnRef{w: w, S: append([]float32(nil), S...), conv: append([]float32(nil), conv...)}
	r.convT = make([]float32, w.Kernel*w.ConvDim)
	for ch := 0; ch < w.ConvDim; ch++ {
		for j := 0; j < w.Kernel; j++ {
			r.convT[j*w.ConvDim+ch] = w.Conv[ch*w.Kernel+j]
		}
	}
	return r
}

func (r *dnRef) clone() *dnRef { return newDNRef(r.w, r.S, r.conv) }

func dnExpf(x float32) float32 { return float32(math.Exp(float64(x))) }

// run advances the state over in's tokens as a chain and returns their
// outputs (before the output projection).
func (r *dnRef) run(in dnInputs) []float32 {
	w := r.w
	C, V, Hv, D, K := w.ConvDim, w.ValueDim, w.VHeads, w.HeadDim, w.Kernel
	out := make([]float32, in.n*V)
	x := make([]float32, C)
	for t := 0; t < in.n; t++ {
		mix := in.qkv[t*C : (t+1)*C]
		g, beta := r.activations(in, t)
		// convToken, then shift
		tensor.ConvTaps(x, r.conv, mix, r.convT, K)
		tensor.SiLU(x)
		for hd := 0; hd < 2*w.KHeads; hd++ {
			dnL2Norm(x[hd*D:(hd+1)*D], w.Eps)
		}
		if K > 1 {
			copy(r.conv, r.conv[C:])
			copy(r.conv[(K-2)*C:], mix)
		}
		// runDelta / step
		o := out[t*V : (t+1)*V]
		for hv := 0; hv < Hv; hv++ {
			kh := hv % w.KHeads
			q := x[kh*D : (kh+1)*D]
			k := x[w.KeyDim+kh*D : w.KeyDim+(kh+1)*D]
			v := x[2*w.KeyDim+hv*D : 2*w.KeyDim+(hv+1)*D]
			tensor.DeltaStep(r.S[hv*D*D:(hv+1)*D*D], q, k, v, dnExpf(g[hv]), beta[hv], w.Scale, o[hv*D:(hv+1)*D])
		}
		// the gated RMSNorm
		zz := append([]float32(nil), in.z[t*V:(t+1)*V]...)
		for hv := 0; hv < Hv; hv++ {
			oh, zh := o[hv*D:(hv+1)*D], zz[hv*D:(hv+1)*D]
			tensor.RMSNorm(oh, oh, w.Norm, w.Eps)
			tensor.SiLU(zh)
			tensor.Mul(oh, zh)
		}
	}
	return out
}

// activations are forward's g = softplus(alpha + dt_bias) * A and beta =
// sigmoid(beta) of token t.
func (r *dnRef) activations(in dnInputs, t int) (g, beta []float32) {
	w, Hv := r.w, r.w.VHeads
	g, beta = make([]float32, Hv), make([]float32, Hv)
	for h := 0; h < Hv; h++ {
		beta[h] = 1 / (1 + dnExpf(-in.beta[t*Hv+h]))
		a := in.alpha[t*Hv+h] + w.DTBias[h]
		if a <= 20 {
			a = float32(math.Log(float64(1 + dnExpf(a))))
		}
		g[h] = a * w.A[h]
	}
	return g, beta
}

// dnL2Norm is engine/model's l2Norm.
func dnL2Norm(x []float32, eps float32) {
	n := float32(len(x))
	tensor.RMSNorm(x, x, nil, eps/n)
	tensor.Scale(x, 1/float32(math.Sqrt(float64(n))))
}

// dnGPU is one layer with one sequence's state on the device, and the
// buffers one batch needs. Every range starts dnPad floats into its buffer
// (48 bytes, below any minStorageBufferOffsetAlignment), so that the ops'
// element offsets are exercised.
type dnGPU struct {
	t              *testing.T
	d              *Device
	w              *model.DeltaNetWeights
	L              *DeltaLayer
	st             DeltaState
	saved, scratch Range
}

const dnPad = 12 // floats before every range the tests pass

func newDNGPU(t *testing.T, d *Device, w *model.DeltaNetWeights, maxTokens int, S, conv []float32) *dnGPU {
	t.Helper()
	L, err := d.NewDeltaLayer(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(L.Free)
	g := &dnGPU{t: t, d: d, w: w, L: L}
	g.st = DeltaState{S: g.upload(S), Conv: g.upload(conv)}
	g.saved = g.zeros(DeltaSavedBytes(L, maxTokens) / 4)
	// the scratch is followed by a guard that no shader may write: they
	// bind whole buffers, so DeltaScratchBytes is the only bound
	n := DeltaScratchBytes(L, maxTokens) / 4
	guard := make([]float32, n+dnGuard)
	for i := n; i < n+dnGuard; i++ {
		guard[i] = dnSentinel
	}
	g.scratch = g.upload(guard)
	g.scratch.Size = 4 * n
	return g
}

const (
	dnGuard    = 4096
	dnSentinel = 12345.5
)

// checkGuard fails when anything wrote past the scratch.
func (g *dnGPU) checkGuard() {
	g.t.Helper()
	after := g.scratch
	after.Off, after.Size = after.Off+after.Size, 4*dnGuard
	for i, v := range g.download(after) {
		if v != dnSentinel {
			g.t.Fatalf("value %d after the scratch was written: %g", i, v)
		}
	}
}

// upload places v after dnPad floats of a new buffer.
func (g *dnGPU) upload(v []float32) Range { return g.uploadBytes(f32Bytes(v), len(v)) }

func (g *dnGPU) uploadI32(v []int32) Range { return g.uploadBytes(i32Bytes(v), len(v)) }

func (g *dnGPU) uploadBytes(data []byte, n int) Range {
	g.t.Helper()
	b, err := g.d.NewBuffer(4 * int64(dnPad+n))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(b.Free)
	r := b.Slice(4*dnPad, 4*int64(n))
	if err := g.d.Upload(r, data); err != nil {
		g.t.Fatal(err)
	}
	return r
}

func (g *dnGPU) zeros(n int64) Range { return g.upload(make([]float32, n)) }

func (g *dnGPU) download(r Range) []float32 {
	g.t.Helper()
	out := make([]float32, r.Size/4)
	if err := g.d.Download(r, f32Bytes(out)); err != nil {
		g.t.Fatal(err)
	}
	return out
}

func (g *dnGPU) state() (S, conv []float32) { return g.download(g.st.S), g.download(g.st.Conv) }

// forward runs one batch: a chain when parent is nil, else a tree. It
// returns the outputs.
func (g *dnGPU) forward(in dnInputs, parent []int32) []float32 {
	g.t.Helper()
	w := g.w
	out := g.zeros(int64(in.n * w.ValueDim))
	qkv, z, beta, alpha := g.upload(in.qkv), g.upload(in.z), g.upload(in.beta), g.upload(in.alpha)
	var par Range
	if parent != nil {
		par = g.uploadI32(parent)
	}
	r := g.d.Begin()
	r.DeltaNet(out, qkv, z, beta, alpha, g.L, g.st, in.n, par, parent == nil, g.saved, g.scratch)
	r.Barrier()
	if _, err := r.Submit(); err != nil {
		g.t.Fatal(err)
	}
	g.checkGuard()
	return g.download(out)
}

func (g *dnGPU) replay(path []int32) {
	g.t.Helper()
	p := g.uploadI32(path)
	r := g.d.Begin()
	r.DeltaReplay(g.L, g.st, g.saved, p, len(path), g.scratch)
	r.Barrier()
	if _, err := r.Submit(); err != nil {
		g.t.Fatal(err)
	}
	g.checkGuard()
}

// dnDiff is the largest difference between got and want relative to want's
// RMS.
func dnDiff(got, want []float32) float64 {
	var ss, worst float64
	for i := range want {
		ss += float64(want[i]) * float64(want[i])
		worst = max(worst, math.Abs(float64(got[i])-float64(want[i])))
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	if rms == 0 {
		return worst
	}
	return worst / rms
}

func dnClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i, v := range got {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s: value %d is %g", what, i, v)
		}
	}
	d := dnDiff(got, want)
	if d > tol {
		t.Errorf("%s differs from the reference by %.3g of its RMS (tolerance %.3g)", what, d, tol)
	} else {
		t.Logf("%s: %.3g of the RMS", what, d)
	}
}

func dnSame(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s: value %d of %d is %g, want %g exactly", what, i, len(want), got[i], want[i])
			return
		}
	}
}

// dnStart is a sequence that has already run a few tokens: a state and a
// window that are not zero.
func dnStart(t *testing.T, rng *rand.Rand, w *model.DeltaNetWeights) *dnRef {
	ref := newDNRef(w, make([]float32, w.VHeads*w.HeadDim*w.HeadDim), make([]float32, (w.Kernel-1)*w.ConvDim))
	ref.run(dnRandInputs(rng, w, 5))
	return ref
}

// TestDeltaNetChain runs chains in one batch and in batches of several
// sizes against the reference: outputs, S and the conv window.
func TestDeltaNetChain(t *testing.T) {
	d := testDevice(t)
	for si, s := range dnShapes {
		t.Run(s.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(si), 1))
			w := dnWeights(rng, s)
			const T = 37
			in := dnRandInputs(rng, w, T)
			ref := dnStart(t, rng, w)
			end := ref.clone()
			want := end.run(in)
			for _, chunks := range [][]int{{T}, {1, 2, 3, 31}, {36, 1}} {
				g := newDNGPU(t, d, w, T, ref.S, ref.conv)
				var got []float32
				at := 0
				for _, c := range chunks {
					idx := make([]int, c)
					for i := range idx {
						idx[i] = at + i
					}
					got = append(got, g.forward(in.pick(w, idx), nil)...)
					at += c
				}
				S, conv := g.state()
				name := fmt.Sprint(chunks)
				dnClose(t, name+" outputs", got, want, dnTol)
				dnClose(t, name+" S", S, end.S, dnTol)
				dnSame(t, name+" conv window", conv, end.conv)
			}
		})
	}
}

// dnPaths lists every node's root-to-node path (root first).
func dnPaths(parent []int32) [][]int {
	paths := make([][]int, len(parent))
	for i := range parent {
		for a := int32(i); a >= 0; a = parent[a] {
			paths[i] = append([]int{int(a)}, paths[i]...)
		}
	}
	return paths
}

// dnTrees are verify trees: parents by batch index, and a path to accept.
var dnTrees = []struct {
	name   string
	parent []int32
	path   []int32
}{
	{"brief", []int32{-1, 0, 0, 1, 2, 2, 4}, []int32{0, 2, 4, 6}},
	{"forest", []int32{-1, -1, 1, 0, 2, 3, -1}, []int32{1, 2, 4}},
	{"chain-to-verify", []int32{-1, 0, 1, 2, 3}, []int32{0, 1, 2}},
	{"root-only", []int32{-1, 0, 0}, []int32{0}},
	// 31 nodes breadth first: every inner node branches, its children far
	// from it, so the plan needs its slots
	{"binary", dnBinary(31), []int32{0, 2, 5, 12, 26}},
	// a spine whose every node also has a leaf, the leaf numbered first:
	// depth first with the larger child last keeps one slot
	{"caterpillar", []int32{-1, 0, 0, 2, 2, 4, 4, 6, 6, 8, 8}, []int32{0, 2, 4, 6, 8, 10}},
}

func dnBinary(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i+1)/2 - 1)
	}
	return p
}

// TestDeltaNetTree runs tree batches: every node's output must be the
// output of the chain along its root-to-node path, bit for bit (the same
// shaders on the same numbers), and the reference's within dnTol; the
// committed state must stay as it was; DeltaReplay of a path must leave the
// state that running the path as a chain leaves, bit for bit.
func TestDeltaNetTree(t *testing.T) {
	d := testDevice(t)
	for si, s := range dnShapes {
		for _, tc := range dnTrees {
			t.Run(s.String()+"/"+tc.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(si), 2))
				w := dnWeights(rng, s)
				n := len(tc.parent)
				in := dnRandInputs(rng, w, n)
				ref := dnStart(t, rng, w)
				g := newDNGPU(t, d, w, n, ref.S, ref.conv)
				got := g.forward(in, tc.parent)
				S, conv := g.state()
				dnSame(t, "committed S after the tree", S, ref.S)
				dnSame(t, "committed window after the tree", conv, ref.conv)

				V := w.ValueDim
				for i, path := range dnPaths(tc.parent) {
					c := newDNGPU(t, d, w, n, ref.S, ref.conv)
					chain := c.forward(in.pick(w, path), nil)
					last := chain[(len(path)-1)*V:]
					dnSame(t, fmt.Sprintf("node %d (path %v)", i, path), got[i*V:(i+1)*V], last)
					dnClose(t, fmt.Sprintf("node %d", i), got[i*V:(i+1)*V], ref.clone().run(in.pick(w, path))[(len(path)-1)*V:], dnTol)
				}

				// saved rows: the conv input exactly, g and beta as the reference
				sv := g.download(g.saved)
				C, Hv := w.ConvDim, w.VHeads
				row := C + 2*Hv
				for i := 0; i < n; i++ {
					dnSame(t, fmt.Sprintf("saved conv input %d", i), sv[i*row:i*row+C], in.qkv[i*C:(i+1)*C])
					gw, bw := ref.activations(in, i)
					dnClose(t, fmt.Sprintf("saved g %d", i), sv[i*row+C:i*row+C+Hv], gw, dnTol)
					dnClose(t, fmt.Sprintf("saved beta %d", i), sv[i*row+C+Hv:(i+1)*row], bw, dnTol)
				}

				path := make([]int, len(tc.path))
				for k, p := range tc.path {
					path[k] = int(p)
				}
				g.replay(tc.path)
				c := newDNGPU(t, d, w, n, ref.S, ref.conv)
				c.forward(in.pick(w, path), nil)
				S, conv = g.state()
				cS, cConv := c.state()
				dnSame(t, "S after replay", S, cS)
				dnSame(t, "window after replay", conv, cConv)
				r := ref.clone()
				r.run(in.pick(w, path))
				dnClose(t, "S after replay", S, r.S, dnTol)
				dnSame(t, "window after replay vs reference", conv, r.conv)
			})
		}
	}
}

// TestDeltaNetMatchesCPUModel runs the first layer of a synthetic qwen35
// model (engine/quantize's tiny size, layer 0 is a DeltaNet) on the GPU
// with the projections the CPU model computes, and compares the state with
// the CPU model's own (its snapshot): after a prompt as a chain, and after
// a tree batch of drafts and Commit of a path (DeltaReplay here).
func TestDeltaNetMatchesCPUModel(t *testing.T) {
	d := testDevice(t)
	wr, err := synth.Build(synth.Options{Size: "tiny", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := wr.WriteTo(&file); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("synth-qwen35.gguf", file.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	pool := tensor.NewPool(2)
	defer pool.Close()
	m, err := model.Load(f, model.Options{KVType: tensor.F32, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	W, err := model.Describe(m)
	if err != nil {
		t.Fatal(err)
	}
	lw := W.Layers[0]
	dn := lw.Delta
	if dn == nil {
		t.Fatal("layer 0 of the synthetic model is not a DeltaNet")
	}
	E := W.Hyper.Embd

	// inputs of layer 0 as the CPU computes them: embedding, attn_norm,
	// then the four projections (runLayers, deltaNet.forward, decoder.mm)
	project := func(tokens []int32) dnInputs {
		n := len(tokens)
		h := make([]float32, n*E)
		for i, tok := range tokens {
			W.Embed.RowTo(h[i*E:(i+1)*E], int(tok))
			tensor.RMSNorm(h[i*E:(i+1)*E], h[i*E:(i+1)*E], lw.AttnNorm, W.Eps)
		}
		mm := func(l model.Linear) []float32 {
			out := make([]float32, n*l.W.Rows)
			if n == 1 {
				pool.MatVec(out, l.W, h)
			} else {
				pool.MatMul(out, l.W, h, n)
			}
			if l.Scale != 0 {
				tensor.Scale(out, l.Scale)
			}
			for r := 0; l.Bias != nil && r < n; r++ {
				tensor.Add(out[r*l.W.Rows:(r+1)*l.W.Rows], l.Bias)
			}
			return out
		}
		return dnInputs{n: n, qkv: mm(dn.QKV), z: mm(dn.Z), beta: mm(dn.Beta), alpha: mm(dn.Alpha)}
	}
	cpuLayer0 := func(st model.State) model.RecurrentLayer {
		sn, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return sn.Recurrent.Layer(0)
	}

	rng := rand.New(rand.NewPCG(7, 7))
	V := W.Hyper.Vocab
	prompt := make([]int32, 23)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(V))
	}
	st := m.NewState(64)
	logits := make([]float32, V)
	if err := m.Forward(st, model.ChainBatch(prompt, 0, false), logits); err != nil {
		t.Fatal(err)
	}
	want := cpuLayer0(st)

	g := newDNGPU(t, d, dn, len(prompt), make([]float32, len(want.S)), make([]float32, len(want.Conv)))
	g.forward(project(prompt), nil)
	S, conv := g.state()
	dnClose(t, "S after the prompt", S, want.S, dnTol)
	dnSame(t, "conv window after the prompt", conv, want.Conv)

	// a tree of drafts after the prompt, then Commit of one path
	parent := []int32{-1, 0, 0, 1, 2, 2, 4}
	path := []int{0, 2, 5}
	drafts := make([]int32, len(parent))
	pos := make([]int32, len(parent))
	for i := range drafts {
		drafts[i] = int32(rng.IntN(V))
		pos[i] = int32(len(prompt) + len(dnPaths(parent)[i]) - 1)
	}
	if err := m.Forward(st, model.Batch{Tokens: drafts, Pos: pos, Parent: parent}, logits); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(path); err != nil {
		t.Fatal(err)
	}
	want = cpuLayer0(st)

	g.forward(project(drafts), parent)
	p32 := make([]int32, len(path))
	for k, p := range path {
		p32[k] = int32(p)
	}
	g.replay(p32)
	S, conv = g.state()
	dnClose(t, "S after the tree and Commit", S, want.S, dnTol)
	dnSame(t, "conv window after the tree and Commit", conv, want.Conv)
}

// TestDeltaNetErrors checks that bad arguments stick as errors naming them.
func TestDeltaNetErrors(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(9, 9))
	w := dnWeights(rng, dnShapes[0])
	bad := *w
	bad.Norm = bad.Norm[:3]
	if _, err := d.NewDeltaLayer(&bad); err == nil {
		t.Error("NewDeltaLayer accepted a norm weight of 3 values")
	}
	g := newDNGPU(t, d, w, 4, make([]float32, w.VHeads*w.HeadDim*w.HeadDim), make([]float32, (w.Kernel-1)*w.ConvDim))
	in := dnRandInputs(rng, w, 4)
	short, out, z, beta, alpha := g.upload(in.qkv[:w.ConvDim]), g.zeros(int64(4*w.ValueDim)), g.upload(in.z), g.upload(in.beta), g.upload(in.alpha)
	r := d.Begin()
	r.DeltaNet(out, short, z, beta, alpha, g.L, g.st, 4, Range{}, true, Range{}, g.scratch)
	if _, err := r.Submit(); err == nil || !strings.Contains(err.Error(), "qkv") {
		t.Errorf("DeltaNet with a qkv range of one token for four: %v", err)
	}
	const big = dnMaxTreeNodes + 1
	bigIn := dnRandInputs(rng, w, big)
	tree := newDNGPU(t, d, w, big, make([]float32, w.VHeads*w.HeadDim*w.HeadDim), make([]float32, (w.Kernel-1)*w.ConvDim))
	out, qkv, z, beta, alpha := tree.zeros(int64(big*w.ValueDim)), tree.upload(bigIn.qkv), tree.upload(bigIn.z), tree.upload(bigIn.beta), tree.upload(bigIn.alpha)
	par := tree.uploadI32(make([]int32, big))
	r = d.Begin()
	r.DeltaNet(out, qkv, z, beta, alpha, tree.L, tree.st, big, par, false, tree.saved, tree.scratch)
	if _, err := r.Submit(); err == nil || !strings.Contains(err.Error(), "tree") {
		t.Error("DeltaNet accepted a tree of 300 nodes")
	}
}
