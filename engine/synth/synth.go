package synth

import (
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// Options says which synthetic model Build makes.
type Options struct {
	Arch string // "qwen35" (the default when empty)
	Size string // "tiny", "small" or "bench"

	// Type is the ggml type of the 2-D weight matrices: "F32", "F16", "BF16"
	// or "Q8_0" (case-insensitive). Empty means F32 for tiny and small, F16
	// for bench. Norms, biases, ssm_a and ssm_conv1d are always F32, as
	// llama.cpp's converter stores them.
	Type string

	// Vocab is the tokenizer to embed. When nil, TokenizerJSON (a Hugging
	// Face tokenizer.json, with tokenizer_config.json beside it) is loaded;
	// when that is empty too, tokenizer.ByteLevelVocab() is used.
	Vocab         *tokenizer.Vocab
	TokenizerJSON string

	MTP  bool   // add one multi-token-prediction block (blk.N.nextn.*)
	Seed uint64 // same options and seed give the same bytes

	// Layers overrides the size's decoder layer count (0 keeps it); every
	// fourth layer is full attention whatever the count.
	Layers int
}

// synthConfig holds the hyperparameters of one synthetic size.
type synthConfig struct {
	embd, ff, layers   int
	heads, kvHeads     int
	headDim, ropeDims  int
	ropeSections       [4]int32
	convKernel         int
	stateSize          int // d_k = d_v of a Gated DeltaNet head
	groups, valueHeads int // key heads (ssm.group_count), value heads (ssm.time_step_rank)
	tied               bool
	defaultType        tensor.DType
	// vocab pads the vocabulary with unused tokens up to this many (0: the
	// vocabulary's own size), for the embedding and output head of a real
	// model's shape.
	vocab int
}

// Every fourth layer is full attention, as in the released Qwen3.5 models.
const fullAttentionInterval = 4

// The sizes. tiny and small share one shape (small differs only by its tied
// output head, and by carrying a real vocabulary); key heads < value heads so
// the grouped (tiled) head mapping of the DeltaNet is exercised. bench has the
// head geometry of Qwen3.5-0.8B (head_dim 256, 64 rotary dims, sections
// 11/11/10) at 12 layers, so its weights are hundreds of MB.
var synthSizes = map[string]synthConfig{
	"tiny": {
		embd: 64, ff: 192, layers: 8, heads: 4, kvHeads: 2, headDim: 32, ropeDims: 8,
		ropeSections: [4]int32{2, 1, 1, 0}, convKernel: 4, stateSize: 32, groups: 2, valueHeads: 4,
		defaultType: tensor.F32,
	},
	"small": {
		embd: 64, ff: 192, layers: 8, heads: 4, kvHeads: 2, headDim: 32, ropeDims: 8,
		ropeSections: [4]int32{2, 1, 1, 0}, convKernel: 4, stateSize: 32, groups: 2, valueHeads: 4,
		tied: true, defaultType: tensor.F32,
	},
	"bench": {
		embd: 1024, ff: 3584, layers: 12, heads: 8, kvHeads: 2, headDim: 256, ropeDims: 64,
		ropeSections: [4]int32{11, 11, 10, 0}, convKernel: 4, stateSize: 128, groups: 8, valueHeads: 16,
		defaultType: tensor.F16,
	},
	// kquant is the smallest shape whose every matrix has rows of a
	// multiple of 256 values, so that llama-quantize writes K-quants (and
	// not their legacy fallbacks) for all of them: the files of
	// testdata/kquant stay a megabyte or so each.
	"kquant": {
		embd: 256, ff: 512, layers: 4, heads: 2, kvHeads: 1, headDim: 128, ropeDims: 32,
		ropeSections: [4]int32{6, 5, 5, 0}, convKernel: 4, stateSize: 64, groups: 2, valueHeads: 4,
		defaultType: tensor.F16,
	},
	// 27b has the layer shapes of Qwen3.5/3.6-27B (hidden 5120, FFN 17408,
	// 24 query / 4 KV heads of 256, DeltaNet 16 key / 48 value heads of 128,
	// vocabulary 248320; shared/design/reference/model-numerics.md) with 16
	// of its 64 layers (Options.Layers sets another count): what a
	// decode step reads per layer and for the head is the real model's, for
	// bandwidth work on a GPU. 9.2 GB in Q8_0 at 16 layers, 5.9 GB at 8.
	"27b": {
		embd: 5120, ff: 17408, layers: 16, heads: 24, kvHeads: 4, headDim: 256, ropeDims: 64,
		ropeSections: [4]int32{11, 11, 10, 0}, convKernel: 4, stateSize: 128, groups: 16, valueHeads: 48,
		defaultType: tensor.Q8_0, vocab: 248320,
	},
}

// Scales of the random weights. Matrices are uniform with standard deviation
// gain/sqrt(fan_in), so a unit-RMS input gives a unit-RMS output; the gains
// of the projections that feed the residual stream keep each block's
// contribution near RMS 1, so the stream grows slowly and every layer matters.
// Logits have a standard deviation of about logitStd, which makes the
// next-token distribution peaked: the top logit is usually several units
// above the second.
const (
	logitStd   = 12.0
	normSpread = 0.2 // norm weights are 1 ± normSpread (the +1 of Qwen's zero-centred norms folded in)

	// attnGain scales the full-attention output projection down to about a
	// quarter of a DeltaNet block's contribution. llama.cpp rounds K, V (and,
	// with flash attention, Q and the V accumulator) to F16, so attention is
	// where implementations differ most; a smaller share keeps that rounding
	// far below the logit margins while a wrong attention still changes
	// many tokens.
	attnGain = 0.5

	// headRowSpread gives the output head's rows norms that differ by up to
	// 4x (1 + 3u², u uniform in [-1, 1), mean 2, normalised): the logit
	// distribution gets a heavier upper tail, so the top logit stands further
	// above the second. On tiny models (4 seeds, 320 golden positions each)
	// it doubled the median top-1 minus top-2 margin and raised the
	// 1st-percentile ratio of margin to llama.cpp's flash-attention/F16-KV
	// rounding about 1.5x, at the cost of a less even token mix.
	headRowSpread = 3.0

	tiedEmbdStd = 0.5 // embedding RMS of a model whose output head is token_embd
)

// Build builds a deterministic random-weight model in llama.cpp's layout for
// opt.Arch and returns it as a Writer ready to be written. The same options
// give byte-identical files on every machine: the values come from a
// splitmix64 stream per tensor (seeded by opt.Seed and the tensor's name) and
// only exactly rounded arithmetic, so adding MTP or changing the vocabulary
// leaves every other tensor unchanged.
func Build(opt Options) (*gguf.Writer, error) {
	s, vocab, err := newSynth(opt)
	if err != nil {
		return nil, err
	}
	return s.build(opt, vocab)
}

// newSynth checks the options and loads the vocabulary.
func newSynth(opt Options) (*synth, *tokenizer.Vocab, error) {
	arch := opt.Arch
	if arch == "" {
		arch = "qwen35"
	}
	if arch != "qwen35" {
		return nil, nil, fmt.Errorf("synth: architecture %q is not supported (want qwen35)", opt.Arch)
	}
	cfg, ok := synthSizes[opt.Size]
	if !ok {
		return nil, nil, fmt.Errorf("synth: size %q is not one of tiny, small, kquant, bench, 27b", opt.Size)
	}
	switch {
	case opt.Layers < 0 || opt.Layers > 256:
		return nil, nil, fmt.Errorf("synth: %d layers: want 1 to 256 (0 keeps the size's %d)", opt.Layers, cfg.layers)
	case opt.Layers > 0:
		cfg.layers = opt.Layers
	}
	wtype := cfg.defaultType
	if opt.Type != "" {
		t, err := parseWeightType(opt.Type)
		if err != nil {
			return nil, nil, err
		}
		wtype = t
	}
	vocab, err := synthVocab(opt)
	if err != nil {
		return nil, nil, err
	}
	vocab = padVocab(vocab, cfg.vocab)
	s := &synth{w: gguf.NewWriter(), cfg: cfg, wtype: wtype, seed: opt.Seed, nVocab: len(vocab.Tokens)}
	if err := s.checkShapes(); err != nil {
		return nil, nil, err
	}
	return s, vocab, nil
}

func (s *synth) build(opt Options, vocab *tokenizer.Vocab) (*gguf.Writer, error) {
	s.metadata(opt, vocab)
	s.weights(opt.MTP)
	s.generate()
	if s.err != nil {
		return nil, s.err
	}
	return s.w, nil
}

// Write builds the model with Build and writes it to path atomically
// (a temporary file in the same folder, synced, then renamed).
func Write(path string, opt Options) error {
	w, err := Build(opt)
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// padVocab returns v with unused tokens appended up to n tokens (v itself
// when it has as many already). The padding is never produced by the
// tokenizer: a real model's vocabulary is padded the same way.
func padVocab(v *tokenizer.Vocab, n int) *tokenizer.Vocab {
	if len(v.Tokens) >= n {
		return v
	}
	p := *v
	p.Tokens = append(make([]string, 0, n), v.Tokens...)
	if len(v.Types) > 0 {
		p.Types = append(make([]int32, 0, n), v.Types...)
	} else {
		p.Types = make([]int32, len(v.Tokens), n)
		for i := range p.Types {
			p.Types[i] = tokenizer.TypeNormal
		}
	}
	if len(v.Scores) > 0 {
		p.Scores = append(make([]float32, 0, n), v.Scores...)
	}
	for i := len(v.Tokens); i < n; i++ {
		p.Tokens = append(p.Tokens, fmt.Sprintf("<|synth_pad_%d|>", i))
		p.Types = append(p.Types, tokenizer.TypeUnused)
		if len(v.Scores) > 0 {
			p.Scores = append(p.Scores, 0)
		}
	}
	return &p
}

func parseWeightType(name string) (tensor.DType, error) {
	switch strings.ToUpper(name) {
	case "F32":
		return tensor.F32, nil
	case "F16":
		return tensor.F16, nil
	case "BF16":
		return tensor.BF16, nil
	case "Q8_0":
		return tensor.Q8_0, nil
	}
	return 0, fmt.Errorf("synth: weight type %q is not one of F32, F16, BF16, Q8_0", name)
}

func synthVocab(opt Options) (*tokenizer.Vocab, error) {
	switch {
	case opt.Vocab != nil:
		return opt.Vocab, nil
	case opt.TokenizerJSON != "":
		v, err := tokenizer.LoadTokenizerJSON(opt.TokenizerJSON)
		if err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		return &v, nil
	}
	v := tokenizer.ByteLevelVocab()
	return &v, nil
}

// synth accumulates one model; the first error sticks and stops the rest.
type synth struct {
	w      *gguf.Writer
	cfg    synthConfig
	wtype  tensor.DType
	seed   uint64
	nVocab int
	err    error

	// layoutOnly records metadata and tensor infos in meta and layout
	// instead of generating data (tests check a model's layout this way
	// without building hundreds of MB).
	layoutOnly bool
	meta       map[string]any
	layout     []gguf.TensorInfo

	// jobs make the tensors' data, in file order; build runs them on every
	// core (each tensor has its own random stream, so the bytes do not
	// depend on the order they are made in).
	jobs []synthJob
}

type synthJob struct {
	name  string
	typ   tensor.DType
	shape []int64
	data  func() ([]byte, error)
}

// add queues a tensor whose data gen makes.
func (s *synth) add(name string, t tensor.DType, shape []int64, gen func() ([]byte, error)) {
	s.jobs = append(s.jobs, synthJob{name, t, shape, gen})
}

// generate makes every queued tensor's data, in parallel, and adds them to
// the writer in the order they were queued.
func (s *synth) generate() {
	if s.err != nil {
		return
	}
	data := make([][]byte, len(s.jobs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, j := range s.jobs {
		g.Go(func() error {
			d, err := j.data()
			if err != nil {
				return fmt.Errorf("synth: tensor %s: %w", j.name, err)
			}
			data[i] = d
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.fail(err)
		return
	}
	for i, j := range s.jobs {
		s.fail(s.w.AddTensor(j.name, j.typ, j.shape, data[i]))
		data[i] = nil
	}
	s.jobs = nil
}

func (s *synth) fail(err error) {
	if s.err == nil && err != nil {
		s.err = err
	}
}

func (s *synth) kv(key string, value any) {
	if s.layoutOnly {
		s.meta[key] = value
		return
	}
	if s.err == nil {
		s.fail(s.w.AddKV(key, value))
	}
}

// planned reports whether the tensor is only recorded (layoutOnly); it
// records it then.
func (s *synth) planned(name string, t tensor.DType, shape []int64) bool {
	if s.layoutOnly {
		s.layout = append(s.layout, gguf.TensorInfo{Name: name, Type: t, Shape: shape})
	}
	return s.layoutOnly
}

// checkShapes refuses a weight type whose block size does not divide the
// rows it would quantize.
func (s *synth) checkShapes() error {
	if s.nVocab == 0 {
		return fmt.Errorf("synth: the vocabulary has no tokens")
	}
	c := s.cfg
	block := int(s.wtype.BlockElems())
	for _, n := range []int{c.embd, c.ff, c.heads * c.headDim, c.stateSize * c.valueHeads} {
		if n%block != 0 {
			return fmt.Errorf("synth: a %s row of %d values is not a whole number of %d-value blocks", s.wtype, n, block)
		}
	}
	return nil
}

// metadata writes the general, qwen35 and tokenizer keys with the GGUF types
// llama.cpp's converter uses.
func (s *synth) metadata(opt Options, v *tokenizer.Vocab) {
	c := s.cfg
	const a = "qwen35."
	blocks := c.layers
	if opt.MTP {
		blocks++
	}
	s.kv("general.architecture", "qwen35")
	s.kv("general.type", "model")
	s.kv("general.name", fmt.Sprintf("edgellmd synth qwen35 %s seed %d", opt.Size, opt.Seed))
	s.kv("general.file_type", fileType(s.wtype))
	s.kv("general.quantization_version", uint32(2))
	s.kv(a+"block_count", uint32(blocks))
	s.kv(a+"context_length", uint32(32768))
	s.kv(a+"embedding_length", uint32(c.embd))
	s.kv(a+"feed_forward_length", uint32(c.ff))
	s.kv(a+"attention.head_count", uint32(c.heads))
	s.kv(a+"attention.head_count_kv", uint32(c.kvHeads))
	s.kv(a+"attention.key_length", uint32(c.headDim))
	s.kv(a+"attention.value_length", uint32(c.headDim))
	s.kv(a+"attention.layer_norm_rms_epsilon", float32(1e-6))
	s.kv(a+"rope.freq_base", float32(10_000_000))
	s.kv(a+"rope.dimension_count", uint32(c.ropeDims))
	s.kv(a+"rope.dimension_sections", c.ropeSections[:])
	s.kv(a+"ssm.conv_kernel", uint32(c.convKernel))
	s.kv(a+"ssm.state_size", uint32(c.stateSize))
	s.kv(a+"ssm.group_count", uint32(c.groups))
	s.kv(a+"ssm.time_step_rank", uint32(c.valueHeads))
	s.kv(a+"ssm.inner_size", uint32(c.stateSize*c.valueHeads))
	s.kv(a+"full_attention_interval", uint32(fullAttentionInterval))
	if opt.MTP {
		s.kv(a+"nextn_predict_layers", uint32(1))
	}

	model := v.Model
	if model == "" {
		model = "gpt2"
	}
	s.kv("tokenizer.ggml.model", model)
	if v.Pre != "" {
		s.kv("tokenizer.ggml.pre", v.Pre)
	}
	s.kv("tokenizer.ggml.tokens", v.Tokens)
	if len(v.Scores) > 0 {
		s.kv("tokenizer.ggml.scores", v.Scores)
	}
	types := v.Types
	if len(types) == 0 {
		types = make([]int32, len(v.Tokens))
		for i := range types {
			types[i] = tokenizer.TypeNormal
		}
	}
	if len(types) != len(v.Tokens) {
		s.fail(fmt.Errorf("synth: vocabulary has %d token types for %d tokens", len(types), len(v.Tokens)))
	}
	s.kv("tokenizer.ggml.token_type", types)
	if len(v.Merges) > 0 {
		s.kv("tokenizer.ggml.merges", v.Merges)
	}
	for _, id := range []struct {
		key string
		id  int32
	}{
		{"tokenizer.ggml.bos_token_id", v.BOS},
		{"tokenizer.ggml.eos_token_id", v.EOS},
		{"tokenizer.ggml.unknown_token_id", v.UNK},
		{"tokenizer.ggml.padding_token_id", v.PAD},
		{"tokenizer.ggml.eot_token_id", v.EOT},
	} {
		if id.id >= 0 {
			if int(id.id) >= len(v.Tokens) {
				s.fail(fmt.Errorf("synth: %s %d is outside the vocabulary of %d tokens", id.key, id.id, len(v.Tokens)))
			}
			s.kv(id.key, uint32(id.id))
		}
	}
	s.kv("tokenizer.ggml.add_bos_token", v.AddBOS)
	if v.AddEOS {
		s.kv("tokenizer.ggml.add_eos_token", true)
	}
	if v.AddSpacePrefix {
		s.kv("tokenizer.ggml.add_space_prefix", true)
	}
	if v.ChatTemplate != "" {
		s.kv("tokenizer.chat_template", v.ChatTemplate)
	}
}

// fileType is general.file_type (llama_ftype) for a model whose matrices are t.
func fileType(t tensor.DType) uint32 {
	switch t {
	case tensor.F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case tensor.Q8_0:
		return 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	case tensor.BF16:
		return 32 // LLAMA_FTYPE_MOSTLY_BF16
	}
	return 0 // LLAMA_FTYPE_ALL_F32
}

// weights adds every tensor, named and shaped as llama.cpp's qwen35 loader
// (src/models/qwen35.cpp, load_arch_tensors) expects. Shapes are ggml ne:
// {columns (input), rows (output)}.
func (s *synth) weights(mtp bool) {
	c := s.cfg
	e, v := c.embd, s.nVocab

	// Token embeddings have unit RMS per row, like the hidden state they
	// start. A tied head reuses them as the output head; there they are
	// small (RMS tiedEmbdStd), so the token's own embedding is a minor part
	// of the final hidden state (otherwise every token predicts itself), and
	// the final norm's weight carries the logit scale instead.
	embdStd, outNorm, spread := 1.0, 1.0, 0.0
	if c.tied {
		embdStd, spread = tiedEmbdStd, headRowSpread
		outNorm = logitStd / (tiedEmbdStd * math.Sqrt(float64(e)))
	}
	s.matrixSpread("token_embd.weight", e, v, embdStd*math.Sqrt(float64(e)), spread)
	s.vector("output_norm.weight", []int64{int64(e)}, outNorm, normSpread*outNorm)
	if !c.tied {
		s.matrixSpread("output.weight", e, v, logitStd, headRowSpread)
	}
	for il := 0; il < c.layers; il++ {
		if (il+1)%fullAttentionInterval != 0 {
			s.deltaNetLayer(il)
		} else {
			s.attentionLayer(il)
		}
	}
	if mtp {
		il := c.layers
		s.attentionLayer(il)
		p := fmt.Sprintf("blk.%d.nextn.", il)
		s.matrix(p+"eh_proj.weight", 2*e, e, 1)
		s.norm(p+"enorm.weight", e, 1)
		s.norm(p+"hnorm.weight", e, 1)
		s.norm(p+"shared_head_norm.weight", e, 1)
	}
}

// attentionLayer is a gated full-attention block: the q projection yields a
// query and a gate per head (interleaved by head), then q/k RMSNorm, IMRoPE,
// attention, sigmoid(gate), output projection; then the SwiGLU FFN.
func (s *synth) attentionLayer(il int) {
	c := s.cfg
	e, hd := c.embd, c.headDim
	p := fmt.Sprintf("blk.%d.", il)
	s.norm(p+"attn_norm.weight", e, 1)
	s.matrix(p+"attn_q.weight", e, 2*c.heads*hd, 1)
	s.matrix(p+"attn_k.weight", e, c.kvHeads*hd, 1)
	s.matrix(p+"attn_v.weight", e, c.kvHeads*hd, 1)
	s.norm(p+"attn_q_norm.weight", hd, 1)
	s.norm(p+"attn_k_norm.weight", hd, 1)
	// The attention output is a mix of unit-RMS values times sigmoid(gate)
	// (about 0.5): a gain of 2 would bring it back near unit RMS.
	s.matrix(p+"attn_output.weight", c.heads*hd, e, 2*attnGain)
	s.ffn(p)
}

// deltaNetLayer is a Gated DeltaNet (linear attention) block followed by the
// SwiGLU FFN. Tensors are stored as llama.cpp's converter leaves them:
// attn_qkv rows are all q heads, then all k heads, then all v heads;
// ssm_a = -exp(A_log) (negative); ssm_dt.bias is dt_bias; ssm_norm is the
// gated norm weight, not zero-centred, so it carries no folded +1 but is
// drawn around 1 like Hugging Face initialises it.
func (s *synth) deltaNetLayer(il int) {
	c := s.cfg
	e := c.embd
	keyDim := c.stateSize * c.groups
	valueDim := c.stateSize * c.valueHeads
	convDim := 2*keyDim + valueDim
	p := fmt.Sprintf("blk.%d.", il)
	s.norm(p+"attn_norm.weight", e, 1)
	s.matrix(p+"attn_qkv.weight", e, convDim, 1)
	s.matrix(p+"attn_gate.weight", e, valueDim, 1)
	// Depthwise causal conv over convKernel steps: weights of RMS 0.6 keep the
	// conv output near unit RMS, so SiLU works in its curved region.
	s.vector(p+"ssm_conv1d.weight", []int64{int64(c.convKernel), int64(convDim)}, 0, 0.6)
	// Decay g = ssm_a * softplus(alpha + dt_bias): ssm_a in [-4, -0.5] and
	// dt_bias in [-5, -1] give per-head decays exp(g) from about 0.3 to 0.999,
	// so some heads remember long and some short.
	s.uniformVector(p+"ssm_dt.bias", c.valueHeads, -5, -1)
	s.uniformVector(p+"ssm_a", c.valueHeads, -4, -0.5)
	s.matrix(p+"ssm_beta.weight", e, c.valueHeads, 1)
	s.matrix(p+"ssm_alpha.weight", e, c.valueHeads, 0.5)
	s.norm(p+"ssm_norm.weight", c.stateSize, 1)
	// The gated norm output is unit RMS times silu(z) (RMS about 0.6).
	s.matrix(p+"ssm_out.weight", valueDim, e, 1.6)
	s.ffn(p)
}

func (s *synth) ffn(p string) {
	c := s.cfg
	s.norm(p+"post_attention_norm.weight", c.embd, 1)
	s.matrix(p+"ffn_gate.weight", c.embd, c.ff, 1)
	s.matrix(p+"ffn_up.weight", c.embd, c.ff, 1)
	// silu(gate)*up of unit-RMS inputs has an RMS of about 0.6.
	s.matrix(p+"ffn_down.weight", c.ff, c.embd, 1.6)
}

// sqrt3 turns a uniform [-1, 1) draw (variance 1/3) into unit variance.
const sqrt3 = 1.7320508075688772

// matrix adds a 2-D weight of ne {cols, rows} in the model's weight type,
// uniform with standard deviation gain/sqrt(cols).
func (s *synth) matrix(name string, cols, rows int, gain float64) {
	s.matrixSpread(name, cols, rows, gain, 0)
}

// matrixSpread is matrix with each row's scale multiplied by
// (1 + spread·u²)/(1 + spread/3), u uniform in [-1, 1) drawn per row: the
// mean scale stays 1 and the largest rows are up to 1+spread times the
// smallest.
func (s *synth) matrixSpread(name string, cols, rows int, gain, spread float64) {
	if s.err != nil || s.planned(name, s.wtype, []int64{int64(cols), int64(rows)}) {
		return
	}
	wtype, seed := s.wtype, s.seed
	s.add(name, wtype, []int64{int64(cols), int64(rows)}, func() ([]byte, error) {
		amp := gain / math.Sqrt(float64(cols)) * sqrt3 // Sqrt is correctly rounded on every platform
		r := newStream(seed, name)
		rowScales := newStream(seed, name+"#rows")
		rowBytes, err := wtype.RowBytes(int64(cols))
		if err != nil {
			return nil, err
		}
		data := make([]byte, int64(rows)*rowBytes)
		row := make([]float32, cols)
		for i := 0; i < rows; i++ {
			rowAmp := amp
			if spread > 0 {
				u := rowScales.sym()
				rowAmp = amp * float64(1+float64(spread*float64(u*u))) / (1 + spread/3)
			}
			for j := range row {
				row[j] = float32(r.sym() * rowAmp)
			}
			if err := encodeRow(wtype, data[int64(i)*rowBytes:int64(i+1)*rowBytes], row); err != nil {
				return nil, err
			}
		}
		return data, nil
	})
}

// norm adds an F32 RMSNorm weight of n values around mean.
func (s *synth) norm(name string, n int, mean float64) {
	s.vector(name, []int64{int64(n)}, mean, normSpread)
}

// uniformVector adds an F32 vector of n values uniform in [lo, hi).
func (s *synth) uniformVector(name string, n int, lo, hi float64) {
	s.vector(name, []int64{int64(n)}, (lo+hi)/2, (hi-lo)/2)
}

// vector adds an F32 tensor of the given shape with values mean + amp*u,
// u uniform in [-1, 1).
func (s *synth) vector(name string, shape []int64, mean, amp float64) {
	if s.err != nil || s.planned(name, tensor.F32, shape) {
		return
	}
	seed := s.seed
	s.add(name, tensor.F32, shape, func() ([]byte, error) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		r := newStream(seed, name)
		vals := make([]float32, n)
		for i := range vals {
			// The conversion rounds the product, so no platform may fuse it
			// into a multiply-add (Go spec, "Floating-point operators").
			vals[i] = float32(mean + float64(r.sym()*amp))
		}
		data := make([]byte, 4*n)
		if err := encodeRow(tensor.F32, data, vals); err != nil {
			return nil, err
		}
		return data, nil
	})
}

func encodeRow(t tensor.DType, dst []byte, src []float32) error {
	return tensor.QuantizeRow(t, dst, src)
}

// stream is a splitmix64 generator (Steele, Lea, Flood: "Fast splittable
// pseudorandom number generators", OOPSLA 2014), one per tensor.
type stream struct{ state uint64 }

func newStream(seed uint64, name string) *stream {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := &stream{state: seed}
	r.state = r.next() ^ h.Sum64()
	return r
}

func (r *stream) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// sym returns a uniform value in [-1, 1) with 53 random bits; the arithmetic
// is exact.
func (r *stream) sym() float64 {
	return float64(int64(r.next()>>11)-(1<<52)) * 0x1p-52
}
