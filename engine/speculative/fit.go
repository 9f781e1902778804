package speculative

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// FitOptions control FitMTP.
type FitOptions struct {
	Tokens      int     // tokens the target generates to fit on; <= 0 means 16384
	SeqLen      int     // tokens per generated sequence; <= 0 means 256 (at most the context)
	Ridge       float64 // ridge strength relative to the mean diagonal of ZᵀZ; <= 0 means 1e-3
	Temperature float32 // sampling temperature of the generations; <= 0 means 0.3
	Seed        uint64
	Progress    func(done, total int) // generated tokens so far; may be nil
}

// FitReport says what FitMTP fitted on and how well.
type FitReport struct {
	Tokens   int     // tokens generated
	Pairs    int     // (x_{t+1}, h_t) → h_{t+1} examples
	Residual float64 // mean squared error of the fit per hidden value, over the pairs
	Variance float64 // mean squared value of the targets (the error of predicting 0)
}

// FitMTP gives a llama model without an MTP head one, fitted to the model's
// own generations, and returns the model file with the head added (every
// metadata key and tensor of f, block_count + 1, nextn_predict_layers = 1,
// the block blk.<layers>.*). m is f loaded.
//
// The head keeps the MTP layer's structure (engine/model's MTPHead: norms
// of the next token's embedding and of h_t, the eh_proj input projection,
// a decoder block, the trunk's final norm and LM head). Its block is the
// trunk's last block with its output projections (attn_output, ffn_down)
// zero, so the block passes its input through; eh_proj is solved by ridge
// regression so that the head's normed output matches the target's hidden
// state one step ahead: eh_proj·[norm(embed(x_{t+1})); norm(h_t)] ≈
// h_{t+1} / output_norm (RMSNorm is scale-free, so the direction is what
// counts). Least squares of a linear map: the normal equations, solved by
// Cholesky in float64.
func FitMTP(f *gguf.File, m model.Model, opt FitOptions) (*gguf.Writer, FitReport, error) {
	var rep FitReport
	fail := func(format string, args ...any) (*gguf.Writer, FitReport, error) {
		return nil, FitReport{}, fmt.Errorf("draft fit %s: "+format, append([]any{f.Path}, args...)...)
	}
	hp := m.Hyper()
	if hp.Arch != "llama" {
		return fail("architecture %q: only llama models get a fitted head (qwen35 files carry their own)", hp.Arch)
	}
	if m.MTP() != nil {
		return fail("the model already has an MTP head")
	}
	if opt.Tokens <= 0 {
		opt.Tokens = 16384
	}
	if opt.SeqLen <= 0 {
		opt.SeqLen = 256
	}
	opt.SeqLen = min(opt.SeqLen, hp.Context)
	if opt.SeqLen < 3 {
		return fail("sequences of %d tokens are too short to fit on (want >= 3)", opt.SeqLen)
	}
	if opt.Ridge <= 0 {
		opt.Ridge = 1e-3
	}
	if opt.Temperature <= 0 {
		// greedy decoding is what the head serves; text cooler than the
		// model's own distribution fits it better (stories260K, 16384
		// tokens: 21% of linear-3 drafts accepted at 0.3, 14% at 0.6)
		opt.Temperature = 0.3
	}
	E, V := hp.Embd, hp.Vocab
	embed, err := fileMatrix(f, "token_embd.weight", E, V)
	if err != nil {
		return fail("%w", err)
	}
	outNorm, err := fileVector(f, "output_norm.weight", E)
	if err != nil {
		return fail("%w", err)
	}
	bos := int32(1)
	if v, ok := f.GetUint("tokenizer.ggml.bos_token_id"); ok && v < uint64(V) {
		bos = int32(v)
	}

	// Normal equations A = ZᵀZ, B = ZᵀY, accumulated sequence by sequence.
	D := 2 * E
	A := make([]float64, D*D)
	B := make([]float64, D*E)
	var yy float64
	z := make([]float64, D)
	y := make([]float64, E)
	e32 := make([]float32, E)
	add := func(next int32, h, hNext []float32) {
		embed.RowTo(e32, int(next))
		rmsNorm64(z[:E], e32, hp.NormEps)
		rmsNorm64(z[E:], h, hp.NormEps)
		for j := range E {
			w := float64(outNorm[j])
			if w == 0 {
				w = 1
			}
			y[j] = float64(hNext[j]) / w
			yy += y[j] * y[j]
		}
		for i := range D {
			zi := z[i]
			if zi == 0 {
				continue
			}
			row := A[i*D:]
			for k := i; k < D; k++ {
				row[k] += zi * z[k]
			}
			brow := B[i*E : (i+1)*E]
			for j := range E {
				brow[j] += zi * y[j]
			}
		}
		rep.Pairs++
	}

	st := m.NewState(opt.SeqLen)
	smp := sample.New(sample.Params{Temperature: opt.Temperature, Seed: opt.Seed})
	rng := rand.New(rand.NewPCG(opt.Seed, 0xf17))
	logits := make([]float32, V)
	hid := make([][]float32, opt.SeqLen)
	for i := range hid {
		hid[i] = make([]float32, E)
	}
	toks := make([]int32, opt.SeqLen)
	one := model.Batch{Tokens: make([]int32, 1), Pos: make([]int32, 1), Parent: []int32{-1}}
	for rep.Tokens < opt.Tokens {
		st.Reset()
		n := min(opt.SeqLen, opt.Tokens-rep.Tokens+1)
		if n < 3 {
			break
		}
		// BOS and a random token: low temperatures still give varied text
		toks[0], toks[1] = bos, int32(rng.IntN(V))
		for i := range n {
			one.Tokens[0], one.Pos[0] = toks[i], int32(i)
			if err := m.ForwardHidden(st, one, logits, hid[i]); err != nil {
				return fail("generate: %w", err)
			}
			if i+1 < n && i > 0 {
				toks[i+1] = smp.Pick(logits)
			}
		}
		for t := 0; t+1 < n; t++ {
			add(toks[t+1], hid[t], hid[t+1])
		}
		rep.Tokens += n - 1
		if opt.Progress != nil {
			opt.Progress(rep.Tokens, opt.Tokens)
		}
	}
	if rep.Pairs < D {
		return fail("%d examples cannot determine a %d×%d projection; ask for more --tokens", rep.Pairs, E, D)
	}
	for i := range D { // mirror the upper triangle
		for k := 0; k < i; k++ {
			A[i*D+k] = A[k*D+i]
		}
	}
	tr := 0.0
	for i := range D {
		tr += A[i*D+i]
	}
	lambda := opt.Ridge * tr / float64(D)
	for i := range D {
		A[i*D+i] += lambda
	}
	// residual = (yᵀy - 2 tr(WᵀB) + tr(WᵀAW)) / (pairs·E) with the ridge
	// term left in A: an upper bound of the plain squared error
	W := append([]float64(nil), B...)
	if err := choleskySolve(append([]float64(nil), A...), W, D, E); err != nil {
		return fail("ridge regression: %w", err)
	}
	wb, waw := 0.0, 0.0
	aw := make([]float64, E)
	for i := range D {
		clear(aw)
		for k := range D {
			a := A[i*D+k]
			for j := range E {
				aw[j] += a * W[k*E+j]
			}
		}
		for j := range E {
			wb += W[i*E+j] * B[i*E+j]
			waw += W[i*E+j] * aw[j]
		}
	}
	rep.Residual = math.Max(0, yy-2*wb+waw) / float64(rep.Pairs*E)
	rep.Variance = yy / float64(rep.Pairs*E)

	// eh_proj is [2E] -> [E]: ggml shape (2E, E), row j holds W[:, j]
	eh := make([]float32, E*D)
	for j := range E {
		for i := range D {
			eh[j*D+i] = float32(W[i*E+j])
		}
	}
	w, err := withHead(f, hp, eh)
	if err != nil {
		return fail("%w", err)
	}
	return w, rep, nil
}

