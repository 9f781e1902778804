package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// attAncestry transliterates engine/model's ancestry.build (batch.go): per
// node its ancestors and itself, root first, flattened as off then idx.
func attAncestry(parent []int32) (off, idx []int32) {
	off = append(off, 0)
	for i := range parent {
		start := len(idx)
		for j := int32(i); j >= 0; j = parent[j] {
			idx = append(idx, j)
		}
		for l, r := start, len(idx)-1; l < r; l, r = l+1, r-1 {
			idx[l], idx[r] = idx[r], idx[l]
		}
		off = append(off, int32(len(idx)))
	}
	return off, idx
}

// attVisible lists the cache slots token i sees, in cache order (engine/model
// work.visible).
func attVisible(i, base int, off, idx []int32) []int {
	var s []int
	if off == nil {
		for j := 0; j <= base+i; j++ {
			s = append(s, j)
		}
		return s
	}
	for j := 0; j < base; j++ {
		s = append(s, j)
	}
	for _, a := range idx[off[i]:off[i+1]] {
		s = append(s, base+int(a))
	}
	return s
}

// attCPUFP8 transliterates engine/model's attendFP8 (unexported): the
// one-row online softmax in float32 over E4M3 codes, score =
// DotE4M3(k, q) * (kScale*scale), acc = acc*ms + vs*code, o = acc *
// (vScale/sum). expf is float64's exp rounded to float32 (glibc's expf
// is correctly rounded but in rare cases).
func attCPUFP8(q []float32, k8, v8 []byte, slots []int, dim, kvOff int, scale, kScale, vScale float32) []float32 {
	hd := len(q)
	sk := kScale * scale
	acc := make([]float32, hd)
	M, S := float32(math.Inf(-1)), float32(0)
	expf := func(x float32) float32 { return float32(math.Exp(float64(x))) }
	for _, slot := range slots {
		off := slot*dim + kvOff
		s := tensor.DotE4M3(k8[off:off+hd], q) * sk
		ms, vs := float32(1), float32(1)
		if s > M {
			ms = expf(M - s)
			M = s
		} else {
			vs = expf(s - M)
		}
		S = float32(S*ms) + vs
		if ms != 1 {
			tensor.Scale(acc, ms)
		}
		tensor.AxpyE4M3(acc, v8[off:off+hd], vs)
	}
	inv := float32(0)
	if S != 0 {
		inv = 1 / S
	}
	inv *= vScale
	for d := range acc {
		acc[d] *= inv
	}
	return acc
}

// attCPUF16 transliterates engine/model's attendF16 (unexported; ggml-cpu's
// one-row flash attention over an F16 cache): Q rounded to F16, scores by
// dotF16 (32 float32 accumulators reduced as ggml does, leftovers added in
// float64), an online softmax slot by slot, the running output rounded
// through F16 at every rescale and every fused multiply-add.
func attCPUF16(q []float32, k16, v16 []uint16, slots []int, dim, kvOff int, scale float32) []float32 {
	hd := len(q)
	q16 := make([]float32, hd)
	for d := range q16 {
		q16[d] = tensor.RoundF16(q[d])
	}
	acc := make([]float32, hd)
	M, S := float32(math.Inf(-1)), float32(0)
	expf := func(x float32) float32 { return float32(math.Exp(float64(x))) }
	np := hd &^ 31
	for _, slot := range slots {
		off := slot*dim + kvOff
		var a [32]float32
		for d0 := 0; d0 < np; d0 += 32 {
			for l := range a {
				a[l] += tensor.F16ToF32(k16[off+d0+l]) * q16[d0+l]
			}
		}
		var sum float32
		if np > 0 {
			var t [4]float32
			for l := 0; l < 4; l++ {
				t[l] = ((a[l] + a[16+l]) + (a[8+l] + a[24+l])) + ((a[4+l] + a[20+l]) + (a[12+l] + a[28+l]))
			}
			sum = (t[0] + t[1]) + (t[2] + t[3])
		}
		ds := float64(sum)
		for d := np; d < hd; d++ {
			ds += float64(tensor.F16ToF32(k16[off+d]) * q16[d])
		}
		sc := float32(ds) * scale
		ms, vs := float32(1), float32(1)
		if sc > M {
			ms = expf(M - sc)
			M = sc
		} else {
			vs = expf(sc - M)
		}
		S = float32(S*ms) + vs
		for d := range acc {
			if ms != 1 {
				acc[d] = tensor.RoundF16(acc[d] * ms)
			}
			acc[d] = tensor.RoundF16(float32(float64(tensor.F16ToF32(v16[off+d]))*float64(vs) + float64(acc[d])))
		}
	}
	inv := float32(0)
	if S != 0 {
		inv = 1 / S
	}
	for d := range acc {
		acc[d] *= inv
	}
	return acc
}

