package gpu

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/gpu/internal/vk"
)

// Cooperative matrices: the tensor cores as Vulkan offers them.
// VK_KHR_cooperative_matrix lists fixed M×N×K shapes per component types
// (8×8×8 on Mesa 26 lavapipe; 16×16×16 f16 and 16×8×32 or 16×16×32 int8
// on NVIDIA); VK_NV_cooperative_matrix2's flexible dimensions take any
// multiple of a granularity up to a maximum, which is how a 16×16×16 tile
// runs on lavapipe, so that the shapes a real GPU picks are exercised here.

// MatrixShape is one tile shape and type combination the device's
// cooperative matrices take: C (M×N, type C) += A (M×K) · B (K×N).
type MatrixShape struct {
	M      int    `json:"m"`
	N      int    `json:"n"`
	K      int    `json:"k"`
	A      string `json:"a"` // component types: f16, bf16, s8, u8, ...
	B      string `json:"b"`
	C      string `json:"c"` // accumulator
	Result string `json:"result"`
	Scope  string `json:"scope"` // subgroup (KHR), workgroup (NV2's workgroup scope)
	// Flexible: an NV2 flexible-dimension entry, whose M, N, K are the
	// granularities; any multiples up to MaxDim are allowed.
	Flexible bool `json:"flexible,omitempty"`
	MaxDim   int  `json:"max_dim,omitempty"`
	Saturate bool `json:"saturating,omitempty"` // saturating accumulation
}

func (s MatrixShape) String() string {
	f := ""
	if s.Flexible {
		f = fmt.Sprintf(" (NV2 flexible, multiples up to %d)", s.MaxDim)
	}
	return fmt.Sprintf("%dx%dx%d %s·%s→%s %s%s", s.M, s.N, s.K, s.A, s.B, s.Result, s.Scope, f)
}

// matrixShapes reads the KHR and NV2 lists of an opened device.
func matrixShapes(d *vk.Device) []MatrixShape {
	var out []MatrixShape
	for _, p := range d.CooperativeMatrices() {
		out = append(out, MatrixShape{M: int(p.MSize), N: int(p.NSize), K: int(p.KSize),
			A: vk.ComponentTypeName(p.AType), B: vk.ComponentTypeName(p.BType), C: vk.ComponentTypeName(p.CType),
			Result: vk.ComponentTypeName(p.ResultType), Scope: vk.ScopeName(p.Scope), Saturate: p.SaturatingAccumulation != 0})
	}
	if d.CoopMat.NV2 && d.CoopMat.NV2Features[1] != 0 { // flexibleDimensions
		maxDim := int(d.CoopMat2Properties().CooperativeMatrixFlexibleDimensionsMaxDimension)
		for _, p := range d.FlexibleDimensions() {
			out = append(out, MatrixShape{M: int(p.MGranularity), N: int(p.NGranularity), K: int(p.KGranularity),
				A: vk.ComponentTypeName(p.AType), B: vk.ComponentTypeName(p.BType), C: vk.ComponentTypeName(p.CType),
				Result: vk.ComponentTypeName(p.ResultType), Scope: vk.ScopeName(p.Scope), Saturate: p.SaturatingAccumulation != 0,
				Flexible: true, MaxDim: maxDim})
		}
	}
	return out
}

// tile is a cooperative-matrix tile shape a shader is specialized for.
type tile struct{ M, N, K int }

// pickTile returns the subgroup-scope tile for a·b→c the device lists,
// preferring size (the larger tile does more per load) and, with flex, an
// NV2 flexible-dimension entry giving want when it is a multiple of the
// granularities. ok is false when the device offers none.
func pickTile(shapes []MatrixShape, a, c string, want tile, flex bool) (tile, bool) {
	best, ok := tile{}, false
	for _, s := range shapes {
		if s.A != a || s.B != a || s.C != c || s.Result != c || s.Scope != "subgroup" || s.Saturate {
			continue
		}
		t := tile{s.M, s.N, s.K}
		if s.Flexible {
			if !flex || want.M%s.M != 0 || want.N%s.N != 0 || want.K%s.K != 0 || max(want.M, want.N, want.K) > s.MaxDim {
				continue
			}
			t = want
		} else if flex {
			continue
		}
		if !ok || t.M*t.N*t.K > best.M*best.N*best.K {
			best, ok = t, true
		}
	}
	return best, ok
}

// Matrix paths: how MatMul multiplies a pass of several vectors.
const (
	MatMulAuto    = "auto"    // coopmat where the device has cooperative matrices, scalar elsewhere
	MatMulScalar  = "scalar"  // the scalar shaders (matmul_*.comp) for every product
	MatMulCoopMat = "coopmat" // cooperative-matrix shaders (matmul_cm_*.comp) for passes of several vectors
)

// ParseMatMul checks a model.gpu_matmul value.
func ParseMatMul(s string) error {
	switch s {
	case MatMulAuto, MatMulScalar, MatMulCoopMat:
		return nil
	}
	return fmt.Errorf("gpu_matmul %q: want auto, scalar or coopmat", s)
}

// mmCoopMinVectors is the fewest vectors a product runs on cooperative
// matrices with (Device.coopMin; tests lower it). Below it the scalar
// shaders are faster: they read each weight block once for up to 8
// vectors from many more workgroups, while a cooperative-matrix workgroup
// covers 64 rows × 64 vectors of NVIDIA's 16×16 tiles, mostly empty for a
// decode step or a 16-node verify. On an H200 (BenchmarkMatMulPaths, the
// 27B model's FFN shapes) the two cross between 32 and 64 vectors: Q8_0
// at 64 vectors 977 against 1346 µs (up) and 1474 against 1373 (down), at
// 128 1465 against 2645 and 1563 against 2654; at 16 the scalar shaders
// take 366 µs where the tiles take 933.
const mmCoopMinVectors = 64

