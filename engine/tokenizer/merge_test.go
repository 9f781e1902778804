package tokenizer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestMergeQueue holds best to a scan for the leftmost lowest key after
// every set, on keys drawn from a few values so that ties are common.
func TestMergeQueue(t *testing.T) {
	key := rapid.SampledFrom([]uint32{0, 1, 2, 3, 7, noMerge - 1, noMerge})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5*mergeBlock).Draw(t, "n")
		keys := rapid.SliceOfN(key, n, n).Draw(t, "keys")
		q := newMergeQueue(slices.Clone(keys))
		for step := range rapid.IntRange(0, 200).Draw(t, "steps") {
			want := -1
			for i, k := range keys {
				if k != noMerge && (want < 0 || k < keys[want]) {
					want = i
				}
			}
			if got := q.best(); got != want {
				t.Fatalf("step %d: best() = %d, want %d (keys %v)", step, got, want, keys)
			}
			i := rapid.IntRange(0, n-1).Draw(t, "i")
			keys[i] = key.Draw(t, "k")
			q.set(i, keys[i])
		}
	})
}

// TestSPMKey checks that the queue key orders scores as llama.cpp compares
// them, highest first, with -0 and +0 equal.
func TestSPMKey(t *testing.T) {
	inf := float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	scores := []float32{inf, math.MaxFloat32, 1, 1e-40, 0, negZero, -1e-40, -1, -math.MaxFloat32, -inf}
	for i := 1; i < len(scores); i++ {
		a, b := spmKey(scores[i-1]), spmKey(scores[i])
		if eq := scores[i-1] == scores[i]; (eq && a != b) || (!eq && a >= b) {
			t.Errorf("spmKey(%g) = %#x, spmKey(%g) = %#x", scores[i-1], a, scores[i], b)
		}
	}
	for _, f := range append(scores, float32(math.NaN())) {
		if spmKey(f) == noMerge {
			t.Errorf("spmKey(%g) is noMerge", f)
		}
	}
}

// wordText draws text that stresses merging: long runs of one character
// (the issue-17 case), runs of a short pattern, mixed scripts, emoji with
// joiners, combining marks, whitespace runs and invalid UTF-8.
func wordText() *rapid.Generator[string] {
	chars := []string{
		"a", "e", "z", "A", "0", "7", " ", "\t", "\n", "\r\n", "\u00a0", "\u3000",
		".", "=", "-", "'", "\"", "é", "e\u0301", "ß", "я", "ж", "ع", "ש", "ก", "क",
		"日", "本", "語", "の", "한", "🙂", "👍🏽", "👩\u200d💻", "\u200d", "\ufe0f", "\xff", "\xe6\x97",
	}
	char := rapid.SampledFrom(chars)
	piece := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) string { // a run of one character
			return strings.Repeat(char.Draw(t, "c"), rapid.IntRange(1, 3000).Draw(t, "run"))
		}),
		rapid.Custom(func(t *rapid.T) string { // a run of a short pattern
			p := strings.Join(rapid.SliceOfN(char, 1, 4).Draw(t, "pattern"), "")
			return strings.Repeat(p, rapid.IntRange(1, 500).Draw(t, "times"))
		}),
		rapid.Custom(func(t *rapid.T) string { // mixed characters
			return strings.Join(rapid.SliceOfN(char, 0, 200).Draw(t, "chars"), "")
		}),
		rapid.Custom(func(t *rapid.T) string { // whitespace
			ws := rapid.SampledFrom([]string{" ", "  ", "\t", "\n", "\r", "\u3000", "\u00a0"})
			return strings.Join(rapid.SliceOfN(ws, 1, 300).Draw(t, "ws"), "")
		}),
		rapid.StringN(0, 100, -1), // anything
	)
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(piece, 1, 6).Draw(t, "pieces"), "")
	})
}