// attExact is attention in float64 over the cache's exact values (k, v
// decoded, scales applied) for one query row, with the tolerance a
// float32 computation of it may need per output (attTolerance).
func attExact(q []float32, k, v []float64, slots []int, dim, kvOff int, scale float32, accum int) (o, tol []float64) {
	return attExactRounded(q, k, v, slots, dim, kvOff, scale, accum, 0, 0)
}

// attExactRounded is attExact for an arithmetic that also rounds each
// query value with a relative error of at most qRel (a score then moves by
// qRel·scale·Σ|q k|) and each weight p_j with one of at most pRel (the
// tensor cores' F16 operands: attention_cm.comp).
func attExactRounded(q []float32, k, v []float64, slots []int, dim, kvOff int, scale float32, accum int, qRel, pRel float64) (o, tol []float64) {
	hd := len(q)
	s := make([]float64, len(slots))
	es := make([]float64, len(slots)) // the error bound of each float32 score
	mx, mn := math.Inf(-1), math.Inf(1)
	for j, slot := range slots {
		var dot, abs float64
		for d := 0; d < hd; d++ {
			x := float64(q[d]) * k[slot*dim+kvOff+d]
			dot += x
			abs += math.Abs(x)
		}
		s[j] = dot * float64(scale)
		es[j] = (float64(hd+2)*ewU + qRel) * abs * float64(scale)
		mx, mn = max(mx, s[j]), min(mn, s[j])
	}
	var L float64
	p := make([]float64, len(slots))
	for j := range s {
		p[j] = math.Exp(s[j] - mx)
		L += p[j]
	}
	o = make([]float64, hd)
	for j, slot := range slots {
		p[j] /= L
		for d := 0; d < hd; d++ {
			o[d] += p[j] * v[slot*dim+kvOff+d]
		}
	}
	// Tolerance: to first order a relative error δ_j of weight j moves
	// output d by p_j δ_j (v_jd - o_d). δ_j takes the score's float32 dot
	// product ((hd+2) u Σ|q k|, scaled), the exp of x_j = s_j - max
	// (Vulkan allows 3 + 2|x| ulp) and, shared by the slots of a block or
	// split but not by all, the rescaling factors exp(mOld - mNew) of the
	// online softmax (3 + 2|Δm| ulp each, the Δm adding up to at most the
	// spread of the scores, once for the blocks and once for the splits,
	// and up to accum/16 + 8 factors of 3 ulp). The sums of p*v and of p
	// take at most accum roundings each (float32 recursive summation: accum
	// u of the sum of |terms|), and the final division and products 4 u.
	// All of it twice, for the second-order terms and slack.
	shared := 2 * ewU * (3*float64(accum/16+8) + 4*(mx-mn))
	tol = make([]float64, hd)
	for d := range tol {
		var t, sumAbs float64
		for j, slot := range slots {
			x := s[j] - mx
			dj := es[j] + 2*ewU*(3+2*math.Abs(x)) + shared + pRel
			vd := v[slot*dim+kvOff+d]
			t += p[j] * dj * math.Abs(vd-o[d])
			sumAbs += p[j] * math.Abs(vd)
		}
		tol[d] = 2*(t+float64(accum)*ewU*(sumAbs+math.Abs(o[d]))+4*ewU*math.Abs(o[d])) + 1e-30
	}
	return o, tol
}

type attCase struct {
	tokens, heads, kvHeads, hd, base int
	parents                          []int32 // nil: a chain
}

