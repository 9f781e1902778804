package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Skinny passes on cooperative matrices (shaders/matmul_cms_*.comp): a
// decode step, a 16-node verify tree, several sequences' decode steps.
// Such a product is bound by reading the weights, so a workgroup takes a
// thin slab of weight rows (mmSkinnyRows) for a whole verify tree of
// vectors (mmSkinnyVectors) over the whole depth, its four subgroups
// splitting the depth and each staging its own blocks: every weight block
// is read once for up to mmSkinnyVectors vectors (the scalar shaders read
// it once per 8), and the tensor cores do the multiply-adds. The 64×64
// tiles of matmul_cm_* stay for passes of mmCoopMinVectors or more.

const (
	// mmSkinnyRows is the weight rows a skinny workgroup covers (BM, at
	// least one tile): 32 rows of NVIDIA's 16-row tiles, 5120 rows in 160
	// workgroups of four subgroups.
	mmSkinnyRows = 32
	// mmSkinnyVectors is the vectors a skinny workgroup covers (BN, at
	// least one tile): a 16-node verify tree in one.
	mmSkinnyVectors = 16
	// mmSkinnyMinGroups is the workgroups below which a skinny product
	// takes one row tile a workgroup rather than mmSkinnyRows.
	mmSkinnyMinGroups = 512
	// mmSkinnyMinVectors is the fewest vectors a product takes the skinny
	// shaders with on the cooperative-matrix path (Device.skinnyMin). It
	// is mmCoopMinVectors, so the skinny shaders are off by default and
	// passes below 64 vectors (decode steps, verify trees) stay on the
	// scalar shaders, whose speed an H200 measured: a one-vector Q8_0
	// product on the skinny shader took 1.8-2.5 ms there (17408x5120;
	// BenchmarkMatMulKQuant on the coopmat path, 2026-12-04), about 20x
	// the ~0.1 ms its 94.7 MB take at the scalar shaders' rate, and
	// lavapipe shows the same (3-13x slower at one vector). Turning them on must keep
	// decode and verify on the same shaders (1 here, not 2), so that a
	// vector's bits do not depend on the pass and speculative decoding
	// gives plain greedy decoding's tokens; BenchmarkModel27B's
	// coopmat_skinny and BenchmarkMatMulPaths measure that on a GPU.
	mmSkinnyMinVectors = mmCoopMinVectors
)

// skinny is a skinny shader's specialization: CM×CN tiles per subgroup
// (BM = CM·TM rows, BN = CN·TN vectors per workgroup) and KB blocks of the
// weight type per stage.
type skinny struct{ CM, CN, KB int }

// skinnyShape is the skinny specialization for tile t and activations
// kind on this device, if its shared memory and invocations take one.
func (d *Device) skinnyShape(t tile, kind mmKind) (skinny, bool) {
	sgs := d.info.SubgroupSize
	if t.M <= 0 || t.N <= 0 || t.K <= 0 || 32%t.K != 0 || sgs <= 0 {
		return skinny{}, false
	}
	lim := d.d.Props.Limits
	if uint32(4*sgs) > lim.MaxComputeWorkGroupInvocations {
		return skinny{}, false
	}
	// The most rows, then the deepest stage, that the shared memory takes.
	for cm := max(1, mmSkinnyRows/t.M); cm >= 1; cm /= 2 {
		sk := skinny{CM: cm, CN: max(1, (mmSkinnyVectors+t.N-1)/t.N)}
		if (sk.CM*t.M*sk.CN*t.N)%sgs != 0 {
			continue
		}
		for _, kb := range []int{4, 2, 1} {
			sk.KB = kb
			if uint32(skinnyShared(kind, t, sk)) <= lim.MaxComputeSharedMemorySize {
				return sk, true
			}
		}
	}
	return skinny{}, false
}

