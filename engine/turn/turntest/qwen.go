// Package turntest gives the tests of the turn pipeline and of its wire
// adapters (web/) the real Qwen3 tokenizer and the Qwen3 and Qwen3.5 chat
// templates, read once from the repository's testdata. It is imported by
// tests only.
package turntest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
)

// The files, relative to the repository root (each with its origin in the
// README beside it).
const (
	Qwen3TokenizerFile  = "engine/tokenizer/testdata/qwen3/tokenizer.json.gz"
	Qwen35TemplateFile  = "engine/chat/testdata/qwen35/chat_template.jinja"
	repositoryRootMark  = "go.mod"
	repositoryRootDepth = 8
)

// Path is file (relative to the repository root) as a path a test in any
// package can open: the tests run in their package's folder, so the root
// is the nearest folder above it with go.mod.
func Path(t testing.TB, file string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range repositoryRootDepth {
		if _, err := os.Stat(filepath.Join(dir, repositoryRootMark)); err == nil {
			return filepath.Join(dir, file)
		}
		dir = filepath.Dir(dir)
	}
	t.Fatalf("turntest: no %s above the test's folder", repositoryRootMark)
	return ""
}

var (
	tokOnce sync.Once
	tok     *tokenizer.Tokenizer
	tokErr  error
)

// Qwen3Tokenizer is the Qwen3 tokenizer (its tokenizer.json), loaded once
// per test binary.
func Qwen3Tokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	path := Path(t, Qwen3TokenizerFile)
	tokOnce.Do(func() {
		v, err := tokenizer.LoadTokenizerJSON(path)
		if err != nil {
			tokErr = err
			return
		}
		tok, tokErr = tokenizer.New(v)
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tok
}

// QwenTemplate is Qwen3's chat template (JSON tool calls) or, for model
// "qwen35", Qwen3.5's (XML tool calls).
func QwenTemplate(t testing.TB, model string) *chat.Template {
	t.Helper()
	src := Qwen3Tokenizer(t).Vocab().ChatTemplate
	if model == "qwen35" {
		data, err := os.ReadFile(Path(t, Qwen35TemplateFile))
		if err != nil {
			t.Fatal(err)
		}
		src = string(data)
	}
	tpl, err := chat.NewTemplate(src, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}