func (c attCase) String() string {
	kind := "chain"
	if c.parents != nil {
		kind = fmt.Sprintf("tree%v", c.parents)
	}
	return fmt.Sprintf("%s/%dtok/%d+%d/h%dx%d/hd%d", kind, c.tokens, c.base, c.tokens, c.heads, c.kvHeads, c.hd)
}

var attCases = []attCase{
	{tokens: 1, heads: 4, kvHeads: 2, hd: 64, base: 37},
	{tokens: 1, heads: 8, kvHeads: 2, hd: 128, base: 700},  // decode split over 3 workgroups
	{tokens: 70, heads: 4, kvHeads: 4, hd: 32, base: 5},    // tiles of 32 tokens, the last partial
	{tokens: 40, heads: 6, kvHeads: 2, hd: 256, base: 300}, // 3 heads x 2 tokens a tile, 2 splits
	{tokens: 3, heads: 16, kvHeads: 1, hd: 256, base: 10},  // a KV head's 16 query heads over 2 workgroups
	{tokens: 5, heads: 4, kvHeads: 2, hd: 96, base: 50},    // a head size that does not divide the workgroup
	{tokens: 9, heads: 2, kvHeads: 1, hd: 64, base: 0},
	{tokens: 7, heads: 4, kvHeads: 1, hd: 64, base: 20, parents: []int32{-1, 0, 0, 1, 2, 2, 4}},
	{tokens: 7, heads: 8, kvHeads: 2, hd: 128, base: 600, parents: []int32{-1, 0, 0, 1, 2, 2, 4}},
	{tokens: 6, heads: 2, kvHeads: 2, hd: 80, base: 0, parents: []int32{-1, -1, 1, 1, 0, 3}},
}

func TestAttnAttention(t *testing.T) {
	for _, kv := range []tensor.DType{tensor.F32, tensor.F16, tensor.E4M3} {
		for _, c := range attCases {
			t.Run(fmt.Sprintf("%s/%s", kv, c), func(t *testing.T) { attRun(t, kv, c, 1) })
		}
	}
}

// TestAttnCoopMat runs attention_cm (flash attention on cooperative
// matrices) on every case, chains and trees, F16 and E4M3 caches, with the
// driver's tiles and NVIDIA's 16×16×16 (NV2 flexible dimensions on
// lavapipe), against the exact attention within the tolerance its F16
// roundings add, and the E4M3 cases against the CPU's attendFP8 too.
func TestAttnCoopMat(t *testing.T) {
	for _, tiles := range []struct {
		name    string
		f16, i8 tile
		cases   []attCase
	}{
		// lavapipe compiles a pipeline per head dimension and cache type
		// in 10-30 s: a decode step, a chain past a workgroup's rows, a
		// split 256-dimension chain (the 27B model's heads), two trees
		{"driver's tiles", tile{}, tile{}, []attCase{attCases[0], attCases[2], attCases[3], attCases[7], attCases[9]}},
		{"16x16x16 (NV2 flexible)", tile{16, 16, 16}, tile{16, 16, 32}, []attCase{attCases[2]}},
	} {
		t.Run(tiles.name, func(t *testing.T) {
			d := coopDevice(t, tiles.f16, tiles.i8)
			d.attCoopMin = 1
			defer func() { d.attCoopMin = attCoopMinTokens }()
			for _, kv := range []tensor.DType{tensor.F16, tensor.E4M3} {
				ran := 0
				for _, c := range tiles.cases {
					if kv == tensor.E4M3 && c.hd != 64 && c.hd != 256 {
						continue // E4M3's conversion: two head dimensions are enough
					}
					if !d.attCoop(kv, AttnParams{Tokens: c.tokens, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Chain: c.parents == nil}) {
						// a head dimension the tiles do not divide, or
						// one whose blocks the shared memory cannot hold
						// (hd 256 with 16-row tiles needs 48 KiB; lavapipe has 32)
						t.Logf("%s %s: not on cooperative matrices", kv, c)
						continue
					}
					ran++
					t.Run(fmt.Sprintf("%s/%s", kv, c), func(t *testing.T) { attRun(t, kv, c, 1) })
				}
				if ran == 0 && kv == tensor.F16 {
					t.Errorf("%s: no case ran on cooperative matrices", kv)
				}
			}
		})
	}
}