// skinnyShared is the shared memory of a skinny workgroup (four
// subgroups, each with its own arrays), as the shaders declare it.
func skinnyShared(kind mmKind, t tile, sk skinny) int {
	bm, bn := sk.CM*t.M, sk.CN*t.N
	switch kind {
	case mmHalf: // f16 rows and vectors KB·32 deep, float partial results
		d := sk.KB * 32
		return 4 * (2*bm*d + 2*bn*d + 4*bm*bn)
	case mmFP4: // NVFP4: KB 64-value blocks, each 16-value sub-block staged max(TK, 16) deep
		u, kt := 4*sk.KB, max(t.K, 16)
		return 4 * (bm*u*kt + bn*u*kt + 4*bm*u + 4*bn*u + 4*bm*bn)
	}
	// Q8_0: int8 rows and vectors KB·32 deep, their block scales, int sums
	return 4 * (bm*sk.KB*32 + bn*sk.KB*32 + 4*bm*sk.KB + 4*bn*sk.KB + 4*bm*bn)
}

// coopSkinny is the tile and skinny specialization for w's product of n
// vectors converted as kind, if it runs on the skinny shaders: on the
// cooperative-matrix path, n from Device.skinnyMin to below
// Device.coopMin, and a product with a tile shader (Q8_0, NVFP4 W4A8 and
// W4A4, F16: coopTile's).
func (r *Recorder) coopSkinny(w *Matrix, kind mmKind, n int) (tile, skinny, bool) {
	d := r.dev
	if d.matmul != MatMulCoopMat || n < d.skinnyMin || n >= d.coopMin {
		return tile{}, skinny{}, false
	}
	var t tile
	size := kind // the shared memory's layout
	switch {
	case w.Type == tensor.Q8_0 && kind == mmQ8:
		t = d.tiles.i8
	case w.Type == tensor.NVFP4 && (kind == mmQ8 || kind == mmFP4):
		t, size = d.tiles.i8, mmFP4
	case w.Type == tensor.F16 && kind == mmHalf:
		t = d.tiles.f16
	default:
		return tile{}, skinny{}, false
	}
	sk, ok := d.skinnyShape(t, size)
	// Fewer vectors take fewer vector tiles (a decode step one): the
	// stage, which orders the sums, stays the full shape's, so that a
	// vector's bits do not depend on n.
	if cn := (n + t.N - 1) / t.N; ok && cn < sk.CN && (sk.CM*t.M*cn*t.N)%d.info.SubgroupSize == 0 {
		sk.CN = cn
	}
	// A matrix of few rows (5120: the 27B model's FFN down and attention
	// output) takes one row tile a workgroup, for twice the workgroups
	// reading it at once; the stage, and so the bits, stay the same.
	if ok && sk.CM > 1 && (w.Rows+sk.CM*t.M-1)/(sk.CM*t.M) < d.skinnyGroups && (t.M*sk.CN*t.N)%d.info.SubgroupSize == 0 {
		sk.CM = 1
	}
	return t, sk, ok
}

// matMulSkinny records the skinny product (the checks and the activation
// conversion done by matMul).
func (r *Recorder) matMulSkinny(w *Matrix, kind mmKind, n int, t tile, sk skinny, wb, in, db Range, inOff, scaleOff, ioff, doff uint32) {
	bm, bn := sk.CM*t.M, sk.CN*t.N
	vgroups := (n + bn - 1) / bn
	groups := (w.Rows + bm - 1) / bm * vgroups
	spec := []uint32{uint32(4 * r.dev.info.SubgroupSize), uint32(t.M), uint32(t.N), uint32(t.K), uint32(sk.CM), uint32(sk.CN), uint32(sk.KB)}
	push := []uint32{uint32(w.Rows), uint32(w.Cols), uint32(n), uint32(vgroups), uint32(groups), inOff, scaleOff, doff}
	switch w.Type {
	case tensor.NVFP4:
		mode := uint32(0) // W4A8
		if kind == mmFP4 {
			mode = 1
		}
		push = []uint32{uint32(w.Rows), uint32(w.Cols), uint32(n), uint32(vgroups), uint32(groups), inOff, scaleOff, ioff, doff}
		r.Dispatch("matmul_cms_nvfp4", append(spec, mode), Groups(groups), push, wb, in, db)
	case tensor.Q8_0:
		r.Dispatch("matmul_cms_q8_0", spec, Groups(groups), push, wb, in, db)
	default:
		r.Dispatch("matmul_cms_half", spec, Groups(groups), push, wb, in, db)
	}
}
