package tokenizer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes and decodes text with one Vocab. It is immutable after
// New apart from its word cache, and safe for concurrent use.
type Tokenizer struct {
	vocab Vocab
	spm   bool

	toID    map[string]int32
	types   []int32  // effective types, after llama.cpp's by-name fixes
	pieces  [][]byte // Piece of every token
	eog     []bool
	byteTok [256]int32 // spm: the <0xNN> token of each byte (or -1)

	special specialMatcher

	// gpt2
	bpe   *bpeModel
	pre   preTokenizer
	cache *wordCache
}

// Token texts that llama.cpp treats as end of generation whatever their type
// (llama-vocab.cpp, special_eog_ids), and the fill-in-the-middle tokens it
// also marks control (the pad/repo/file-separator ones are EOG too).
var (
	eogNames = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
	}
	fimEOGNames   = []string{"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
	fimOtherNames = []string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}
)

// cacheWords bounds the per-Tokenizer BPE word cache.
const cacheWords = 1 << 16

// New checks v and builds a Tokenizer. It keeps v's slices; do not modify
// them afterwards.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: vocab has no tokens")
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d token scores for %d tokens", len(v.Scores), n)
	}
	for _, f := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}, {"EOT", v.EOT}} {
		if f.id < -1 || int(f.id) >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d outside the vocab of %d tokens", f.name, f.id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddBOS is set but the vocab has no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddEOS is set but the vocab has no EOS token")
	}

	t := &Tokenizer{vocab: v, toID: make(map[string]int32, n)}
	for i, s := range v.Tokens {
		if j, dup := t.toID[s]; dup {
			return nil, fmt.Errorf("tokenizer: tokens %d and %d are both %q", j, i, s)
		}
		t.toID[s] = int32(i)
	}
	t.types = make([]int32, n)
	for i := range t.types {
		t.types[i] = v.typeOf(i)
	}
	t.eog = make([]bool, n)
	for _, names := range [][]string{eogNames, fimEOGNames, fimOtherNames} {
		for _, s := range names {
			if id, ok := t.toID[s]; ok {
				t.types[id] = TypeControl
			}
		}
	}
	for _, names := range [][]string{eogNames, fimEOGNames} {
		for _, s := range names {
			if id, ok := t.toID[s]; ok {
				t.eog[id] = true
			}
		}
	}
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 {
			t.eog[id] = true
		}
	}

	switch v.Model {
	case "llama":
		if v.Scores == nil {
			return nil, fmt.Errorf("tokenizer: model llama needs token scores")
		}
		t.spm = true
		for b := 0; b < 256; b++ {
			id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]
			if !ok {
				id, ok = t.toID[string([]byte{byte(b)})]
			}
			if !ok {
				id = v.UNK
			}
			t.byteTok[b] = id
		}
	case "gpt2":
		switch v.Pre {
		case "qwen2":
		case "qwen35":
			t.pre.marksAreLetters = true
		default:
			return nil, fmt.Errorf("tokenizer: gpt2 pre-tokenizer %q not supported (want qwen2 or qwen35)", v.Pre)
		}
		if len(v.Merges) == 0 {
			return nil, fmt.Errorf("tokenizer: model gpt2 needs merges")
		}
		var err error
		if t.bpe, err = newBPEModel(&t.vocab, t.toID); err != nil {
			return nil, err
		}
		t.cache = newWordCache(cacheWords)
	default:
		return nil, fmt.Errorf("tokenizer: model %q not supported (want llama or gpt2)", v.Model)
	}

	t.pieces = make([][]byte, n)
	for i, s := range v.Tokens {
		p, err := t.makePiece(i, s)
		if err != nil {
			return nil, err
		}
		t.pieces[i] = p
	}
	t.special = newSpecialMatcher(v.Tokens, t.types)
	return t, nil
}

// makePiece is llama.cpp's token_to_piece with special=true.
func (t *Tokenizer) makePiece(id int, s string) ([]byte, error) {
	switch t.types[id] {
	case TypeControl, TypeUnknown, TypeUserDefined:
		return []byte(s), nil
	case TypeByte:
		if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
			return nil, fmt.Errorf("tokenizer: token %d is of type byte but reads %q, not <0xNN>", id, s)
		}
		b, err := strconv.ParseUint(s[3:5], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: token %d is of type byte but reads %q, not <0xNN>", id, s)
		}
		return []byte{byte(b)}, nil
	case TypeNormal:
		if t.spm {
			return []byte(strings.ReplaceAll(s, "\u2581", " ")), nil
		}
		return byteLevelDecode(s), nil
	}
	return nil, nil // unused and undefined tokens print nothing
}

// Vocab returns the vocabulary the Tokenizer was built from (do not modify it).
func (t *Tokenizer) Vocab() *Vocab { return &t.vocab }

// IsEOG reports whether id ends generation: EOS, EOT and the tokens llama.cpp
// treats as such by their text (<|im_end|>, <|endoftext|>, </s>, ...).
func (t *Tokenizer) IsEOG(id int32) bool {
	return id >= 0 && int(id) < len(t.eog) && t.eog[id]
}

