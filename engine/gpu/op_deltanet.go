package gpu

import (
	"fmt"
	"math/bits"

	"github.com/edgellmd/edgellmd/engine/model"
)

// The Gated DeltaNet core (engine/model/deltanet.go from the projections'
// outputs up to the output projection) in four dispatches:
//
//	delta_conv   conv over the window + SiLU, q/k L2 norms; g and beta
//	delta_scan   the recurrence, one row of S per invocation, tokens in order
//	delta_window the conv window after a chain (beside delta_scan)
//	delta_norm   the gated RMSNorm of the outputs, in place
//
// and delta_gather, which lines up the saved rows of an accepted path for
// DeltaReplay.

// DeltaLayer is one DeltaNet layer's small parameters on the device, beside
// its sizes: the conv taps (ConvDim channels of Kernel taps, oldest first),
// dt_bias and A (per value head) and the gated norm's weight (HeadDim), in
// one buffer.
type DeltaLayer struct {
	KHeads, VHeads, HeadDim, Kernel int
	KeyDim, ValueDim, ConvDim       int
	Eps, Scale                      float32

	params               *Buffer
	dtOff, aOff, normOff uint32 // in params, in floats (the taps are at 0)
	rows                 uint32 // delta_scan's workgroup: rows of S per group
}

// dnMaxHeadDim bounds the head size: delta_scan keeps a row of S in
// registers and stages 8 tokens' q and k in shared memory.
const dnMaxHeadDim = 256

// dnMaxTreeNodes is the most nodes a tree batch may have (delta_scan's
// MAXN, the size of its plan in shared memory).
const dnMaxTreeNodes = 256

// NewDeltaLayer uploads w's conv taps, dt_bias, A and norm weight; the
// matrices stay with the caller.
func (d *Device) NewDeltaLayer(w *model.DeltaNetWeights) (*DeltaLayer, error) {
	L := &DeltaLayer{KHeads: w.KHeads, VHeads: w.VHeads, HeadDim: w.HeadDim, Kernel: w.Kernel,
		KeyDim: w.KeyDim, ValueDim: w.ValueDim, ConvDim: w.ConvDim, Eps: w.Eps, Scale: w.Scale}
	D := w.HeadDim
	switch {
	case D < 1 || D > dnMaxHeadDim:
		return nil, fmt.Errorf("GPU DeltaNet: head size %d, want 1 to %d", D, dnMaxHeadDim)
	case w.KHeads < 1 || w.VHeads%w.KHeads != 0 || w.Kernel < 1:
		return nil, fmt.Errorf("GPU DeltaNet: %d key heads, %d value heads, kernel %d: want value heads a multiple of key heads and a kernel >= 1", w.KHeads, w.VHeads, w.Kernel)
	case w.KeyDim != w.KHeads*D || w.ValueDim != w.VHeads*D || w.ConvDim != 2*w.KeyDim+w.ValueDim:
		return nil, fmt.Errorf("GPU DeltaNet: key dim %d, value dim %d, conv dim %d do not follow from %d key heads, %d value heads of %d", w.KeyDim, w.ValueDim, w.ConvDim, w.KHeads, w.VHeads, D)
	case len(w.Conv) != w.Kernel*w.ConvDim || len(w.DTBias) != w.VHeads || len(w.A) != w.VHeads || len(w.Norm) != D:
		return nil, fmt.Errorf("GPU DeltaNet: %d conv taps, %d dt_bias, %d A, %d norm weights; want %d, %d, %d, %d",
			len(w.Conv), len(w.DTBias), len(w.A), len(w.Norm), w.Kernel*w.ConvDim, w.VHeads, w.VHeads, D)
	}
	// delta_scan's workgroups hold 32 rows of S (one NVIDIA warp, four
	// lavapipe subgroups): a decode step's few heads still spread over
	// several groups per head.
	switch {
	case D%32 == 0:
		L.rows = 32
	case D <= 128: // Vulkan guarantees workgroups of 128
		L.rows = uint32(D)
	default:
		return nil, fmt.Errorf("GPU DeltaNet: head size %d: want a multiple of 32, or at most 128", D)
	}
	p := make([]float32, 0, len(w.Conv)+2*w.VHeads+D)
	p = append(p, w.Conv...)
	L.dtOff = uint32(len(p))
	p = append(p, w.DTBias...)
	L.aOff = uint32(len(p))
	p = append(p, w.A...)
	L.normOff = uint32(len(p))
	p = append(p, w.Norm...)
	b, err := d.UploadF32(p)
	if err != nil {
		return nil, fmt.Errorf("GPU DeltaNet parameters: %w", err)
	}
	L.params = b
	return L, nil
}

