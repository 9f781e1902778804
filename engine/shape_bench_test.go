package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/grammar"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// toolSchema is a nested tool-call schema (the benchmark shape):
// a string, an enum, an integer, a nested object and an array of objects.
const toolSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "maxLength": 24},
	"unit": {"enum": ["celsius", "fahrenheit"]},
	"days": {"type": "integer", "minimum": 1, "maximum": 14},
	"where": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}, "country": {"type": "string", "maxLength": 3}}, "required": ["city", "country"], "additionalProperties": false},
	"stops": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {"at": {"type": "string", "maxLength": 8}, "wait": {"type": "boolean"}}, "required": ["at", "wait"], "additionalProperties": false}}},
	"required": ["name", "unit", "days", "where", "stops"], "additionalProperties": false}`

// BenchmarkGrammarDecodeStep: the time per output token of `synth --size
// small` (the Qwen3 tokenizer, 151,669 tokens) decoding greedily, free and
// under the tool schema (mask + shaping of the logits row), and their
// difference per token: what the grammar costs a decode step.
func BenchmarkGrammarDecodeStep(b *testing.B) {
	path := filepath.Join(os.TempDir(), "edgellmd-synth-small-qwen3-seed10.gguf")
	if _, err := os.Stat(path); err != nil {
		if err := synth.Write(path, synth.Options{Size: "small", TokenizerJSON: "tokenizer/testdata/qwen3/tokenizer.json.gz", Seed: 10}); err != nil {
			b.Fatal(err)
		}
	}
	e, err := Load(path, Options{Threads: 2, KVType: tensor.F16, ContextLen: 1024, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	g, err := grammar.FromJSONSchema([]byte(toolSchema))
	if err != nil {
		b.Fatal(err)
	}
	prompt := e.Tokenizer().Encode("<|im_start|>user\nPlan my trip.<|im_end|>\n<|im_start|>assistant\n", false, true)
	run := func(c *Constraint) (time.Duration, int) {
		var first, last time.Time
		n := 0
		_, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 120, IgnoreEOS: true, Constraint: c}, func(Token) error {
			if n == 0 {
				first = time.Now()
			}
			last = time.Now()
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return last.Sub(first), n - 1
	}
	run(&Constraint{Grammar: g}) // warm the grammar's caches, as a served schema is
	var free, shaped time.Duration
	var nf, ns int
	for range b.N {
		d, n := run(nil)
		free, nf = free+d, nf+n
		d, n = run(&Constraint{Grammar: g})
		shaped, ns = shaped+d, ns+n
	}
	pf := free.Seconds() / float64(nf)
	ps := shaped.Seconds() / float64(ns)
	b.ReportMetric(pf*1e3, "free-ms/token")
	b.ReportMetric(ps*1e3, "grammar-ms/token")
	b.ReportMetric((ps-pf)*1e6, "grammar-µs/token")
	b.ReportMetric(100*(ps-pf)/pf, "%-of-step")
}
