package grammar

import (
	"testing"
	"time"
)

// BenchmarkMaskQwen3ToolSchema replays a tool call (toolCallText, tokenized
// by the Qwen3 tokenizer) under toolSchema, computing the mask before every
// token as a decode loop does, and reports the mean time per mask.
//
//   - warm: one grammar for all iterations (a server that keeps compiled
//     grammars, e.g. per tool list);
//   - new-grammar: a grammar compiled per iteration from the same schema (a
//     server that compiles per request); the Vocab's shared node tables are
//     warm, the grammar's own caches cold; compile time is reported apart;
//   - cold: a new Vocab and grammar per iteration: the first request after
//     start-up.
func BenchmarkMaskQwen3ToolSchema(b *testing.B) {
	q := qwen(b)
	ids := q.tok.Encode(toolCallText, false, false)
	run := func(b *testing.B, v *Vocab, g *Grammar) (first, total time.Duration) {
		m := g.NewMatcher(v)
		mask := maskWords(v)
		for i, id := range ids {
			t0 := time.Now()
			m.Mask(mask)
			d := time.Since(t0)
			if i == 0 {
				first = d
			}
			total += d
			if !bit(mask, id) {
				b.Fatalf("token %d (%q) not allowed", id, v.pieces[id])
			}
			if err := m.Accept(id); err != nil {
				b.Fatal(err)
			}
		}
		return first, total
	}
	report := func(b *testing.B, total, first, compile time.Duration) {
		b.ReportMetric(float64(total.Microseconds())/float64(b.N*len(ids)), "µs/mask")
		b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-mask-µs")
		if compile > 0 {
			b.ReportMetric(float64(compile.Microseconds())/float64(b.N), "compile-µs")
		}
	}
	b.Run("warm", func(b *testing.B) {
		g := mustSchema(b, toolSchema)
		run(b, q.vocab, g) // fill the caches
		var total, first time.Duration
		for b.Loop() {
			f, t := run(b, q.vocab, g)
			total += t
			first += f
		}
		report(b, total, first, 0)
	})
	b.Run("new-grammar", func(b *testing.B) {
		run(b, q.vocab, mustSchema(b, toolSchema))
		var total, first, compile time.Duration
		for b.Loop() {
			t0 := time.Now()
			g := mustSchema(b, toolSchema)
			compile += time.Since(t0)
			f, t := run(b, q.vocab, g)
			total += t
			first += f
		}
		report(b, total, first, compile)
	})
	b.Run("cold", func(b *testing.B) {
		var total, first, compile time.Duration
		for b.Loop() {
			v := NewVocab(q.vocab.pieces, q.vocab.eogIDs)
			t0 := time.Now()
			g := mustSchema(b, toolSchema)
			compile += time.Since(t0)
			f, t := run(b, v, g)
			total += t
			first += f
		}
		report(b, total, first, compile)
	})
}

// BenchmarkNodeTableQwen3 times the walk that fills one node's table: the
// body of a JSON string, where nearly every token of the vocabulary is
// allowed, so the walk visits nearly the whole trie (the worst case, paid
// once per process for the shared string rule).
func BenchmarkNodeTableQwen3(b *testing.B) {
	q := qwen(b)
	g := mustGBNF(b, `root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] )* "\""`)
	m := g.NewMatcher(q.vocab)
	if err := m.AcceptBytes([]byte(`"`)); err != nil {
		b.Fatal(err)
	}
	pos := int32(-1)
	for _, sk := range m.s.stacks {
		if m.t.g.nodes[sk.pos].set.has('a') {
			pos = sk.pos
		}
	}
	m.t.computePosInfo(pos) // memoize the transitions
	for b.Loop() {
		m.t.computePosInfo(pos)
	}
	b.ReportMetric(float64(len(q.vocab.nodeByte)), "trie-nodes")
}

func BenchmarkNewVocabQwen3(b *testing.B) {
	q := qwen(b)
	for b.Loop() {
		NewVocab(q.vocab.pieces, q.vocab.eogIDs)
	}
}
