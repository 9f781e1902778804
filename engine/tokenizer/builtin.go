package tokenizer

// byteLevelMerges are a few common English merges, in GPT-2's alphabet
// (Ġ is the space, Ċ the newline), enough to make merging happen.
var byteLevelMerges = []string{
	"Ġ t", "Ġt h", "Ġth e", "h e", "i n", "e r", "Ġ a", "o n", "r e", "Ġ s",
	"a n", "i s", "Ġ i", "o r", "e n", "Ġ w", "n d", "Ġa nd", "in g", "Ġ Ġ",
	"ĠĠ ĠĠ", "Ċ Ċ", "Ġ o", "Ġo f",
}

// ByteLevelVocab returns a small byte-level BPE vocab for synthetic models:
// the 256 byte tokens (id = byte value, written in GPT-2's byte-to-unicode
// alphabet), one token per merge in byteLevelMerges, and the ChatML control
// tokens <|endoftext|>, <|im_start|> and <|im_end|> (EOS). It uses the qwen2
// pre-tokenizer, so llama.cpp loads it as a gpt2 tokenizer.
func ByteLevelVocab() Vocab {
	v := Vocab{
		Model: "gpt2", Pre: "qwen2",
		BOS: -1, UNK: -1, EOT: -1,
	}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, string(byteToRune[b]))
	}
	for _, m := range byteLevelMerges {
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				v.Tokens = append(v.Tokens, m[:i]+m[i+1:])
				break
			}
		}
	}
	v.Merges = append([]string(nil), byteLevelMerges...)
	v.Types = make([]int32, len(v.Tokens), len(v.Tokens)+3)
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, TypeControl)
	}
	n := int32(len(v.Tokens))
	v.PAD, v.EOS = n-3, n-1
	return v
}