// Free releases the layer's parameters.
func (L *DeltaLayer) Free() {
	if L != nil {
		L.params.Free()
	}
}

// DeltaState is one sequence's state of one DeltaNet layer on the device,
// in model.RecurrentLayer's layout so that snapshots copy it byte for byte:
// S is VHeads × HeadDim rows of HeadDim float32 (s[j*d_k+i] = S[i][j]),
// Conv the last Kernel-1 conv inputs, ConvDim float32 each, oldest first.
type DeltaState struct{ S, Conv Range }

// savedRow is the floats a tree node keeps for DeltaReplay, as the CPU's
// savedRow: its conv input (ConvDim), g and beta (VHeads each).
func (L *DeltaLayer) savedRow() int64 { return int64(L.ConvDim + 2*L.VHeads) }

// dnSlots is how many tree states delta_scan keeps at once for n nodes
// (see its plan).
func dnSlots(n int) int64 { return int64(bits.Len(uint(n))) }

// DeltaSavedBytes is the size of DeltaNet's saved argument for a tree batch
// of up to tokens nodes (per node: conv input, g, beta, float32).
func DeltaSavedBytes(L *DeltaLayer, tokens int) int64 { return 4 * int64(tokens) * L.savedRow() }

// DeltaScratchBytes is the scratch that DeltaNet and DeltaReplay need for
// up to tokens tokens (chain), nodes (tree) or path nodes (replay).
func DeltaScratchBytes(L *DeltaLayer, tokens int) int64 {
	n, C := int64(tokens), int64(L.ConvDim)
	replay := n * (C + L.savedRow()) // gathered rows, conv outputs; more than a chain's conv outputs, g and beta
	nodes := min(tokens, dnMaxTreeNodes)
	tree := int64(nodes)*C + dnSlots(nodes)*int64(L.VHeads*L.HeadDim*L.HeadDim)
	return 4 * max(replay, tree)
}

// DeltaNet records the Gated DeltaNet core of one layer for tokens tokens:
// from the projections' outputs (qkv: ConvDim per token; z: ValueDim; beta
// and alpha: VHeads, raw, before sigmoid and softplus) to out (ValueDim per
// token): rmsnorm(o) * norm * silu(z) per value head, ready for the output
// projection. Rows follow one another in every range; scratch holds
// DeltaScratchBytes(L, tokens).
//
// chain: the tokens follow the committed ones in order; st's conv window
// and S advance in place; parent and saved are not used.
//
// Otherwise a tree (or a chain to verify): node i continues from node
// parent[i] (int32 per node, -1: the committed state), parents before
// children, at most 256 nodes; st is only read, and saved
// (DeltaSavedBytes(L, tokens)) receives per node what DeltaReplay needs.
//
// The caller records a barrier before (for the inputs) and after (for out
// and the state); the stages within are separated here.
func (r *Recorder) DeltaNet(out, qkv, z, beta, alpha Range, L *DeltaLayer, st DeltaState, tokens int, parent Range, chain bool, saved, scratch Range) {
	var j [1]deltaJob
	if r.planDelta(&j[0], out, qkv, z, beta, alpha, L, st, tokens, parent, chain, saved, scratch) {
		r.deltaNets(j[:])
	}
}

