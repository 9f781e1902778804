package tensor

import (
	"fmt"
	"sync/atomic"
)

// mmJob is the state of the matrix product in flight, plus the scratch the
// pool keeps between calls: activations converted once per call to the type
// the weights' kernel consumes (ggml's vec_dot_type), and per-worker buffers.
type mmJob struct {
	m   Matrix
	dst []float32
	x   []float32 // F32, F16, BF16: the activations the kernels read
	n   int

	src   []float32   // the caller's activations, while they are converted
	actF  []float32   // F16/BF16: activations rounded to the weight type
	actQ  []q8Act     // Q8_0: activation blocks, vector after vector: actQ[v*nb+b]
	actP  []q8Pair    // Q8_0, n > 1: vectors 2i and 2i+1 packed: actP[i*nb+b]
	actF4 []fp4Act    // NVFP4 W4A4: activation blocks, vector after vector
	actK  []q8KAct    // K-quants, IQ4_XS: Q8_K super-blocks, vector after vector
	actS  []float32   // Q4_1, Q5_1: each Q8_1 block's d*sum(q) (actQ holds the quants)
	kAcc  [][]float32 // per worker: repacked Q4_K accumulators (kquant_dot.go)
	kSum  [][]int32   // per worker: repacked Q4_K integer sums
	actT  []byte      // tile kernels: activations repacked per group (gemm.go)
	tiled bool        // rows runs the tile kernels on actT
	vnni  bool        // rows runs the AVX-512 VNNI kernels on actT (vnni_amd64.go)
	invG  []float32   // NVFP4 W4A4: per vector, 1/G (nvfp4a4.go)
	wide  [][]float32
	lanes [][]float32 // per worker: one vector, rounded, before it goes lane-major

	// nvAct is how NVFP4 weights meet activations (SetNVFP4Activations).
	nvAct NVFP4Activations

	// minus128 is set by convert when a Q8_0 activation quant is -128
	// (only from NaN input), which the tile kernels cannot take.
	minus128 atomic.Bool

	rowsFn    func(worker, lo, hi int) // prebound methods, so calls do not allocate
	convertFn func(worker, lo, hi int)
}

// NVFP4Activations selects the arithmetic of products with NVFP4 weights.
type NVFP4Activations int

const (
	// NVFP4ActQ8 (the default) is ggml's CPU arithmetic, W4A8: activations
	// quantized to Q8_0 blocks, integer products with the doubled E2M1
	// values, summed in the order of ggml_vec_dot_nvfp4_q8_0 (AVX2).
	NVFP4ActQ8 NVFP4Activations = iota
	// NVFP4ActF32 is W4A16: activations used as they are, in F32.
	NVFP4ActF32
	// NVFP4ActFP4 is W4A4: activations quantized to NVFP4 per 16 values
	// at run time, with the weight's input scale (Matrix.InputScale) or a
	// per-vector one, and products of E2M1 codes (nvfp4a4.go).
	NVFP4ActFP4
)

// SetNVFP4Activations chooses the arithmetic MatVec and MatMul use for
// NVFP4 weights from now on.
func (p *Pool) SetNVFP4Activations(a NVFP4Activations) { p.mm.nvAct = a }

func (j *mmJob) init(p *Pool) {
	j.wide = make([][]float32, p.threads)
	j.lanes = make([][]float32, p.threads)
	j.kAcc = make([][]float32, p.threads)
	j.kSum = make([][]int32, p.threads)
	j.rowsFn = j.rows
	j.convertFn = j.convert
}

// MatVec computes dst[r] = sum_c m[r,c]*x[c] for every row r, with ggml's CPU
// arithmetic for m's type: x is first rounded to F16 (F16 weights), to BF16
// (BF16 weights) or quantized to Q8_0 blocks (Q8_0 weights, and NVFP4
// weights unless SetNVFP4Activations says otherwise: F32 as it is, or
// NVFP4 for W4A4). len(x) must be m.Cols and len(dst) m.Rows.
func (p *Pool) MatVec(dst []float32, m Matrix, x []float32) {
	// The one-vector kernels read four streams of rows (streamQuarter),
	// which from memory beats the AVX2 two-vector tile run on the vector
	// twice (that tile reads one stream but does the arithmetic twice): on
	// a Zen 5 core, 27 against 20 GB/s for Q8_0, 10 against 7.4 for W4A8.
	p.MatMul(dst, m, x, 1)
}

