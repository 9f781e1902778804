package turn

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// splitBytes cuts s at the given byte offsets (sorted, deduplicated by the
// caller's draw), mid-character or not, as byte-level tokens do.
func splitBytes(s string, cuts []int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		if c > prev && c < len(s) {
			out = append(out, []byte(s[prev:c]))
			prev = c
		}
	}
	return append(out, []byte(s[prev:]))
}

func drawText(t *rapid.T, label string, frags []string) string {
	parts := rapid.SliceOfN(rapid.SampledFrom(frags), 0, 30).Draw(t, label)
	return strings.Join(parts, "")
}

func drawCuts(t *rapid.T, n int) []int {
	if n == 0 {
		return nil
	}
	cuts := rapid.SliceOfN(rapid.IntRange(0, n), 0, 20).Draw(t, "cuts")
	for i := 1; i < len(cuts); i++ { // insertion sort: small
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// TestTextDecoderProperty: whatever the token boundaries (mid-character
// included), the streamed text is the generated text up to the first stop
// string (cut, or kept for the server's own), every delta is whole UTF-8,
// and the stop is reported exactly when a stop string occurs.
func TestTextDecoderProperty(t *testing.T) {
	frags := []string{"a", "b", "ab", " ", "\n", "é", "日本", "🎉", "</", "tool", ">", "END", "EN", "D"}
	rapid.Check(t, func(t *rapid.T) {
		text := drawText(t, "text", frags)
		var stops []Stop
		for _, st := range rapid.SliceOfN(rapid.SampledFrom([]string{"END", "b a", "日本🎉", "</tool>", "\n\n", "é"}), 0, 3).Draw(t, "stops") {
			stops = append(stops, Stop{Text: st, Keep: rapid.Bool().Draw(t, "keep")})
		}
		want, wantStop := text, false
		at, which := -1, -1
		for i, st := range stops {
			j := strings.Index(text, st.Text)
			if j >= 0 && (at < 0 || j < at || (j == at && len(st.Text) > len(stops[which].Text))) {
				at, which = j, i
			}
		}
		if at >= 0 {
			wantStop = true
			want = text[:at]
			if stops[which].Keep {
				want = text[:at+len(stops[which].Text)]
			}
		}
		d := NewTextDecoder(stops, PlainText{})
		var got strings.Builder
		stopped := false
		for _, piece := range splitBytes(text, drawCuts(t, len(text))) {
			deltas, stop := d.Push(piece)
			for _, dl := range deltas {
				if !utf8.ValidString(dl.Content) {
					t.Fatalf("delta %q is not whole UTF-8", dl.Content)
				}
				got.WriteString(dl.Content)
			}
			if stop {
				stopped = true
				break
			}
		}
		for _, dl := range d.Finish() {
			got.WriteString(dl.Content)
		}
		if got.String() != want || stopped != wantStop {
			t.Fatalf("text %q stops %+v: got %q stop %v, want %q stop %v", text, stops, got.String(), stopped, want, wantStop)
		}
	})
}

// splitReference is the reasoning split's definition on a whole text
// (engine/chat's Parser with NoCalls, used when no tools are offered):
// reasoning is the <think> block at the start (or, open, the text up to
// </think>), whitespace-trimmed; content is the rest, as generated, less
// the line breaks the template writes after </think>.
func splitReference(text string, open bool) (content, reasoning string) {
	const ws = " \t\r\n"
	if !open {
		t := strings.TrimLeft(text, ws)
		if !strings.HasPrefix(t, ThinkOpen) {
			return text, ""
		}
		text = t[len(ThinkOpen):]
	}
	r, c, closed := strings.Cut(text, ThinkClose)
	if !closed {
		return "", strings.Trim(r, ws)
	}
	return strings.TrimLeft(c, "\r\n"), strings.Trim(r, ws)
}

// TestReasoningSplitProperty: for every split of the output, the parser
// used when no tools are offered (NoCalls) gives splitReference's content
// and reasoning, call markup kept verbatim, and the parser reading calls
// the same on text without call markup.
func TestReasoningSplitProperty(t *testing.T) {
	frags := []string{"<think>", "</think>", "<thi", "nk>", "</th", " ", "\n", "\n\n", "\t", "abc", "é", "日本", "<", ">", "tool", "x", "<tool_call>", "</tool_call>"}
	rapid.Check(t, func(t *rapid.T) {
		text := drawText(t, "text", frags)
		open := rapid.Bool().Draw(t, "startInReasoning")
		s := chat.NewParser(nil, chat.ParserOptions{StartInReasoning: open, NoCalls: true})
		var deltas []chat.Delta
		for _, piece := range splitBytes(text, drawCuts(t, len(text))) {
			deltas = append(deltas, s.Push(string(piece))...)
		}
		got := chat.Assemble(append(deltas, s.Finish()...))
		gr := ""
		if got.ReasoningContent != nil {
			gr = *got.ReasoningContent
		}
		wc, wr := splitReference(text, open)
		if got.Content.Text != wc || gr != wr {
			t.Fatalf("text %q open %v: content %q reasoning %q, want %q %q", text, open, got.Content.Text, gr, wc, wr)
		}
		if strings.Contains(text, "<tool_call>") {
			return // the parser reading calls would take it as one
		}
		parsed := chat.ParseOutput(text, nil, chat.ParserOptions{StartInReasoning: open})
		pr := ""
		if parsed.ReasoningContent != nil {
			pr = *parsed.ReasoningContent
		}
		if pr != gr || parsed.Content.Text != got.Content.Text {
			t.Fatalf("text %q open %v: parser reading calls %q %q, without %q %q", text, open, parsed.Content.Text, pr, got.Content.Text, gr)
		}
	})
}

// TestReasoningSplitWhitespace: content keeps its whitespace; only the
// reasoning markup's goes.
func TestReasoningSplitWhitespace(t *testing.T) {
	cases := []struct {
		text               string
		open               bool
		content, reasoning string
	}{
		{text: "\"Here?\" Asked Jack.\n", content: "\"Here?\" Asked Jack.\n"},
		{text: " Once upon a time", content: " Once upon a time"},
		{text: "\n\n  indented\n\n", content: "\n\n  indented\n\n"},
		{text: "<think>\nI plan.\n</think>\n\nAnswer.\n", content: "Answer.\n", reasoning: "I plan."},
		{text: "\n<think>x</think>  two spaces", content: "  two spaces", reasoning: "x"},
		{text: "I plan.\n</think>\n\n- item\n", open: true, content: "- item\n", reasoning: "I plan."},
		{text: "<thinking> is not markup", content: "<thinking> is not markup"},
	}
	for _, tc := range cases {
		for _, step := range []int{1, 3, len(tc.text)} {
			s := chat.NewParser(nil, chat.ParserOptions{StartInReasoning: tc.open, NoCalls: true})
			var deltas []chat.Delta
			for i := 0; i < len(tc.text); i += step {
				deltas = append(deltas, s.Push(tc.text[i:min(i+step, len(tc.text))])...)
			}
			got := chat.Assemble(append(deltas, s.Finish()...))
			r := ""
			if got.ReasoningContent != nil {
				r = *got.ReasoningContent
			}
			if got.Content.Text != tc.content || r != tc.reasoning {
				t.Errorf("%q in pieces of %d: content %q reasoning %q, want %q %q", tc.text, step, got.Content.Text, r, tc.content, tc.reasoning)
			}
		}
	}
}

func TestIncompleteTail(t *testing.T) {
	euro := []byte("€")  // 3 bytes
	emoji := []byte("🎉") // 4 bytes
	cases := []struct {
		in   []byte
		want int
	}{
		{nil, 0}, {[]byte("abc"), 0}, {euro, 0}, {euro[:1], 1}, {euro[:2], 2},
		{append([]byte("a"), emoji[:3]...), 3}, {emoji[:1], 1}, {emoji, 0},
		{[]byte{0x80}, 0}, {[]byte{'a', 0xff}, 0}, // bytes that never become a character pass on
	}
	for _, tc := range cases {
		if got := incompleteTail(tc.in); got != tc.want {
			t.Errorf("incompleteTail(% x) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
