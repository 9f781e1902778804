package bench

import (
	"context"
	"testing"
	"time"
)

// TestTraceFigures counts the whole MLPerf trace with the Qwen3 tokenizer
// and chat template, reasoning off, and checks the figures recorded in
// shared/design/PITFALLS.md (measured there independently of this package):
// 1,007 requests, 12,762,237 prompt tokens, the longest 26,847, and
// 12,319,363 of them a prefix of an earlier request, leaving 442,874 to
// prefill.
func TestTraceFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("counts 12.7M tokens (several seconds)")
	}
	start := time.Now()
	w, err := MeasureWorkload(context.Background(), Config{Trace: loadTrace(t), Counter: qwenCounter(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v in %v", w, time.Since(start))
	want := Workload{Conversations: 20, Requests: 1007, PromptTokens: 12_762_237, IdealCachedTokens: 12_319_363,
		PrefillTokens: 442_874, LongestPrompt: 26_847}
	got := w
	got.PrefillP50, got.PrefillP90, got.RecordedAnswerTokens = 0, 0, 0
	if got != want {
		t.Fatalf("figures\n got %+v\nwant %+v", got, want)
	}
	if w.PrefillP50 != 299 {
		t.Errorf("median prefill per request %v, want 299", w.PrefillP50)
	}
}