// deltaJob is one DeltaNet call, checked and planned (planDelta): the
// dispatches of its stages, which deltaNets records.
type deltaJob struct {
	L        *DeltaLayer
	tokens   int
	chain    bool
	conv     dnConvJob
	scan     dnScanJob
	win      Range // a chain's conv window, and its inputs
	wOff     uint32
	mix      Range
	mOff     uint32
	out, z   Range // delta_norm's
	normPush [9]uint32
}

// planDelta checks the arguments of a DeltaNet call (as DeltaNet takes
// them) and plans it into j; false (the error stuck in r) when they are
// bad or there is nothing to do.
func (r *Recorder) planDelta(j *deltaJob, out, qkv, z, beta, alpha Range, L *DeltaLayer, st DeltaState, tokens int, parent Range, chain bool, saved, scratch Range) bool {
	if r.err != nil || tokens <= 0 {
		return false
	}
	if !chain && tokens > dnMaxTreeNodes {
		r.err = fmt.Errorf("GPU DeltaNet: a tree of %d nodes, at most %d", tokens, dnMaxTreeNodes)
		return false
	}
	n := int64(tokens)
	C, V, Hv := int64(L.ConvDim), int64(L.ValueDim), int64(L.VHeads)
	oOff := r.dnOff("out", out, n*V)
	mOff := r.dnOff("qkv", qkv, n*C)
	zOff := r.dnOff("z", z, n*V)
	bOff := r.dnOff("beta", beta, n*Hv)
	aOff := r.dnOff("alpha", alpha, n*Hv)
	sOff := r.dnOff("state S", st.S, Hv*int64(L.HeadDim*L.HeadDim))
	wOff := r.dnOff("conv window", st.Conv, int64(L.Kernel-1)*C)
	scOff := r.dnOff("scratch", scratch, DeltaScratchBytes(L, tokens)/4)
	pOff, svOff, row := uint32(0), uint32(0), L.savedRow()
	if !chain {
		pOff = r.dnOff("parent", parent, n)
		svOff = r.dnOff("saved", saved, n*row)
	}
	if r.err != nil {
		return false
	}
	// scratch: conv outputs (C per token), then g and beta (chain) or the
	// tree's state slots
	cOff := scOff
	conv := dnConvJob{flags: dnGB, mix: qkv, mOff: mOff, mStride: uint32(C), win: st.Conv, wOff: wOff,
		beta: beta, bOff: bOff, alpha: alpha, aOff: aOff, co: scratch, cOff: cOff,
		g: scratch, gOff: cOff + uint32(n*C), gStride: uint32(2 * Hv)}
	scan := dnScanJob{flags: dnOut, co: scratch, cOff: cOff, s: st.S, sOff: sOff, out: out, oOff: oOff}
	if !chain {
		conv.flags |= dnTree | dnKeep
		conv.parent, conv.pOff = parent, pOff
		conv.g, conv.gOff, conv.gStride = saved, svOff+uint32(C), uint32(row)
		conv.sv, conv.sOff, conv.sStride = saved, svOff, uint32(row)
		scan.flags |= dnTree
		scan.slots, scan.nOff = scratch, cOff+uint32(n*C)
		scan.parent, scan.pOff = parent, pOff
	}
	scan.g, scan.gOff, scan.gStride = conv.g, conv.gOff, conv.gStride
	*j = deltaJob{L: L, tokens: tokens, chain: chain, conv: conv, scan: scan, win: st.Conv, wOff: wOff, mix: qkv, mOff: mOff, out: out, z: z,
		normPush: [9]uint32{uint32(tokens), uint32(L.HeadDim), uint32(Hv), oOff, uint32(V), zOff, uint32(V), L.normOff, F32(L.Eps)}}
	return true
}