// withHead copies f into a writer and adds the MTP block.
func withHead(f *gguf.File, hp model.Hyper, eh []float32) (*gguf.Writer, error) {
	w := gguf.NewWriter()
	blocks := uint32(hp.Layers + 1)
	for _, kv := range f.KVs {
		v := kv.Value
		switch kv.Key {
		case "llama.block_count":
			v = blocks
		case "llama.nextn_predict_layers":
			continue
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return nil, err
		}
	}
	if err := w.AddKV("llama.nextn_predict_layers", uint32(1)); err != nil {
		return nil, err
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := w.AddTensor(t.Name, t.Type, t.Shape, f.TensorData(t)); err != nil {
			return nil, err
		}
	}
	E := hp.Embd
	last := fmt.Sprintf("blk.%d.", hp.Layers-1)
	head := fmt.Sprintf("blk.%d.", hp.Layers)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		suffix, ok := strings.CutPrefix(t.Name, last)
		if !ok {
			continue
		}
		data := f.TensorData(t)
		typ := t.Type
		if suffix == "attn_output.weight" || suffix == "ffn_down.weight" {
			// zero: the block passes its input through
			typ, data = tensor.F32, make([]byte, 4*t.Elems())
		}
		if err := w.AddTensor(head+suffix, typ, t.Shape, data); err != nil {
			return nil, err
		}
	}
	ones := make([]float32, E)
	for i := range ones {
		ones[i] = 1
	}
	for _, tt := range []struct {
		name  string
		shape []int64
		data  []float32
	}{
		{"nextn.eh_proj.weight", []int64{int64(2 * E), int64(E)}, eh},
		{"nextn.enorm.weight", []int64{int64(E)}, ones},
		{"nextn.hnorm.weight", []int64{int64(E)}, ones},
	} {
		if err := w.AddTensor(head+tt.name, tensor.F32, tt.shape, f32Bytes(tt.data)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// fileMatrix is a tensor of f as a matrix of rows×cols.
func fileMatrix(f *gguf.File, name string, cols, rows int) (tensor.Matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return tensor.Matrix{}, fmt.Errorf("tensor %q missing", name)
	}
	if len(t.Shape) != 2 || t.Shape[0] != int64(cols) || t.Shape[1] != int64(rows) {
		return tensor.Matrix{}, fmt.Errorf("tensor %q has shape %v, want [%d %d]", name, t.Shape, cols, rows)
	}
	return tensor.NewMatrix(t.Type, rows, cols, f.TensorData(t))
}

// fileVector is a 1-D tensor of f as floats.
func fileVector(f *gguf.File, name string, n int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %q missing", name)
	}
	m, err := tensor.NewMatrix(t.Type, 1, n, f.TensorData(t))
	if err != nil || t.Elems() != int64(n) {
		return nil, fmt.Errorf("tensor %q: want %d values: %v", name, n, err)
	}
	v := make([]float32, n)
	m.RowTo(v, 0)
	return v, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// rmsNorm64 writes x / rms(x) into dst (weight 1), as the head's norms do.
func rmsNorm64(dst []float64, x []float32, eps float32) {
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	for i, v := range x {
		dst[i] = float64(v) * s
	}
}

// choleskySolve solves A X = B for symmetric positive definite A (n×n,
// overwritten by its factor) and B (n×m, overwritten by X).
func choleskySolve(A, B []float64, n, m int) error {
	for j := range n {
		d := A[j*n+j]
		for k := range j {
			d -= A[j*n+k] * A[j*n+k]
		}
		if d <= 0 || math.IsNaN(d) {
			return fmt.Errorf("matrix is not positive definite at column %d", j)
		}
		d = math.Sqrt(d)
		A[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := A[i*n+j]
			for k := range j {
				s -= A[i*n+k] * A[j*n+k]
			}
			A[i*n+j] = s / d
		}
	}
	// forward: L Y = B
	for i := range n {
		for k := range i {
			l := A[i*n+k]
			for c := range m {
				B[i*m+c] -= l * B[k*m+c]
			}
		}
		for c := range m {
			B[i*m+c] /= A[i*n+i]
		}
	}
	// back: Lᵀ X = Y
	for i := n - 1; i >= 0; i-- {
		for k := i + 1; k < n; k++ {
			l := A[k*n+i]
			for c := range m {
				B[i*m+c] -= l * B[k*m+c]
			}
		}
		for c := range m {
			B[i*m+c] /= A[i*n+i]
		}
	}
	return nil
}