// TestAttnAttentionLong is a decode step over 32k cache slots, split
// between 64 workgroups.
func TestAttnAttentionLong(t *testing.T) {
	for _, kv := range []tensor.DType{tensor.F16, tensor.E4M3} {
		t.Run(kv.String(), func(t *testing.T) {
			attRun(t, kv, attCase{tokens: 1, heads: 2, kvHeads: 1, hd: 64, base: 32767}, 2)
		})
	}
}

func attRun(t *testing.T, kv tensor.DType, c attCase, seed uint64) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(23, seed+uint64(c.tokens*1000+c.base)))
	hd, dim := c.hd, c.kvHeads*c.hd
	slots := c.base + c.tokens
	scale := 1 / float32(math.Sqrt(float64(hd)))
	kScale, vScale := float32(1), float32(1)
	if kv == tensor.E4M3 {
		kScale, vScale = 0.01, 0.008
	}
	// scores of a few units (q of 12), values off zero
	q := ewRand(rng, c.tokens*c.heads*hd, 12)
	k := ewRand(rng, slots*dim, 1)
	v := ewRand(rng, slots*dim, 1)
	for i := range v {
		v[i] += 0.3
	}
	kb, vb := attKVEncode(kv, k, dim, kScale), attKVEncode(kv, v, dim, vScale)
	// the values the cache holds
	kx, vx := make([]float64, len(k)), make([]float64, len(v))
	for i := range k {
		switch kv {
		case tensor.F32:
			kx[i], vx[i] = float64(k[i]), float64(v[i])
		case tensor.F16:
			kx[i] = float64(tensor.F16ToF32(uint16(kb[2*i]) | uint16(kb[2*i+1])<<8))
			vx[i] = float64(tensor.F16ToF32(uint16(vb[2*i]) | uint16(vb[2*i+1])<<8))
		case tensor.E4M3:
			kx[i] = float64(tensor.E4M3ToF32(kb[i])) * float64(kScale)
			vx[i] = float64(tensor.E4M3ToF32(vb[i])) * float64(vScale)
		}
	}
	var off, idx []int32
	p := AttnParams{Tokens: c.tokens, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: hd, Base: c.base, Chain: c.parents == nil,
		Scale: scale, KScale: kScale, VScale: vScale}
	if c.parents != nil {
		off, idx = attAncestry(c.parents)
		p.Anc = ewUpload(t, d, i32Bytes(append(append([]int32(nil), off...), idx...)))
	}
	pl := attPlanFor(p.Tokens, p.Heads, p.KVHeads, hd, p.Base+p.Tokens, p.Chain)
	var scratch Range
	if n := AttnScratchBytes(p); n > 0 {
		if n < pl.scratchBytes {
			t.Fatalf("AttnScratchBytes %d < the %d the call needs", n, pl.scratchBytes)
		}
		scratch = ewUpload(t, d, make([]byte, n))
	}
	t.Logf("plan: %d heads x %d tokens a workgroup, blocks of %d slots, %d splits of %d, %d workgroups", pl.G, pl.T, pl.Bk, pl.S, pl.chunk, pl.groups)
	gq := ewUploadF32(t, d, q)
	gk, gv := ewUpload(t, d, kb), ewUpload(t, d, vb)
	gout := ewUploadF32(t, d, make([]float32, len(q)))
	ewRun(t, d, func(r *Recorder) { r.Attention(gout, gq, gk, gv, kv, p, scratch) })
	got := ewDownloadF32(t, d, gout)

	group := c.heads / c.kvHeads
	// On cooperative matrices the query values and the weights go through
	// F16 tiles. Rounded to F16 once, each carries a relative error of at
	// most 2^-11, 2^-10 with whatever rounding the driver's conversion does
	// (the weights' normalization by the sum of the rounded weights doubles
	// theirs). Split (attSplit, the default), hi = f16(x) and lo =
	// f16((x-hi)·2^12) leave x - hi - lo·2^-12 of at most 2^-10 of x - hi,
	// itself at most 2^-10 of x: 2^-20 of x, the normalization now by the
	// sum of the float32 weights; the products of the low parts add one
	// rounding to each score (an extra term of the float32 sum) and one to
	// each output value a block (accum). The sums run over blocks of
	// attCoopBlock slots.
	coop := d.attCoop(kv, p)
	qRel, pRel, blk, extra := 0.0, 0.0, pl.Bk/16, 0
	if coop {
		bc, _ := d.attCoopBlock(hd)
		qRel, pRel, blk = 0x1p-10, 0x1p-9, bc
		if d.attSplit&attSplitQ != 0 {
			qRel = 0x1p-20 + ewU
		}
		if d.attSplit&attSplitP != 0 {
			pRel, extra = 0x1p-20, c.base/bc+c.tokens/bc+2
		}
		t.Logf("on cooperative matrices (tiles %s), blocks of %d slots, SPLIT %d", d.CoopMatTiles(), bc, d.attSplit)
	}
	if !coop && kv == tensor.F16 && c.tokens < attGGMLTokens && hd <= 256 && d.Info().Float64 {
		attCheckF16(t, c, q, kb, vb, got, off, idx, dim, group, scale)
		return
	}
	worst, worstCPU := 0.0, 0.0
	bad := 0
	for i := 0; i < c.tokens; i++ {
		vis := attVisible(i, c.base, off, idx)
		for h := 0; h < c.heads; h++ {
			row := (i*c.heads + h) * hd
			kvOff := (h / group) * hd
			qr := q[row : row+hd]
			accum := len(vis) + blk + 2*pl.S + 8 + extra
			o, tol := attExactRounded(qr, kx, vx, vis, dim, kvOff, scale, accum, qRel, pRel)
			var cpu, tolCPU []float64
			var cpuOut []float32
			if kv == tensor.E4M3 {
				// the CPU engine's own arithmetic: sequential, so its
				// sums round up to len(vis) times
				cpuOut = attCPUFP8(qr, kb, vb, vis, dim, kvOff, scale, kScale, vScale)
				cpu, tolCPU = make([]float64, hd), nil
				_, tolCPU = attExact(qr, kx, vx, vis, dim, kvOff, scale, len(vis)+8)
				for dd := range cpu {
					cpu[dd] = float64(cpuOut[dd])
				}
			}
			for dd := 0; dd < hd; dd++ {
				g := float64(got[row+dd])
				e := math.Abs(g - o[dd])
				worst = max(worst, e/tol[dd])
				if !(e <= tol[dd]) {
					if bad < 5 {
						t.Errorf("token %d head %d dim %d: %g, want %g (|Δ| %.3g > tolerance %.3g)", i, h, dd, g, o[dd], e, tol[dd])
					}
					bad++
				}
				if cpu != nil {
					ec := math.Abs(cpu[dd] - o[dd])
					if !(ec <= tolCPU[dd]) {
						t.Fatalf("token %d head %d dim %d: the CPU transliteration %g, want %g: the tolerance misses the CPU's own error", i, h, dd, cpu[dd], o[dd])
					}
					eg := math.Abs(g - cpu[dd])
					worstCPU = max(worstCPU, eg/(tol[dd]+tolCPU[dd]))
					if !(eg <= tol[dd]+tolCPU[dd]) {
						if bad < 5 {
							t.Errorf("token %d head %d dim %d: %g, the CPU's attendFP8 %g", i, h, dd, g, cpu[dd])
						}
						bad++
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d outputs out of tolerance", bad)
	}
	t.Logf("largest |Δ| from the exact attention: %.3f of the tolerance; from the CPU's attendFP8: %.3f (cooperative matrices: %v)", worst, worstCPU, coop)
}

func TestAttnScratchBytes(t *testing.T) {
	// a state sizes the scratch once, for its largest batch and context:
	// every smaller call must fit (engine/gpu state.go)
	const capTokens, maxTokens = 512, 4096
	for _, h := range []struct{ heads, kv, hd int }{{32, 8, 128}, {8, 2, 256}, {16, 16, 64}, {4, 1, 64}} {
		most := AttnScratchBytes(AttnParams{Tokens: capTokens, Heads: h.heads, KVHeads: h.kv, HeadDim: h.hd, Base: maxTokens})
		for _, tokens := range []int{1, 2, 3, 7, 16, 33, 100, 512} {
			for base := 0; base <= maxTokens-tokens; base += 29 {
				for _, chain := range []bool{true, false} {
					pl := attPlanFor(tokens, h.heads, h.kv, h.hd, base+tokens, chain)
					if pl.scratchBytes > most {
						t.Errorf("%+v, %d tokens after %d (chain %v): %d bytes of scratch, more than AttnScratchBytes' %d", h, tokens, base, chain, pl.scratchBytes, most)
					}
					if pl.S > attMaxSplits || pl.S < 1 || pl.chunk*pl.S < base+tokens || pl.R > attMaxRows || pl.R*h.hd > attMaxQ || pl.R*pl.Bk > attMaxScores || pl.Bk > attGroupSize {
						t.Errorf("%+v, %d tokens after %d: plan %+v breaks the shader's limits", h, tokens, base, pl)
					}
				}
			}
		}
	}
}

func TestAttnErrors(t *testing.T) {
	d := testDevice(t)
	b := ewUploadF32(t, d, make([]float32, 64))
	cache := ewUpload(t, d, make([]byte, 1001*2*8))
	p := AttnParams{Tokens: 1, Heads: 3, KVHeads: 2, HeadDim: 8, Chain: true, Scale: 1}
	for _, f := range []func(r *Recorder){
		func(r *Recorder) { r.Attention(b, b, b, b, tensor.F16, p, Range{}) }, // 3 heads over 2
		func(r *Recorder) {
			p := p
			p.Heads, p.HeadDim = 2, 6
			r.Attention(b, b, b, b, tensor.F16, p, Range{})
		},
		func(r *Recorder) {
			p := p
			p.Heads, p.Base = 2, 100 // past the cache
			r.Attention(b, b, b, b, tensor.F16, p, Range{})
		},
		func(r *Recorder) {
			p := p
			p.Heads, p.Base = 2, 1000
			r.Attention(b, b, cache, cache, tensor.E4M3, p, Range{}) // a split decode needs scratch
		},
	} {
		r := d.Begin()
		f(r)
		if _, err := r.Submit(); err == nil {
			t.Error("bad Attention: no error")
		} else {
			t.Log(err)
		}
	}
}

// attCheckF16 holds the one-row F16 path (attention_f16.comp) to the CPU
// engine's arithmetic: the same bits, but where the exponentials differ
// (the GPU computes glibc's expf exactly; the reference here rounds
// float64's exp, which differs from it in rare halfway cases) and an F16
// rounding of the running output then goes the other way, by an F16 ulp of
// the output's magnitude.
func attCheckF16(t *testing.T, c attCase, q []float32, kb, vb []byte, got []float32, off, idx []int32, dim, group int, scale float32) {
	t.Helper()
	hd := c.hd
	k16, v16 := make([]uint16, len(kb)/2), make([]uint16, len(vb)/2)
	for i := range k16 {
		k16[i] = uint16(kb[2*i]) | uint16(kb[2*i+1])<<8
		v16[i] = uint16(vb[2*i]) | uint16(vb[2*i+1])<<8
	}
	same, total := 0, 0
	for i := 0; i < c.tokens; i++ {
		vis := attVisible(i, c.base, off, idx)
		for h := 0; h < c.heads; h++ {
			row := (i*c.heads + h) * hd
			want := attCPUF16(q[row:row+hd], k16, v16, vis, dim, (h/group)*hd, scale)
			for dd, w := range want {
				g := got[row+dd]
				total++
				if g == w {
					same++
					continue
				}
				if math.Abs(float64(g-w)) > 2e-3*math.Max(math.Abs(float64(w)), 1e-2) {
					t.Errorf("token %d head %d dim %d: %g, the CPU's attendF16 %g", i, h, dd, g, w)
				}
			}
		}
	}
	if same < total*95/100 {
		t.Errorf("only %d of %d outputs have the CPU's bits", same, total)
	}
	t.Logf("one-row F16 path: %d of %d outputs bit-identical to the CPU's", same, total)
}