// coopTiles are the tiles a device's cooperative-matrix shaders use: none
// (zero) on the scalar path.
type coopTiles struct {
	f16, i8 tile
}

// SetMatMul chooses the matrix path (MatMulAuto, MatMulScalar or
// MatMulCoopMat) for what is recorded next. coopmat on a device without
// cooperative matrices is an error naming what is missing. The tiles are
// the largest subgroup-scope shapes the driver lists for f16·f16→f32 and
// s8·s8→s32.
func (d *Device) SetMatMul(path string) error {
	if err := ParseMatMul(path); err != nil {
		return err
	}
	d.tiles = coopTiles{}
	d.matmul = MatMulScalar
	if path == MatMulScalar {
		return nil
	}
	f16, okF := pickTile(d.info.MatrixShapes, "f16", "f32", tile{}, false)
	i8, okI := pickTile(d.info.MatrixShapes, "s8", "s32", tile{}, false)
	if !d.info.CoopMat || !okF || !okI || !d.coopTilesFit(f16) || !d.coopTilesFit(i8) {
		if path == MatMulAuto {
			return nil
		}
		why := "no VK_KHR_cooperative_matrix"
		switch {
		case d.info.CoopMat && (!okF || !okI):
			why = "no subgroup-scope f16·f16→f32 and s8·s8→s32 tiles among " + fmt.Sprint(d.info.MatrixShapes)
		case d.info.CoopMat:
			why = "its tiles need more shared memory or invocations than it allows"
		case len(d.info.MatrixShapes) > 0:
			why = "VK_KHR_cooperative_matrix without vulkanMemoryModel"
		}
		return fmt.Errorf("gpu_matmul coopmat: GPU %s (%s) cannot run the tensor-core shaders: %s; use gpu_matmul auto or scalar",
			d.info.Name, d.info.Driver, why)
	}
	d.tiles = coopTiles{f16: f16, i8: i8}
	d.matmul = MatMulCoopMat
	return nil
}

// setTiles forces the cooperative-matrix tiles (tests: the 16×16×16 tiles
// a real GPU picks, run on lavapipe through NV2's flexible dimensions).
func (d *Device) setTiles(f16, i8 tile) error {
	for _, t := range []struct {
		t    tile
		a, c string
	}{{f16, "f16", "f32"}, {i8, "s8", "s32"}} {
		fixed, ok := pickTile(d.info.MatrixShapes, t.a, t.c, tile{}, false)
		if ok && fixed == t.t {
			continue
		}
		if _, ok := pickTile(d.info.MatrixShapes, t.a, t.c, t.t, true); !ok {
			return fmt.Errorf("GPU %s lists no %s·%s→%s tile %v, fixed or flexible", d.info.Name, t.a, t.a, t.c, t.t)
		}
	}
	if !d.coopTilesFit(f16) || !d.coopTilesFit(i8) {
		return fmt.Errorf("GPU %s: tiles %v, %v need more shared memory or invocations than it has", d.info.Name, f16, i8)
	}
	d.tiles = coopTiles{f16: f16, i8: i8}
	d.matmul = MatMulCoopMat
	return nil
}

// coopTilesFit reports whether the shaders for tile t fit the device: the
// block is 2·2·t.M rows by 2·2·t.N vectors, 32 deep, its shared arrays the
// int32 (or float) sums and two int8 or f16 arrays plus the scales, within
// maxComputeSharedMemorySize (lavapipe 64 KiB, NVIDIA 48 KiB); four
// subgroups within maxComputeWorkGroupInvocations.
func (d *Device) coopTilesFit(t tile) bool {
	bm, bn := 4*t.M, 4*t.N
	bytes := 4*bm*bn + 2*32*(bm+bn) + 4*(bm+bn)
	lim := d.d.Props.Limits
	return t.M > 0 && t.N > 0 && t.K > 0 && 32%t.K == 0 && uint32(bytes) <= lim.MaxComputeSharedMemorySize &&
		d.info.SubgroupSize > 0 && uint32(4*d.info.SubgroupSize) <= lim.MaxComputeWorkGroupInvocations &&
		(bm*bn)%(4*d.info.SubgroupSize) == 0
}

// MatMulPath is the matrix path in use: MatMulScalar or MatMulCoopMat.
func (d *Device) MatMulPath() string { return d.matmul }

// CoopMatTiles describes the tiles of the cooperative-matrix path ("" on
// the scalar path), e.g. "f16 16x16x16, int8 16x16x32".
func (d *Device) CoopMatTiles() string {
	if d.matmul != MatMulCoopMat {
		return ""
	}
	return fmt.Sprintf("f16 %dx%dx%d, int8 %dx%dx%d", d.tiles.f16.M, d.tiles.f16.N, d.tiles.f16.K, d.tiles.i8.M, d.tiles.i8.N, d.tiles.i8.K)
}

// MACs counts the multiply-adds of the matrix products recorded on a
// device, by path: what the tensor cores did (CoopMat) and what the
// scalar shaders did (Scalar).
type MACs struct{ CoopMat, Scalar int64 }

// MatMulMACs is the count since the device was opened (or ResetMACs).
func (d *Device) MatMulMACs() MACs {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.macs
}

// ResetMACs zeroes the multiply-add counters.
func (d *Device) ResetMACs() {
	d.mu.Lock()
	d.macs = MACs{}
	d.mu.Unlock()
}

func (d *Device) countMACs(n int64, coop bool) {
	d.mu.Lock()
	if coop {
		d.macs.CoopMat += n
	} else {
		d.macs.Scalar += n
	}
	d.mu.Unlock()
}