// MatMul computes n matrix-vector products at once: x holds n vectors of
// m.Cols values one after the other, dst receives n vectors of m.Rows values,
// dst[v*m.Rows+r] = sum_c m[r,c]*x[v*m.Cols+c]. Each weight row is read once
// and used for all n vectors, and every result equals the corresponding
// MatVec result bit for bit.
func (p *Pool) MatMul(dst []float32, m Matrix, x []float32, n int) {
	if !CPUSupports(m.Type) {
		panic(fmt.Sprintf("tensor: MatMul: weight type %s is not supported (want %s)", m.Type, CPUTypes()))
	}
	if n < 0 || len(x) != n*m.Cols || len(dst) != n*m.Rows {
		panic(fmt.Sprintf("tensor: MatMul: %s matrix %dx%d times %d vectors: x has %d values (want %d), dst %d (want %d)",
			m.Type, m.Rows, m.Cols, n, len(x), n*m.Cols, len(dst), n*m.Rows))
	}
	if m.Rows < 0 || m.Cols%m.Type.BlockElems() != 0 {
		panic(fmt.Sprintf("tensor: MatMul: %s matrix %dx%d: bad shape (columns must be a multiple of %d)", m.Type, m.Rows, m.Cols, m.Type.BlockElems()))
	}
	if rb := m.rowBytes(); len(m.Data) != m.Rows*rb {
		panic(fmt.Sprintf("tensor: MatMul: %s matrix %dx%d has %d bytes, want %d", m.Type, m.Rows, m.Cols, len(m.Data), m.Rows*rb))
	}
	if n == 0 || m.Rows == 0 {
		return
	}
	j := &p.mm
	j.m, j.dst, j.n = m, dst, n

	// Convert the activations once for the whole call.
	typ := m.Type
	if typ == NVFP4 {
		switch j.nvAct {
		case NVFP4ActF32:
			typ = F32
		case NVFP4ActFP4:
			typ = NVFP4
		default:
			typ = Q8_0
		}
	}
	switch actKind(typ) {
	case actQ8K:
		j.actK = growK(j.actK, n*m.Cols/qkK)
		j.src = x
		p.parallel(n, 1, j.convertFn)
	case actQ8_0, actQ8_1:
		if cap(j.actQ) < n*m.Cols/q8Block {
			j.actQ = make([]q8Act, n*m.Cols/q8Block)
		}
		j.actQ = j.actQ[:n*m.Cols/q8Block]
		j.actS = grow(j.actS, n*m.Cols/q8Block)
		j.src = x
		p.parallel(n, 1, j.convertFn)
	}
	switch typ {
	case NVFP4:
		if nb := n * m.Cols / nvBlock; cap(j.actF4) < nb {
			j.actF4 = make([]fp4Act, nb)
		}
		j.actF4 = j.actF4[:n*m.Cols/nvBlock]
		j.invG = grow(j.invG, n)
		j.src = x
		p.parallel(n, 1, j.convertFn)
	case F32:
		j.x = x
	case F16, BF16:
		j.actF = grow(j.actF, n*m.Cols)
		j.x = j.actF
		j.src = x
		if n > 1 {
			for w := range j.lanes {
				j.lanes[w] = grow(j.lanes[w], m.Cols)
			}
		}
		p.parallel(n, 1, j.convertFn)
	case Q8_0:
		if cap(j.actQ) < n*m.Cols/q8Block {
			j.actQ = make([]q8Act, n*m.Cols/q8Block)
		}
		j.actQ = j.actQ[:n*m.Cols/q8Block]
		j.src = x
		j.vnni = useSIMD && useVNNI && m.Cols > 0
		j.tiled = !j.vnni && (useSIMD || useNEONDot) && useTiles && tileVectors(n) > 0 && m.Cols > 0
		switch {
		case j.vnni:
			j.actT = growBytes(j.actT, vnniSlots(n)*m.Cols/q8Block*vnniActBytes)
		case j.tiled:
			j.actT = growBytes(j.actT, tileSlots(n)*m.Cols/q8Block*q8ActBytes)
		}
		p.parallel(n, 1, j.convertFn)
		if j.minus128.Load() {
			j.tiled = false
			j.minus128.Store(false)
		}
		if n > 1 && m.Type == Q8_0 && !useSIMD && !useNEONDot { // dot2Q8's packed pairs
			np, nb := n/2, m.Cols/q8Block
			if cap(j.actP) < np*nb {
				j.actP = make([]q8Pair, np*nb)
			}
			j.actP = j.actP[:np*nb]
			for b := 0; b < nb; b++ {
				for i := 0; i < np; i++ {
					packQ8Pair(&j.actP[i*nb+b], &j.actQ[2*i*nb+b], &j.actQ[(2*i+1)*nb+b])
				}
			}
		}
	}

	// Rows are cut into chunks, several per worker; below some 32k
	// multiply-adds a chunk is not worth waking a core for. With several
	// vectors a chunk is kept to about 128 KiB of weights as the kernels read
	// them (F16/BF16 rows are widened to F32 once per call, into a per-worker
	// buffer), so that it stays in the core's cache while the vectors go by.
	chunk := (m.Rows + 8*p.threads - 1) / (8 * p.threads)
	chunk = max(chunk, (32<<10)/max(1, m.Cols*n))
	if n > 1 {
		rowBytes := m.rowBytes()
		if m.Type == F16 || m.Type == BF16 {
			rowBytes = 4 * m.Cols
		}
		chunk = max(1, min(chunk, (128<<10)/max(1, rowBytes)))
		if m.Type == F16 || m.Type == BF16 {
			switch {
			case useSIMD && useHalf512 && useTiles && chunk >= 4:
				chunk &^= 3 // whole tiles of gemmHalfRowsZ's four rows
			case useSIMD && useTiles && chunk >= 3:
				chunk -= chunk % 3 // whole tiles of gemmHalfRows' three rows
			case chunk >= 4:
				chunk &^= 3 // whole blocks of exactRowsLanes' four rows
			}
			for w := range j.wide {
				j.wide[w] = grow(j.wide[w], chunk*m.Cols)
			}
		}
	}
	if useSIMD && repackedAVX2(m.Type, m.Rows) {
		chunk = (chunk + 7) &^ 7 // whole tiles of eight rows (kquant_tile.go)
	}
	p.parallel(m.Rows, chunk, j.rowsFn)

	j.m, j.dst, j.x, j.src = Matrix{}, nil, nil, nil
	j.tiled, j.vnni = false, false
}

