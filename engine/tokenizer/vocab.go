package tokenizer

// Token types as ggml/llama.cpp number them (GGUF tokenizer.ggml.token_type).
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// Vocab is everything needed to build a Tokenizer, in GGUF's terms.
type Vocab struct {
	Model  string    // "llama" (SentencePiece BPE with scores) or "gpt2" (byte-level BPE); GGUF tokenizer.ggml.model
	Pre    string    // GGUF tokenizer.ggml.pre, e.g. "qwen2" (selects the pre-tokenizer); "" for llama
	Tokens []string  // token texts, indexed by id
	Scores []float32 // one per token; required for llama, may be nil for gpt2
	Types  []int32   // one per token (Type* constants); nil means all TypeNormal
	Merges []string  // gpt2 only: "a b" pairs in rank order

	BOS, EOS, UNK, PAD, EOT int32 // -1 when absent

	AddBOS, AddEOS, AddSpacePrefix bool

	ChatTemplate string // tokenizer.chat_template, may be ""
}

func (v *Vocab) typeOf(id int) int32 {
	if v.Types == nil {
		return TypeNormal
	}
	return v.Types[id]
}
