package gpu

import (
	"fmt"
	"runtime"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// Matrix products: the GPU twin of tensor.Pool.MatMul. The activations are
// first converted to what the weight type's kernel consumes, as the CPU
// does (F16 or BF16 values, Q8_0 blocks, NVFP4 codes; shaders/quant_*.comp),
// into the caller's scratch; then each workgroup computes mmWG/mmTPR rows
// for up to mmMaxVectors vectors, reading each weight block once for all of
// them (shaders/matmul_*.comp). Larger n is cut into groups of vectors,
// whose workgroups for the same rows run one after the other, so that the
// weights come from the cache after the first group.

const (
	// mmTPR is the invocations that share a row: each sums the units
	// t, t+mmTPR, ... of the row, so the order of every sum, and the bits
	// of every result, depend on it (and on the columns) alone.
	mmTPR = 32
	// mmWG is the matrix-product workgroup: mmWG/mmTPR rows.
	mmWG = 128
	// mmMaxVectors is the most vectors one workgroup multiplies at once.
	mmMaxVectors = 8
	// mmConvWG is the workgroup of the activation converters.
	mmConvWG = 64
)

// mmKind is how a product's activations are converted.
type mmKind int

const (
	mmF32  mmKind = iota // as they are
	mmHalf               // rounded to F16 or BF16 values, stored as F32
	mmQ8                 // Q8_0 blocks: int8 quants, then the block scales as F32
	mmFP4                // NVFP4 codes (doubled E2M1 int8), SF/4 per 16 values, 1/G per vector
)

// mmActivations is the conversion a product with w needs under act.
func mmActivations(w *Matrix, act tensor.NVFP4Activations) (mmKind, error) {
	switch w.Type {
	case tensor.F32:
		return mmF32, nil
	case tensor.F16, tensor.BF16:
		return mmHalf, nil
	case tensor.Q8_0:
		return mmQ8, nil
	case tensor.NVFP4:
		switch act {
		case tensor.NVFP4ActQ8:
			return mmQ8, nil
		case tensor.NVFP4ActF32:
			return mmF32, nil
		case tensor.NVFP4ActFP4:
			return mmFP4, nil
		}
		return 0, fmt.Errorf("NVFP4 activations %d: want NVFP4ActQ8, NVFP4ActF32 or NVFP4ActFP4", act)
	}
	if k, ok := kqActivations(w.Type); ok {
		return k, nil
	}
	return 0, fmt.Errorf("weight type %s is not supported (want %s)", w.Type, WeightTypes())
}

// mmScratch is the scratch a conversion of n vectors of cols values takes.
func mmScratch(k mmKind, cols, n int) int64 {
	v := int64(n) * int64(cols)
	switch k {
	case mmHalf:
		return 4 * v
	case mmQ8:
		return v + v/32*4
	case mmFP4:
		return v + v/16*4 + 4*int64(n)
	case mmQ8K, mmQ8_1:
		return kqScratch(k, v)
	}
	return 0
}

// MatMulScratchBytes is the scratch MatMul needs for n vectors times w
// with NVFP4 activations act: 0 where the activations are used as they are
// (F32 weights, NVFP4 with NVFP4ActF32), or for a type MatMul refuses.
func MatMulScratchBytes(w *Matrix, n int, act tensor.NVFP4Activations) int64 {
	if w == nil || n <= 0 {
		return 0
	}
	k, err := mmActivations(w, act)
	if err != nil {
		return 0
	}
	return mmScratch(k, w.Cols, n)
}

// mmQ8Flavor is the Q8_0 activation quantizer the CPU engine uses on this
// architecture (engine/tensor/q8flavor_*.go): 0 ggml's reference, 1 its x86
// path, 2 its NEON path. quant_q8_0 reproduces each.
func mmQ8Flavor() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return 1
	case "arm64":
		return 2
	}
	return 0
}

// mmCheckRange checks that r holds bytes bytes from its offset, at a
// 4-byte boundary, and returns the offset in 4-byte words.
func mmCheckRange(what string, r Range, bytes int64) (uint32, error) {
	switch {
	case r.Buf == nil || r.Buf.b == nil:
		return 0, fmt.Errorf("%s has no buffer", what)
	case r.Off < 0 || r.Off%4 != 0:
		return 0, fmt.Errorf("%s offset %d is not a multiple of 4", what, r.Off)
	case r.Off+bytes > r.Buf.size || (r.Size != 0 && r.Size < bytes):
		return 0, fmt.Errorf("%s needs %d bytes from offset %d: the range has %d of a buffer of %d", what, bytes, r.Off, r.Size, r.Buf.size)
	case r.Off/4 > 1<<32-1:
		return 0, fmt.Errorf("%s offset %d is beyond what a shader addresses", what, r.Off)
	}
	return uint32(r.Off / 4), nil
}

// mmOverlap reports whether byte ranges [a, a+an) and [b, b+bn) of the
// same buffer overlap.
func mmOverlap(a, b Range, an, bn int64) bool {
	return a.Buf == b.Buf && an > 0 && bn > 0 && a.Off < b.Off+bn && b.Off < a.Off+an
}

