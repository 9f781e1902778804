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
	M, N, K int
	A, B    string // component types: f16, bf16, s8, u8, ...
	C       string // accumulator
	Result  string
	Scope   string // subgroup (KHR), workgroup (NV2's workgroup scope)
	// Flexible: an NV2 flexible-dimension entry, whose M, N, K are the
	// granularities; any multiples up to MaxDim are allowed.
	Flexible bool
	MaxDim   int  `json:",omitempty"`
	Saturate bool `json:",omitempty"` // saturating accumulation
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
