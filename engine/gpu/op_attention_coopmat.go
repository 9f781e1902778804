package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Flash attention on cooperative matrices (shaders/attention_cm.comp): on
// the cooperative-matrix path, every Attention call of Device.attCoopMin
// tokens or more (attCoopMinTokens: prefill chunks) over an F16 or E4M3
// cache whose head dimension the f16 tiles divide (at most 256), trees of
// at most attCoopMaxTree nodes, runs Q·Kᵀ and P·V as f16 tile products
// with F32 accumulators, the query rows and the weights rounded to F16.
// Decode steps too, so that a token's attention is the same arithmetic
// in a decode step, a verify tree and a prefill chunk. F32 caches keep
// attention.comp (F32 arithmetic, which f16 tiles would round).

const (
	// attCoopMinTokens is Device.attCoopMin: the CPU engine's attention
	// over an F16 cache is ggml's one-row flash attention below it and its
	// tiled F32 path from it (attGGMLTokens).
	attCoopMinTokens = attGGMLTokens
	attCoopMaxHD     = 256
	attCoopMaxTree   = 256 // tree nodes: the shader's visibility masks (MAXTW words)
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
		if uint32(attCoopShared(t, hd, bc)) <= d.d.Props.Limits.MaxComputeSharedMemorySize {
			return bc, true
		}
	}
	return 0, false
}

// attCoopShared is attention_cm's shared memory for tile t, head
// dimension hd and blocks of bc slots, as the shader declares it.
func attCoopShared(t tile, hd, bc int) int {
	r := 4 * t.M
	return 2*2*bc*hd + 4*4*t.M*bc + 2*4*t.M*bc + 3*4*r + 4*r*8
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
	j.name, j.nspec, j.grid = "attention_cm", 7, Groups(groups)
	j.spec = [7]uint32{uint32(4 * r.dev.info.SubgroupSize), uint32(t.M), uint32(t.N), uint32(t.K), uint32(hd), code, uint32(bc)}
	return r.setSplitArgs(j, p, pl, chain, [4]int{G, T, nTiles, headTiles}, 0, kvType, out, q, k, v, anc, scratch)
}