// TestMergeMatchesHeap holds the mergeQueue loops to the heap loops they
// replaced (reference_test.go) on the real vocabularies: the Qwen3 merges,
// on the whole text as one word and on each of its pre-token words, and the
// stories260K SentencePiece vocab on the whole text as one fragment.
func TestMergeMatchesHeap(t *testing.T) {
	qwen, stories := qwenTokenizer(t), storiesTokenizer(t)
	rapid.Check(t, func(t *rapid.T) {
		s := wordText().Draw(t, "s")
		if s == "" {
			return
		}
		if got, want := qwen.bpe.encodeWord(nil, s), qwen.bpe.encodeHeapReference(nil, s); !slices.Equal(got, want) {
			t.Fatalf("qwen, one word of %d bytes: queue %v, heap %v", len(s), got, want)
		}
		text := nfc(s)
		for pos := 0; pos < len(text); {
			end := qwen.pre.nextWord(text, pos)
			w := text[pos:end]
			pos = end
			if got, want := qwen.bpe.encodeWord(nil, w), qwen.bpe.encodeHeapReference(nil, w); !slices.Equal(got, want) {
				t.Fatalf("qwen, word %q: got %v, heap %v", w, got, want)
			}
		}
		for _, prefix := range []bool{false, true} {
			if got, want := stories.encodeSPM(nil, s, prefix), stories.encodeSPMHeapReference(nil, s, prefix); !slices.Equal(got, want) {
				t.Fatalf("stories, prefix space %v: queue %v, heap %v", prefix, got, want)
			}
		}
	})
}

// TestMergeMatchesHeapRandomVocab does the same on small random vocabs over
// three letters, whose merges come in any order (a merge may rank before
// the merges that make its parts, which real BPE training never does) and
// whose SentencePiece scores tie often, -0 and +0 included.
func TestMergeMatchesHeapRandomVocab(t *testing.T) {
	letters := []string{"a", "b", "c"}
	text := rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(append(letters, " ")), 1, 400).Draw(t, "letters"), "")
	})
	rapid.Check(t, func(t *rapid.T) {
		pieces := slices.Clone(letters)
		seen := map[string]bool{"a": true, "b": true, "c": true}
		var merges []string
		for range rapid.IntRange(0, 40).Draw(t, "merges") {
			x := rapid.SampledFrom(pieces).Draw(t, "x")
			y := rapid.SampledFrom(pieces).Draw(t, "y")
			if len(x)+len(y) > 8 {
				continue
			}
			merges = append(merges, x+" "+y)
			if !seen[x+y] {
				seen[x+y] = true
				pieces = append(pieces, x+y)
			}
		}
		if len(merges) == 0 {
			merges = []string{"a b"} // New wants at least one
		}
		order := rapid.Permutation(merges).Draw(t, "order")

		bv := Vocab{Model: "gpt2", Pre: "qwen2", BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1, Merges: order}
		for b := 0; b < 256; b++ {
			if s := string(byteToRune[b]); !seen[s] {
				bv.Tokens = append(bv.Tokens, s)
			}
		}
		bv.Tokens = append(bv.Tokens, pieces...)
		bpe, err := New(bv)
		if err != nil {
			t.Fatal(err)
		}

		score := rapid.SampledFrom([]float32{float32(math.Copysign(0, -1)), 0, -1, -2.5, 1})
		sv := Vocab{Model: "llama", BOS: -1, EOS: -1, UNK: 0, PAD: -1, EOT: -1, Tokens: []string{"<unk>"}, Scores: []float32{0}}
		for _, p := range pieces {
			sv.Tokens = append(sv.Tokens, p)
			sv.Scores = append(sv.Scores, score.Draw(t, "score"))
			if q := strings.ReplaceAll(p, "a", "\u2581"); q != p { // a piece with the escaped space
				sv.Tokens = append(sv.Tokens, q)
				sv.Scores = append(sv.Scores, score.Draw(t, "score"))
			}
		}
		spm, err := New(sv)
		if err != nil {
			t.Fatal(err)
		}

		s := text.Draw(t, "s")
		got, want := bpe.bpe.encodeLong(nil, s), bpe.bpe.encodeHeapReference(nil, s)
		if !slices.Equal(got, want) {
			t.Fatalf("byte-level: queue %v, heap %v", got, want)
		}
		if len(s) <= smallWord {
			if small := bpe.bpe.encodeSmall(nil, s); !slices.Equal(small, want) {
				t.Fatalf("byte-level: scan %v, heap %v", small, want)
			}
		}
		if got, want := spm.encodeSPM(nil, s, true), spm.encodeSPMHeapReference(nil, s, true); !slices.Equal(got, want) {
			t.Fatalf("SentencePiece: queue %v, heap %v", got, want)
		}
	})
}

