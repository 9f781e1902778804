package tokenizer

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/gguf"
)

// VocabFromGGUF reads the tokenizer.ggml.* metadata that llama.cpp's
// converters write (gguf-py/gguf/constants.py, Keys.Tokenizer).
func VocabFromGGUF(f *gguf.File) (Vocab, error) {
	v := Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1}
	var ok bool
	if v.Model, ok = f.GetString("tokenizer.ggml.model"); !ok {
		return v, fmt.Errorf("%s: no tokenizer (key tokenizer.ggml.model missing)", f.Path)
	}
	v.Pre, _ = f.GetString("tokenizer.ggml.pre")
	if v.Tokens, ok = f.GetStrings("tokenizer.ggml.tokens"); !ok {
		return v, fmt.Errorf("%s: key tokenizer.ggml.tokens missing or not a string array", f.Path)
	}
	v.Scores, _ = f.GetFloat32s("tokenizer.ggml.scores")
	v.Types, _ = f.GetInt32s("tokenizer.ggml.token_type")
	v.Merges, _ = f.GetStrings("tokenizer.ggml.merges")
	id := func(key string, dst *int32) error {
		x, ok := f.GetInt(key)
		if !ok {
			return nil
		}
		if x == -1 || x == 0xFFFFFFFF { // llama.cpp's "none" (LLAMA_TOKEN_NULL)
			*dst = -1
			return nil
		}
		if x < 0 || x >= int64(len(v.Tokens)) {
			return fmt.Errorf("%s: %s = %d is outside the vocabulary of %d tokens", f.Path, key, x, len(v.Tokens))
		}
		*dst = int32(x)
		return nil
	}
	for key, dst := range map[string]*int32{
		"tokenizer.ggml.bos_token_id":     &v.BOS,
		"tokenizer.ggml.eos_token_id":     &v.EOS,
		"tokenizer.ggml.unknown_token_id": &v.UNK,
		"tokenizer.ggml.padding_token_id": &v.PAD,
		"tokenizer.ggml.eot_token_id":     &v.EOT,
	} {
		if err := id(key, dst); err != nil {
			return v, err
		}
	}
	// llama.cpp's defaults when keys are absent (llama-vocab.cpp): SentencePiece
	// models have BOS 1, EOS 2, UNK 0 and add BOS and a space prefix;
	// byte-level BPE models do neither.
	spm := v.Model == "llama"
	if spm {
		if _, ok := f.GetInt("tokenizer.ggml.bos_token_id"); !ok {
			v.BOS = 1
		}
		if _, ok := f.GetInt("tokenizer.ggml.eos_token_id"); !ok {
			v.EOS = 2
		}
		if _, ok := f.GetInt("tokenizer.ggml.unknown_token_id"); !ok {
			v.UNK = 0
		}
	}
	v.AddBOS, v.AddSpacePrefix = spm, spm
	if b, ok := f.GetBool("tokenizer.ggml.add_bos_token"); ok {
		v.AddBOS = b
	}
	if b, ok := f.GetBool("tokenizer.ggml.add_eos_token"); ok {
		v.AddEOS = b
	}
	if b, ok := f.GetBool("tokenizer.ggml.add_space_prefix"); ok {
		v.AddSpacePrefix = b
	}
	v.ChatTemplate, _ = f.GetString("tokenizer.chat_template")
	return v, nil
}