// f16VecDotOnly says whether m is an F16 matrix whose products llama.cpp
// sums in ggml_vec_dot_f16's order whatever the number of vectors: its
// tinyBLAS (llamafile_sgemm), which takes two or more vectors otherwise,
// refuses a row length that is not a multiple of its 8 lanes (k % KN), so
// such a matrix (llama-quantize's F16 fallback for an "unusual shape", such
// as stories260K's 172-wide ffn_down) goes to vec_dot at every batch size.
// MatMul sums those in that order too (AttnDotF16Rows: four 8-lane
// accumulators over blocks of 32, the leftovers in float64), for one vector
// and several alike, so the bits stay independent of the batch. Rows of a
// multiple of 8 keep tinyBLAS's order at every batch size (llama.cpp's
// one-vector products differ there: docs/performance/kquants.md).
func f16VecDotOnly(m Matrix) bool { return m.Type == F16 && m.Cols%8 != 0 }

// growBytes is grow for bytes.
func growBytes(s []byte, n int) []byte {
	if cap(s) < n {
		return make([]byte, n)
	}
	return s[:n]
}

// grow returns s resized to n values, reusing its array when large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// convert prepares activation vectors [lo,hi) for the weight type.
func (j *mmJob) convert(worker, lo, hi int) {
	cols := j.m.Cols
	for v := lo; v < hi; v++ {
		src := j.src[v*cols : (v+1)*cols]
		switch actKind(j.m.Type) {
		case actQ8K:
			nb := cols / qkK
			quantizeQ8K(j.actK[v*nb:(v+1)*nb], src)
			continue
		case actQ8_0:
			nb := cols / q8Block
			quantizeQ8Vector(j.actQ[v*nb:(v+1)*nb], src)
			continue
		case actQ8_1:
			nb := cols / q8Block
			quantizeQ8_1(j.actQ[v*nb:(v+1)*nb], j.actS[v*nb:(v+1)*nb], src)
			continue
		}
		switch j.m.Type {
		case F16, BF16:
			// One vector is read in order (dotF16, dotBF16), and so are
			// several by the SIMD kernels; for exactRowsLanes they are
			// stored lane-major.
			lanes := j.n > 1 && !useSIMD && !f16VecDotOnly(j.m)
			dst := j.actF[v*cols : (v+1)*cols]
			if lanes {
				dst = j.lanes[worker][:cols]
			}
			if j.m.Type == F16 {
				for i, f := range src {
					dst[i] = roundF16(f)
				}
			} else {
				for i, f := range src {
					dst[i] = roundBF16(f)
				}
			}
			if lanes {
				toLanes(j.actF[v*cols:(v+1)*cols], dst)
			}
		case NVFP4:
			if j.nvAct == NVFP4ActFP4 {
				nb := cols / nvBlock
				j.invG[v] = quantizeActFP4(j.actF4[v*nb:(v+1)*nb], src, j.m.InputScale)
				continue
			}
			fallthrough
		case Q8_0:
			nb := cols / q8Block
			quantizeQ8Vector(j.actQ[v*nb:(v+1)*nb], src)
			if j.vnni {
				packVNNI(j.actT, j.actQ[v*nb:(v+1)*nb], v, j.n, j.m.Type == NVFP4)
			} else if j.tiled && j.m.Type == Q8_0 {
				if packQ8Tile(j.actT, j.actQ[v*nb:(v+1)*nb], v, j.n, nb) {
					j.minus128.Store(true)
				}
			} else if j.tiled {
				if packNVQ8Tile(j.actT, j.actQ[v*nb:(v+1)*nb], v, j.n, nb/2) {
					j.minus128.Store(true)
				}
			}
		}
	}
}

