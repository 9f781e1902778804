// Package tokenizer turns text into token ids and back, the way llama.cpp and
// Hugging Face tokenizers do for the models edgellmd serves.
//
// Two vocabulary models are supported, named as GGUF's tokenizer.ggml.model
// names them:
//
//   - "llama": SentencePiece-style BPE with scores (llama.cpp's
//     llm_tokenizer_spm). Spaces become U+2581, a space is prepended to each
//     text fragment that starts the input or follows a special token when
//     AddSpacePrefix is set, adjacent symbols merge by highest token score, and
//     bytes that form no token fall back to <0xNN> byte tokens.
//   - "gpt2": byte-level BPE as the Qwen family uses it (tokenizer.ggml.pre
//     "qwen2" or "qwen35"). Text is NFC-normalised (as the Hugging Face
//     tokenizer.json of these models asks), split by a hand-written equivalent
//     of the pre-tokenizer regex, mapped through GPT-2's byte-to-unicode table
//     and merged by rank. Merge results are cached per pre-token word.
//
// Both models merge with a mergeQueue (lowest key first, leftmost on ties,
// the pair a rescan of every pair would pick), so a word of n bytes costs
// O(n log n) time and 16-20 bytes a byte of memory whatever it holds (for
// llama, which has no pre-tokenizer, the word is the whole text between
// special tokens): one 15 MiB word of one letter encodes in about a second.
//
// Added tokens (control and user-defined) are recognised in the input text
// before anything else, leftmost-longest as Hugging Face does: user-defined
// ones always (e.g. <think>, <tool_call>), control ones only when Encode is
// asked to parse special tokens.
//
// A Vocab comes from a GGUF file (the adapter lives with the GGUF reader, not
// here), from a Hugging Face tokenizer.json (LoadTokenizerJSON) or from
// ByteLevelVocab, a tiny built-in vocabulary for synthetic test models.
//
// This package does not render chat templates; Vocab.ChatTemplate is only
// carried along for whoever does.
package tokenizer
