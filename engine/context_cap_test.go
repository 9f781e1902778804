package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A context length past the model's is capped, and said at start naming
// the key and both numbers (issue 32 gap 3: 32768 became 2048 silently).
func TestContextLengthCapIsLogged(t *testing.T) {
	var logs bytes.Buffer
	e, err := Load(stories, Options{Threads: 1, ContextLen: 32768, MaxSequences: 1, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.ContextLen() != 2048 {
		t.Fatalf("context %d, want the model's 2048", e.ContextLen())
	}
	line := logs.String()
	for _, want := range []string{`"level":"warn"`, "model.context_length 32768", "2048"} {
		if !strings.Contains(line, want) {
			t.Errorf("the start log does not say %q: %s", want, line)
		}
	}
}