// deltaNets records the planned calls jobs, on distinct states, rows and
// scratch, stage by stage: every call's conv, a barrier, every call's
// recurrence (and a chain's window), a barrier, every call's norm. So the
// calls of a pass over several sequences run side by side, each as it
// would alone.
func (r *Recorder) deltaNets(jobs []deltaJob) {
	for i := range jobs {
		j := &jobs[i]
		r.dnConv(j.L, j.tokens, j.conv)
	}
	r.Barrier()
	for i := range jobs {
		j := &jobs[i]
		r.dnScan(j.L, j.tokens, j.scan)
		if j.chain {
			r.dnWindow(j.L, j.tokens, j.win, j.wOff, j.mix, j.mOff, uint32(j.L.ConvDim))
		}
	}
	r.Barrier()
	for i := range jobs {
		j := &jobs[i]
		r.Dispatch("delta_norm", nil, Groups(j.tokens*j.L.VHeads), j.normPush[:], j.out.Buf.All(), j.z.Buf.All(), j.L.params.All())
	}
}

// DeltaReplay records advancing st along the accepted nodes of the tree
// batch that DeltaNet last ran on it: path holds n int32 batch indices, a
// root-to-node path, root first. It runs the nodes' saved inputs as a chain,
// which gives the state the tree pass computed for the path's last node.
// scratch holds DeltaScratchBytes(L, n). The caller barriers before and
// after.
func (r *Recorder) DeltaReplay(L *DeltaLayer, st DeltaState, saved, path Range, n int, scratch Range) {
	if r.err != nil || n <= 0 {
		return
	}
	nn, C, row := int64(n), int64(L.ConvDim), L.savedRow()
	sOff := r.dnOff("state S", st.S, int64(L.VHeads*L.HeadDim*L.HeadDim))
	wOff := r.dnOff("conv window", st.Conv, int64(L.Kernel-1)*C)
	svOff := r.dnOff("saved", saved, nn*row)
	pOff := r.dnOff("path", path, nn)
	scOff := r.dnOff("scratch", scratch, DeltaScratchBytes(L, n)/4)
	if r.err != nil {
		return
	}
	avail := saved.Size
	if avail == 0 {
		avail = saved.Buf.size - saved.Off
	}
	// scratch: the path's saved rows, then their conv outputs
	push := []uint32{uint32(n), uint32(row), uint32(avail / (4 * row)), scOff, svOff, pOff}
	r.Dispatch("delta_gather", nil, Groups(int((nn*row+63)/64)), push, scratch.Buf.All(), saved.Buf.All(), path.Buf.All())
	r.Barrier()
	cOff := scOff + uint32(nn*row)
	r.dnConv(L, n, dnConvJob{mix: scratch, mOff: scOff, mStride: uint32(row), win: st.Conv, wOff: wOff, co: scratch, cOff: cOff})
	r.Barrier()
	r.dnScan(L, n, dnScanJob{co: scratch, cOff: cOff, g: scratch, gOff: scOff + uint32(C), gStride: uint32(row), s: st.S, sOff: sOff})
	r.dnWindow(L, n, st.Conv, wOff, scratch, scOff, uint32(row))
}

// Flags of delta_conv and delta_scan.
const (
	dnTree = 1 // parents from a buffer, not the previous token
	dnGB   = 2 // delta_conv: write g and beta
	dnOut  = 2 // delta_scan: write the outputs
	dnKeep = 4 // delta_conv: copy the inputs to the saved rows
)

// dnConvJob is one delta_conv dispatch (shaders/delta_conv.comp): the
// buffers, bound whole, and the offsets and row strides in them, in
// floats. A range without a buffer is not read.
type dnConvJob struct {
	flags         uint32
	mix           Range // conv inputs
	mOff, mStride uint32
	win           Range
	wOff          uint32
	parent        Range
	pOff          uint32
	beta, alpha   Range // raw, VHeads per token
	bOff, aOff    uint32
	co            Range // outputs, ConvDim per token
	cOff          uint32
	g             Range // g then beta, VHeads each per token
	gOff, gStride uint32
	sv            Range // the inputs kept for a replay
	sOff, sStride uint32
}