// Piece returns the raw bytes of one token for streaming output: byte tokens
// give their byte, byte-level tokens their original bytes, control and
// user-defined tokens their text. It may be part of a UTF-8 character. The
// slice is shared; do not modify it. Unknown ids give nil.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// Decode concatenates the pieces of ids, as llama.cpp's llama_detokenize with
// remove_special=false and unparse_special=true: control tokens (BOS too)
// appear as their text, and when the vocab adds a space prefix the first
// token loses one leading space.
func (t *Tokenizer) Decode(ids []int32) string {
	var sb strings.Builder
	for i, id := range ids {
		p := t.Piece(id)
		if i == 0 && t.vocab.AddSpacePrefix && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		sb.Write(p)
	}
	return sb.String()
}

// Encode tokenizes text as llama.cpp's llama_tokenize(text, addSpecial,
// parseSpecial) does: addSpecial adds BOS/EOS where the vocab asks for them;
// parseSpecial lets control tokens written in the text (e.g. <|im_start|>)
// become those tokens. User-defined added tokens are always recognised.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.encode(text, addSpecial, parseSpecial, nil)
}

// EncodeMixed is Encode with special tokens parsed except where they
// overlap one of the byte ranges plain ([start, end), sorted, disjoint):
// a chat prompt's message text, whose "<|im_start|>" must stay text, in a
// prompt whose template writes the real control tokens. Text outside the
// ranges, and the fragments between control tokens, tokenize exactly as
// Encode's do; user-defined added tokens are recognised everywhere, as
// Encode does without parseSpecial.
func (t *Tokenizer) EncodeMixed(text string, addSpecial bool, plain [][2]int) []int32 {
	return t.encode(text, addSpecial, true, plain)
}

func (t *Tokenizer) encode(text string, addSpecial, parseSpecial bool, plain [][2]int) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.vocab.AddBOS {
		out = append(out, t.vocab.BOS)
	}
	prevSpecial := true // llama.cpp prefixes a space to the first fragment, too
	base := 0           // text's offset in the original, for plain
	for len(text) > 0 {
		at, n, id := t.special.find(text, parseSpecial, base, plain)
		if at > 0 {
			out = t.encodeFragment(out, text[:at], prevSpecial)
			prevSpecial = false
		}
		if n == 0 {
			break
		}
		out = append(out, id)
		prevSpecial = true
		text = text[at+n:]
		base += at + n
	}
	if addSpecial && t.vocab.AddEOS {
		out = append(out, t.vocab.EOS)
	}
	return out
}

func (t *Tokenizer) encodeFragment(out []int32, frag string, afterSpecial bool) []int32 {
	if t.spm {
		return t.encodeSPM(out, frag, afterSpecial && t.vocab.AddSpacePrefix)
	}
	// llama.cpp's byte-level path adds no space prefix, whatever the vocab says.
	frag = nfc(frag)
	for pos := 0; pos < len(frag); {
		end := t.pre.nextWord(frag, pos)
		word := frag[pos:end]
		pos = end
		if ids, ok := t.cache.get(word); ok {
			out = append(out, ids...)
			continue
		}
		k := len(out)
		out = t.bpe.encodeWord(out, word)
		t.cache.put(word, out[k:])
	}
	return out
}

// nfc returns the NFC form of s, cheaply when s is ASCII or already NFC.
func nfc(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			// The ASCII character before may compose with what follows.
			if norm.NFC.IsNormalString(s[max(i-1, 0):]) {
				return s
			}
			return norm.NFC.String(s)
		}
	}
	return s
}

// specialMatcher finds added tokens in text, leftmost and then longest first,
// as Hugging Face's added-vocabulary splitter does.
type specialMatcher struct {
	byFirst [256][]specialTok // by first byte, longest first
}

type specialTok struct {
	text    string
	id      int32
	control bool // control or unknown: only matched when parsing special tokens
}

func newSpecialMatcher(tokens []string, types []int32) specialMatcher {
	var m specialMatcher
	for i, s := range tokens {
		ty := types[i]
		if s == "" || (ty != TypeControl && ty != TypeUnknown && ty != TypeUserDefined) {
			continue
		}
		m.byFirst[s[0]] = append(m.byFirst[s[0]], specialTok{text: s, id: int32(i), control: ty != TypeUserDefined})
	}
	for i := range m.byFirst {
		l := m.byFirst[i]
		sort.SliceStable(l, func(a, b int) bool { return len(l[a].text) > len(l[b].text) })
	}
	return m
}

// find returns the position, length and id of the first added token in text,
// or at = len(text), n = 0 when there is none.
// Control tokens that overlap a range of plain (offsets from base on)
// are not matched.
func (m *specialMatcher) find(text string, parseSpecial bool, base int, plain [][2]int) (at, n int, id int32) {
	for i := 0; i < len(text); i++ {
		cands := m.byFirst[text[i]]
		if len(cands) == 0 {
			continue
		}
		rest := text[i:]
		for _, c := range cands {
			if c.control && (!parseSpecial || overlaps(plain, base+i, base+i+len(c.text))) {
				continue
			}
			if strings.HasPrefix(rest, c.text) {
				return i, len(c.text), c.id
			}
		}
	}
	return len(text), 0, -1
}

// overlaps reports whether [start, end) meets one of the sorted ranges.
func overlaps(ranges [][2]int, start, end int) bool {
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i][1] > start })
	return i < len(ranges) && ranges[i][0] < end
}

// ControlIn returns the first control token written in s as text, and
// whether there is one.
func (t *Tokenizer) ControlIn(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		for _, c := range t.special.byFirst[s[i]] {
			if c.control && strings.HasPrefix(s[i:], c.text) {
				return c.text, true
			}
		}
	}
	return "", false
}
