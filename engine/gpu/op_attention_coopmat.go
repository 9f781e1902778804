package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Flash attention on cooperative matrices (shaders/attention_cm.comp): on
// the cooperative-matrix path, every Attention call of Device.attCoopMin
// tokens or more (attCoopMinTokens: prefill chunks) over an F16 or E4M3
// cache whose head dimension the f16 tiles divide (at most 256), trees of
// at most attCoopMaxTree nodes, runs Q·Kᵀ and P·V as f16 tile products
// with F32 accumulators, the query rows and the weights each split into a
// high and a low F16 part (attSplitAll) so that the tiles lose ~2^-24 of
// them, not F16's 2^-12: the CPU engine's attention at these batch sizes
// is F32 throughout (ggml's tiled path for an F16 cache, attendFP8 for
// E4M3), and FP4 activations (NVFP4 W4A4) turn F16's roundings into
// flipped quants (TestModelAgreement, Mesa 26: W4A4 72% of greedy tokens
// the CPU's with the roundings, 92% split, 95% on attention.comp). The
// split doubles the tile products (docs/performance/gpu.md). F32 caches
// keep attention.comp (F32 arithmetic).

const (
	// attCoopMinTokens is Device.attCoopMin: the CPU engine's attention
	// over an F16 cache is ggml's one-row flash attention below it and its
	// tiled F32 path from it (attGGMLTokens).
	attCoopMinTokens = attGGMLTokens
	attCoopMaxHD     = 256
	attCoopMaxTree   = 256 // tree nodes: the shader's visibility masks (MAXTW words)
)

// attention_cm's SPLIT bits: the query rows (attSplitQ) and the softmax
// weights (attSplitP) go through the f16 tiles as a high F16 part and a
// low one (hi = f16(x), lo = f16((x-hi)·2^12)), their products added in
// F32, instead of rounded to F16 once.
const (
	attSplitQ   = 1
	attSplitP   = 2
	attSplitAll = attSplitQ | attSplitP
)

// attCoop reports whether an Attention call of p over a kvType cache runs
// on cooperative matrices on this device.
func (d *Device) attCoop(kvType tensor.DType, p AttnParams) bool {
	if d.matmul != MatMulCoopMat || d.attCoopMin <= 0 || p.Tokens < d.attCoopMin || (kvType != tensor.F16 && kvType != tensor.E4M3) {
		return false
	}
	if !p.Chain && p.Tokens > attCoopMaxTree {
		return false
	}
	_, ok := d.attCoopBlock(p.HeadDim)
	return ok
}

// attCoopBlock is the slots of attention_cm's blocks (BC) for head
// dimension hd: the most that the shared memory takes, a multiple of the
// f16 tile's N and K, at least 2·N (the shader's factor tiles) and half
// the workgroup's rows (it stages the query rows where the keys and
// values go).
func (d *Device) attCoopBlock(hd int) (int, bool) {
	t := d.tiles.f16
	if t.M <= 0 || t.N <= 0 || t.K <= 0 || hd <= 0 || hd > attCoopMaxHD || hd%t.N != 0 || hd%t.K != 0 {
		return 0, false
	}
	for _, bc := range []int{64, 32, 16} {
		if bc%t.N != 0 || bc%t.K != 0 || bc < 2*t.N || 2*bc < 4*t.M {
			continue
		}
		if uint32(attCoopShared(t, hd, bc, d.attSplit)) <= d.d.Props.Limits.MaxComputeSharedMemorySize {
			return bc, true
		}
	}
	return 0, false
}

// attCoopShared is attention_cm's shared memory for tile t, head
// dimension hd, blocks of bc slots and SPLIT split, as the shader declares
// it.
func attCoopShared(t tile, hd, bc int, split uint32) int {
	r := 4 * t.M
	pl := 1 // plsh: the weights' low parts
	if split&attSplitP != 0 {
		pl = 4 * t.M * bc
	}
	return 2*2*bc*hd + 4*4*t.M*bc + 2*4*t.M*bc + 2*pl + 3*4*r + 4*r*8
}

// attMACs is the multiply-adds of an Attention call's two products (q·k
// and p·v over the visible slots; a tree counted as a chain of as many
// tokens, an upper bound).
func attMACs(p AttnParams) int64 {
	t, b := int64(p.Tokens), int64(p.Base)
	return 2 * int64(p.Heads) * int64(p.HeadDim) * (t*b + t*(t+1)/2)
}

// planAttentionCoop plans a checked Attention call on attention_cm: the
// rows of a workgroup are 4·TM (G query heads of one KV head for T
// tokens), the splits of the slots attention.comp's for the same call, so
// that the scratch AttnScratchBytes sized holds their partial results.
func (r *Recorder) planAttentionCoop(j *attnJob, out, q, k, v, anc Range, chain uint32, kvType tensor.DType, p AttnParams, scratch Range) bool {
	t := r.dev.tiles.f16
	hd := p.HeadDim
	bc, _ := r.dev.attCoopBlock(hd)
	rows := 4 * t.M
	group := p.Heads / p.KVHeads
	G := 1
	for g := min(group, rows); g >= 1; g-- {
		if group%g == 0 {
			G = g
			break
		}
	}
	T := max(1, rows/G)
	nTiles := (p.Tokens + T - 1) / T
	headTiles := group / G
	pl := attPlanFor(p.Tokens, p.Heads, p.KVHeads, hd, p.Base+p.Tokens, p.Chain)
	code := uint32(1)
	if kvType == tensor.E4M3 {
		code = 2
	}
	groups := nTiles * p.KVHeads * headTiles * pl.S
	j.name, j.nspec, j.grid = "attention_cm", 8, Groups(groups)
	j.spec = [8]uint32{uint32(4 * r.dev.info.SubgroupSize), uint32(t.M), uint32(t.N), uint32(t.K), uint32(hd), code, uint32(bc), r.dev.attSplit}
	return r.setSplitArgs(j, p, pl, chain, [4]int{G, T, nTiles, headTiles}, 0, kvType, out, q, k, v, anc, scratch)
}