func (r *Recorder) dnConv(L *DeltaLayer, tokens int, j dnConvJob) {
	if L.Kernel == 1 {
		j.win = Range{} // no window
	}
	heads := 2*L.KHeads + L.VHeads
	push := []uint32{uint32(tokens), j.flags, uint32(L.ConvDim), uint32(L.HeadDim), uint32(2 * L.KHeads), uint32(heads), uint32(L.VHeads),
		j.mOff, j.mStride, j.wOff, j.pOff, 0, L.dtOff, L.aOff, j.bOff, j.aOff, j.cOff, j.gOff, j.gStride, j.sOff, j.sStride, F32(L.Eps)}
	r.Dispatch("delta_conv", []uint32{uint32(L.Kernel)}, Groups(tokens*heads), push,
		dnBind(j.mix, j.mix), dnBind(j.win, j.mix), dnBind(j.parent, j.mix), L.params.All(), dnBind(j.beta, j.mix), dnBind(j.alpha, j.mix),
		dnBind(j.co, j.mix), dnBind(j.g, j.co), dnBind(j.sv, j.co))
}

// dnScanJob is one delta_scan dispatch (shaders/delta_scan.comp), as
// dnConvJob.
type dnScanJob struct {
	flags         uint32
	co            Range // conv outputs: q, k, v
	cOff          uint32
	g             Range // g then beta
	gOff, gStride uint32
	s             Range // the committed S
	sOff          uint32
	slots         Range // a tree's saved states
	nOff          uint32
	parent        Range
	pOff          uint32
	out           Range // outputs, ValueDim per token
	oOff          uint32
}

func (r *Recorder) dnScan(L *DeltaLayer, tokens int, j dnScanJob) {
	push := []uint32{uint32(tokens), j.flags, uint32(L.KHeads), uint32(L.VHeads), uint32(L.ConvDim), j.cOff, j.gOff, j.gStride,
		j.sOff, j.nOff, j.pOff, j.oOff, uint32(L.ValueDim), F32(L.Scale)}
	groups := L.VHeads * L.HeadDim / int(L.rows)
	r.Dispatch("delta_scan", []uint32{uint32(L.HeadDim), L.rows}, Groups(groups), push,
		dnBind(j.co, j.co), dnBind(j.g, j.co), dnBind(j.s, j.co), dnBind(j.slots, j.co), dnBind(j.parent, j.co), dnBind(j.out, j.co))
}

// dnWindow records delta_window: the conv window after tokens chain inputs.
func (r *Recorder) dnWindow(L *DeltaLayer, tokens int, win Range, wOff uint32, mix Range, mOff, mStride uint32) {
	if L.Kernel == 1 {
		return
	}
	push := []uint32{uint32(tokens), uint32(L.ConvDim), wOff, mOff, mStride}
	r.Dispatch("delta_window", []uint32{uint32(L.Kernel)}, Groups((L.ConvDim+63)/64), push, win.Buf.All(), mix.Buf.All())
}

// dnBind is x's whole buffer, or other's where x has none (a binding the
// shader does not read).
func dnBind(x, other Range) Range {
	if x.Buf == nil {
		x = other
	}
	return x.Buf.All()
}

// dnOff checks that x holds floats 4-byte values from its offset and
// returns that offset in values; a bad range sticks as the recording's
// error.
func (r *Recorder) dnOff(what string, x Range, floats int64) uint32 {
	if r.err != nil {
		return 0
	}
	if x.Buf == nil || x.Buf.b == nil {
		r.err = fmt.Errorf("GPU DeltaNet: %s has no buffer", what)
		return 0
	}
	avail := x.Size
	if avail == 0 {
		avail = x.Buf.size - x.Off
	}
	if x.Off < 0 || x.Off%4 != 0 || 4*floats > avail || x.Off+4*floats > x.Buf.size || (x.Off+4*floats)/4 > 1<<32-1 {
		r.err = fmt.Errorf("GPU DeltaNet: %s [%d,+%d) of a buffer of %d bytes cannot hold %d values (or is unaligned)", what, x.Off, x.Size, x.Buf.size, floats)
		return 0
	}
	return uint32(x.Off / 4)
}