// longWords are single words of 100 KiB or more, of the kinds that made the
// heap slow (issue 17): one character, a short pattern, random letters,
// random CJK.
func longWords(n int) map[string]string {
	r := rand.New(rand.NewPCG(17, 2))
	letters := make([]byte, n)
	for i := range letters {
		letters[i] = byte('a' + r.IntN(26))
	}
	var cjk strings.Builder
	for cjk.Len() < n {
		cjk.WriteRune(rune(0x4e00 + r.IntN(3000)))
	}
	return map[string]string{
		"a":       strings.Repeat("a", n),
		"ab":      strings.Repeat("ab", n/2),
		"letters": string(letters),
		"cjk":     cjk.String(),
		"spaces":  strings.Repeat(" ", n),
	}
}

// TestLongWordsMatchHeap compares the two loops on 100 KiB words.
func TestLongWordsMatchHeap(t *testing.T) {
	qwen, stories := qwenTokenizer(t), storiesTokenizer(t)
	for name, w := range longWords(100 << 10) {
		if got, want := qwen.bpe.encodeLong(nil, w), qwen.bpe.encodeHeapReference(nil, w); !slices.Equal(got, want) {
			t.Errorf("qwen %s: queue and heap differ (%d and %d tokens)", name, len(got), len(want))
		}
		if got, want := stories.encodeSPM(nil, w, true), stories.encodeSPMHeapReference(nil, w, true); !slices.Equal(got, want) {
			t.Errorf("stories %s: queue and heap differ (%d and %d tokens)", name, len(got), len(want))
		}
	}
}

// TestHugeWordFinishes encodes one 4 MiB word of a repeated character, which
// took the heap seconds and 145 bytes of allocation a byte. It asks for no
// speed, only that it ends within a generous bound, even under -race.
func TestHugeWordFinishes(t *testing.T) {
	text := strings.Repeat("a", 4<<20)
	for _, tc := range []struct {
		name string
		tok  *Tokenizer
	}{{"qwen", qwenTokenizer(t)}, {"stories", storiesTokenizer(t)}} {
		done := make(chan []int32, 1)
		go func() { done <- tc.tok.Encode(text, false, false) }()
		select {
		case ids := <-done:
			if got := tc.tok.Decode(ids); got != text {
				t.Errorf("%s: Decode(Encode(4 MiB of a)) gives %d bytes, not the text", tc.name, len(got))
			}
		case <-time.After(20 * time.Second):
			// The goroutine cannot be stopped; the failing run ends with it.
			t.Fatalf("%s: encoding 4 MiB of one letter takes over 20 s", tc.name)
		}
	}
}

// BenchmarkEncodeLongWord encodes 1 MiB (and 15 MiB) as one word, and 1 MiB
// of ordinary text for comparison, with both vocabularies and a cold word
// cache. B/op over the size is the memory a byte costs.
func BenchmarkEncodeLongWord(b *testing.B) {
	qwenText, _ := benchPrompt(b)
	storiesText := "Once upon a time, there was a little girl named Lily. She loved to play outside. "
	for _, tc := range []struct {
		vocab string
		tok   *Tokenizer
		text  string
	}{{"qwen", qwenTokenizer(b), qwenText}, {"stories", storiesTokenizer(b), storiesText}} {
		inputs := []struct{ name, text string }{
			{"word-1MiB", strings.Repeat("a", 1<<20)},
			{"word-15MiB", strings.Repeat("a", 15<<20)},
			{"letters-1MiB", longWords(1 << 20)["letters"]},
			{"text-1MiB", strings.Repeat(tc.text, (1<<20)/len(tc.text)+1)[:1<<20]},
		}
		for _, in := range inputs {
			b.Run(fmt.Sprintf("%s/%s", tc.vocab, in.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if tc.tok.cache != nil {
						b.StopTimer()
						tc.tok.cache = newWordCache(cacheWords)
						b.StartTimer()
					}
					tc.tok.Encode(in.text, false, false)
				}
				b.ReportMetric(float64(len(in.text))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
			})
		}
	}
}