// MatMul records dst[v*w.Rows+r] = sum_c W[r,c]*x[v*w.Cols+c] for n vectors
// (x: n*Cols F32, dst: n*Rows F32) with the CPU engine's arithmetic for
// w.Type (tensor.Pool.MatMul): F32 as they are; F16 and BF16 with the
// activations first rounded to F16 or BF16; Q8_0 with the activations
// quantized to Q8_0 blocks as engine/tensor does and exact int32 block
// sums; NVFP4 as act says (W4A8, W4A16 or W4A4). The integer parts are the
// CPU's bits; the float sums are made in another order, so results agree
// with the CPU's to rounding, and for one vector they are the same bits
// whatever n is. scratch holds the converted activations
// (MatMulScratchBytes); the op records its own barrier between converting
// and multiplying and none after: the caller adds one before reading dst.
// Errors stick in the recorder.
func (r *Recorder) MatMul(dst Range, w *Matrix, x Range, n int, act tensor.NVFP4Activations, scratch Range) {
	if r.err != nil {
		return
	}
	if err := r.matMul(dst, w, x, n, act, scratch); err != nil {
		r.err = fmt.Errorf("GPU: MatMul: %w", err)
	}
}

func (r *Recorder) matMul(dst Range, w *Matrix, x Range, n int, act tensor.NVFP4Activations, scratch Range) error {
	if w == nil || w.Buf == nil || w.Buf.b == nil {
		return fmt.Errorf("no weight matrix")
	}
	kind, err := mmActivations(w, act)
	if err != nil {
		return err
	}
	bad := func(format string, a ...any) error { // names the product; made on errors only
		return fmt.Errorf("%s matrix %dx%d times %d vectors: %s", w.Type, w.Rows, w.Cols, n, fmt.Sprintf(format, a...))
	}
	if rb, err := w.Type.RowBytes(int64(w.Cols)); err != nil || w.Rows < 0 || int64(w.RowBytes) != rb {
		return bad("bad shape (columns a multiple of %d, rows of %d bytes)", w.Type.BlockElems(), rb)
	}
	if w.Off+int64(w.Rows)*int64(w.RowBytes) > w.Buf.size {
		return bad("%d bytes of weights, the buffer has %d", int64(w.Rows)*int64(w.RowBytes), w.Buf.size)
	}
	if n < 0 || int64(n)*int64(max(w.Rows, w.Cols)) > 1<<32-1 {
		return bad("bad vector count")
	}
	if n == 0 || w.Rows == 0 {
		return nil
	}
	xBytes, dBytes, sBytes := 4*int64(n)*int64(w.Cols), 4*int64(n)*int64(w.Rows), mmScratch(kind, w.Cols, n)
	xoff, err := mmCheckRange("x", x, xBytes)
	if err != nil {
		return bad("%v", err)
	}
	doff, err := mmCheckRange("dst", dst, dBytes)
	if err != nil {
		return bad("%v", err)
	}
	var soff uint32
	if sBytes > 0 {
		if soff, err = mmCheckRange("scratch", scratch, sBytes); err != nil {
			return bad("%v", err)
		}
	}
	if mmOverlap(dst, x, dBytes, xBytes) || mmOverlap(dst, scratch, dBytes, sBytes) || mmOverlap(x, scratch, xBytes, sBytes) {
		return bad("dst, x and scratch overlap")
	}
	if w.Cols == 0 { // empty sums
		r.Fill(Range{Buf: dst.Buf, Off: dst.Off, Size: dBytes}, 0)
		return nil
	}

	xb, sb, wb, db := Range{Buf: x.Buf}, Range{Buf: scratch.Buf}, w.binding(), Range{Buf: dst.Buf}
	cols, vals := uint32(w.Cols), uint32(n*w.Cols)
	in, inOff := xb, xoff     // what the product reads
	var scaleOff, ioff uint32 // the scales and 1/G in the scratch, in words
	switch kind {
	case mmHalf:
		mode := uint32(0)
		if w.Type == tensor.BF16 {
			mode = 1
		}
		r.Dispatch("quant_half", []uint32{mmConvWG, mode}, Groups(int((vals+mmConvWG-1)/mmConvWG)),
			[]uint32{vals, xoff, soff}, xb, sb)
		in, inOff = sb, soff
	case mmQ8:
		blocks := vals / 32
		scaleOff = soff + vals/4
		r.Dispatch("quant_q8_0", []uint32{mmConvWG, mmQ8Flavor()}, Groups(int((blocks+mmConvWG-1)/mmConvWG)),
			[]uint32{blocks, xoff, soff, scaleOff}, xb, sb, sb)
		in, inOff = sb, soff
	case mmFP4:
		scaleOff = soff + vals/4
		ioff = scaleOff + vals/16
		r.Dispatch("quant_nvfp4", []uint32{mmConvWG}, Groups(n),
			[]uint32{uint32(n), cols, xoff, soff, scaleOff, ioff, F32(w.InputScale)}, xb, sb, sb)
		in, inOff = sb, soff
	case mmQ8K, mmQ8_1:
		scaleOff, ioff = r.kqQuantize(kind, xb, sb, xoff, soff, vals)
		in, inOff = sb, soff
	}
	if kind != mmF32 {
		r.Barrier()
	}
	macs := int64(n) * int64(w.Rows) * int64(w.Cols)
	if t, sk, ok := r.coopSkinny(w, kind, n); ok {
		r.matMulSkinny(w, kind, n, t, sk, wb, in, db, inOff, scaleOff, ioff, doff)
		r.dev.countMACs(macs, true)
		return nil
	}
	if t, ok := r.coopTile(w, kind, n); ok {
		bm, bn := 4*t.M, 4*t.N
		rgroups := (w.Rows + bm - 1) / bm
		groups := rgroups * ((n + bn - 1) / bn)
		spec := []uint32{uint32(4 * r.dev.info.SubgroupSize), uint32(t.M), uint32(t.N), uint32(t.K)}
		switch {
		case w.Type == tensor.NVFP4:
			mode := uint32(0) // W4A8
			if kind == mmFP4 {
				mode = 1
			}
			r.Dispatch("matmul_cm_nvfp4", append(spec, mode), Groups(groups),
				[]uint32{uint32(w.Rows), cols, uint32(n), uint32(rgroups), uint32(groups), inOff, scaleOff, ioff, doff}, wb, in, db)
		case kqTiles(w.Type):
			r.Dispatch("matmul_cm_kquant", append(spec, kqTypes[w.Type].getRows), Groups(groups),
				[]uint32{uint32(w.Rows), cols, uint32(n), uint32(rgroups), uint32(groups), inOff, scaleOff, doff, ioff}, wb, in, db)
		case kind == mmQ8:
			r.Dispatch("matmul_cm_q8_0", spec, Groups(groups),
				[]uint32{uint32(w.Rows), cols, uint32(n), uint32(rgroups), uint32(groups), inOff, scaleOff, doff}, wb, in, db)
		default:
			r.Dispatch("matmul_cm_half", spec, Groups(groups),
				[]uint32{uint32(w.Rows), cols, uint32(n), uint32(rgroups), uint32(groups), inOff, scaleOff, doff}, wb, in, db)
		}
		r.dev.countMACs(macs, true)
		return nil
	}
	r.dev.countMACs(macs, false)

	nv := min(n, mmMaxVectors)
	for nv&(nv-1) != 0 { // 1, 2, 4 or 8: fewer pipelines
		nv++
	}
	vgroups := (n + nv - 1) / nv
	const rowsPerGroup = mmWG / mmTPR
	groups := (w.Rows + rowsPerGroup - 1) / rowsPerGroup * vgroups
	spec := []uint32{mmWG, uint32(nv), mmTPR}
	var name string
	switch w.Type {
	case tensor.F32:
		name = "matmul_f32"
		spec = append(spec, mmBool(w.Cols%4 == 0), mmBool(xoff%4 == 0))
	case tensor.F16, tensor.BF16:
		name = "matmul_half"
		spec = append(spec, mmBool(w.Type == tensor.BF16), mmBool(w.Cols%8 == 0), mmBool(soff%4 == 0))
	case tensor.Q8_0:
		name = "matmul_q8_0"
		if r.dev.info.IntDot { // packed dot products: the same integer sums
			name = "matmul_q8_0_dp"
		}
	case tensor.NVFP4:
		name = "matmul_nvfp4"
		mode := uint32(0) // W4A8
		switch kind {
		case mmFP4:
			mode = 1
		case mmF32:
			mode = 2
		}
		spec = append(spec, mode, mmBool(inOff%4 == 0))
	default:
		name, spec = r.kqShader(w.Type, spec)
	}
	r.Dispatch(name, spec, Groups(groups),
		[]uint32{uint32(w.Rows), cols, uint32(n), uint32(vgroups), uint32(groups), inOff, scaleOff, ioff, doff}, wb, in, db)
	return nil
}

// coopTile is the tile of the cooperative-matrix shader that takes w's
// product of n vectors converted as kind, if the device runs that path and
// there is one: Q8_0 weights with Q8_0 activations and NVFP4 weights with
// Q8_0 (W4A8) or NVFP4 (W4A4) activations (int8 tiles), and F16 weights
// (f16 tiles), for passes of Device.coopMin vectors or more. The others
// (F32, BF16, NVFP4 W4A16) run on the scalar shaders.
func (r *Recorder) coopTile(w *Matrix, kind mmKind, n int) (tile, bool) {
	d := r.dev
	if d.matmul != MatMulCoopMat || n < d.coopMin {
		return tile{}, false
	}
	switch {
	case w.Type == tensor.Q8_0 && kind == mmQ8, w.Type == tensor.NVFP4 && (kind == mmQ8 || kind == mmFP4):
		return d.tiles.i8, true
	case w.Type == tensor.F16 && kind == mmHalf:
		return d.tiles.f16, true
	case kqTiles(w.Type) && kqTileDepth(d.tiles.i8):
		return d.tiles.i8, true
	}
	return tile{}, false
}

func mmBool(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