// rows computes the outputs of rows [lo,hi) for all vectors.
func (j *mmJob) rows(worker, lo, hi int) {
	m, n, cols := j.m, j.n, j.m.Cols
	rows := m.Rows
	if k := actKind(m.Type); k != actNone {
		rb := m.rowBytes()
		repacked := repackedAVX2(m.Type, rows)
		if repacked && m.Type == Q4_K {
			j.q4KRepackedRows(worker, lo, hi)
			return
		}
		if m.Type == Q6_K {
			j.q6KRows(worker, lo, hi)
			return
		}
		if m.Type == Q5_K && n > 1 && (useSIMD || useNEONDot) {
			j.q5KRows(worker, lo, hi)
			return
		}
		if m.Type == Q2_K && n > 1 && (useSIMD || useNEONDot) {
			j.q2KRows(worker, lo, hi)
			return
		}
		if n > 1 && useSIMD {
			switch m.Type {
			case Q5_0:
				j.q5_0Rows(worker, lo, hi)
				return
			case Q3_K:
				j.kPairRows(worker, lo, hi, q3kTile, dotQ3KRow)
				return
			case IQ4_XS:
				j.kPairRows(worker, lo, hi, iq4xsTile, dotIQ4XSRow)
				return
			}
		}
		if (m.Type == Q4_1 || m.Type == Q5_1) && n > 1 && useSIMD {
			j.q8_1Rows(worker, lo, hi)
			return
		}
		if repacked && k == actQ8_0 && j.legacyRepackedRows(worker, lo, hi) {
			return
		}
		for v := 0; v < n; v++ {
			out := j.dst[v*rows+lo : v*rows+hi]
			for r := range out {
				w := m.Data[(lo+r)*rb : (lo+r+1)*rb]
				switch k {
				case actQ8K:
					nb := cols / qkK
					if repacked {
						out[r] = dotQ4KRepacked(w, j.actK[v*nb:(v+1)*nb])
					} else {
						out[r] = dotK(m.Type, w, j.actK[v*nb:(v+1)*nb])
					}
				case actQ8_0:
					nb := cols / q8Block
					if repacked {
						out[r] = dotLegacyRepackedRow(m.Type, w, j.actQ[v*nb:(v+1)*nb])
					} else if m.Type == IQ4_NL {
						out[r] = dotIQ4NL(w, j.actQ[v*nb:(v+1)*nb])
					} else {
						out[r] = dotLegacyQ8Row(m.Type, w, j.actQ[v*nb:(v+1)*nb])
					}
				case actQ8_1:
					nb := cols / q8Block
					out[r] = dotLegacyQ8_1Row(m.Type, w, j.actQ[v*nb:(v+1)*nb], j.actS[v*nb:(v+1)*nb])
				}
			}
		}
		return
	}
	switch m.Type {
	case F32:
		w := f32View(m.Data[lo*cols*4 : hi*cols*4])
		v := 0
		for ; v+1 < n; v += 2 {
			dotF32Rows2(j.dst[v*rows+lo:v*rows+hi], j.dst[(v+1)*rows+lo:(v+1)*rows+hi], w, cols, j.x[v*cols:(v+1)*cols], j.x[(v+1)*cols:(v+2)*cols])
		}
		if v < n {
			dotF32Rows(j.dst[v*rows+lo:v*rows+hi], w, cols, j.x[v*cols:(v+1)*cols])
		}
	case F16, BF16:
		raw := u16View(m.Data[lo*cols*2 : hi*cols*2])
		if f16VecDotOnly(m) {
			for v := 0; v < n; v++ {
				AttnDotF16Rows(j.dst[v*rows+lo:v*rows+hi], raw, cols, j.x[v*cols:(v+1)*cols])
			}
			return
		}
		if n == 1 {
			if m.Type == F16 {
				dotF16Rows(j.dst[lo:hi], raw, cols, j.x)
			} else {
				dotBF16Rows(j.dst[lo:hi], raw, cols, j.x)
			}
			return
		}
		if useSIMD {
			switch {
			case useTiles && useHalf512:
				gemmHalfRowsZ(j.dst, raw, j.x, lo, hi, cols, rows, n, m.Type == BF16)
			case useTiles:
				gemmHalfRows(j.dst, raw, j.x, lo, hi, cols, rows, n, m.Type == BF16)
			default:
				dotHalfMatSIMD(j.dst, raw, j.x, lo, hi, cols, rows, n, m.Type == BF16)
			}
			return
		}
		w := j.wide[worker][:len(raw)]
		if m.Type == F16 {
			widenLanesF16(w, raw, cols)
		} else {
			widenLanesBF16(w, raw, cols)
		}
		exactRowsLanes(j.dst, w, j.x, lo, hi, cols, rows, n)
	case Q8_0:
		rb, nb := m.rowBytes(), cols/q8Block
		dst := j.dst
		if j.vnni {
			gemmQ8VnniRows(dst, m.Data, rb, lo, hi, rows, j.actT, n)
			return
		}
		if useSIMD || useNEONDot {
			v := 0
			if j.tiled { // groups of eight, four and two vectors per tile
				for v < tileVectors(n) {
					_, s, used := tileGroup(v, n)
					gemmQ8Rows(dst, m.Data, rb, lo, hi, rows, j.actT[v*nb*q8ActBytes:], v, s, used)
					v += used
				}
			}
			for ; v < n; v++ { // the rest one vector at a time
				dotQ8Rows(dst[v*rows+lo:v*rows+hi], m.Data[lo*rb:hi*rb], rb, j.actQ[v*nb:(v+1)*nb])
			}
			return
		}
		np := n / 2
		for i := 0; i < np; i++ {
			for r := lo; r < hi; r++ {
				dst[2*i*rows+r], dst[(2*i+1)*rows+r] = dot2Q8(m.Data[r*rb:(r+1)*rb], j.actP[i*nb:(i+1)*nb])
			}
		}
		if n%2 == 1 {
			v := n - 1
			for r := lo; r < hi; r++ {
				dst[v*rows+r] = dotQ8(m.Data[r*rb:(r+1)*rb], j.actQ[v*nb:(v+1)*nb])
			}
		}
	case NVFP4:
		rb := m.rowBytes()
		if j.vnni { // W4A8
			gemmNVVnniRows(j.dst, m.Data, rb, lo, hi, rows, j.actT, n)
			return
		}
		data := m.Data[lo*rb : hi*rb]
		v := 0
		switch {
		case j.tiled: // W4A8: groups of eight, four and two vectors per tile
			for v < tileVectors(n) {
				_, s, used := tileGroup(v, n)
				gemmNVQ8Rows(j.dst, m.Data, rb, lo, hi, rows, j.actT[v*cols/q8Block*q8ActBytes:], v, s, used)
				v += used
			}
		case useSIMD && useTiles && j.nvAct == NVFP4ActFP4 && n >= 4 && rb > 0:
			gemmNVFP4Rows(j.dst, m.Data, rb, lo, hi, rows, j.actF4, j.invG, n)
			return
		}
		for ; v < n; v++ {
			out := j.dst[v*rows+lo : v*rows+hi]
			switch j.nvAct {
			case NVFP4ActF32:
				x := j.x[v*cols : (v+1)*cols]
				for r := range out {
					out[r] = dotNVFP4F32(data[r*rb:(r+1)*rb], x)
				}
			case NVFP4ActFP4:
				nb := cols / nvBlock
				dotNVFP4FP4Rows(out, data, rb, j.actF4[v*nb:(v+1)*nb], j.invG[v])
			default:
				nb := cols / q8Block
				dotNVFP4Q8Rows(out, data, rb, j.actQ[v*nb:(v+1)*nb])
			}
		}
	}
}
