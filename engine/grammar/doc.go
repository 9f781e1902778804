// Package grammar constrains decoding to a grammar: at each step it gives
// the exact set of vocabulary tokens that keep the output inside the
// grammar's language, and it advances by token.
//
// Exact means: token t is allowed iff the output's bytes so far followed by
// t's bytes are a prefix of some sentence of the language. Tokens of
// byte-level BPE vocabularies cross grammar symbols and even UTF-8
// characters, so the package works on bytes throughout: character classes
// are compiled to the byte-range sequences of their UTF-8 encodings (as
// regex engines do), and a token that ends inside a character is allowed
// when some character of the class starts with those bytes.
//
// It is not a sampler, a tokenizer or a tool-call parser: it answers masks
// for a Vocab (token bytes, built once per model with NewVocab) and the
// decode loop applies them.
//
// # Grammars
//
// ParseGBNF reads llama.cpp's GBNF dialect (its grammars/README.md): rules
// "name ::= alternatives" with names of [a-zA-Z0-9-], start rule root;
// alternatives with |, sequences, groups ( ), string literals "..." and
// character classes [a-z] [^"\\] with the escapes \n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH (every escape names a code point, so \xFF is U+00FF),
// . for any character, repetitions * + ? {m} {m,} {m,n} (counts up to
// 10,000), comments from # to the end of the line. A rule continues on the
// next line inside parentheses, after | or ::=, and, beyond llama.cpp, on a
// next line that starts with |. Characters are Unicode scalar values: a
// class never matches a surrogate, and a negated class matches the other
// scalars, as valid UTF-8 only. Errors are *SyntaxError with the line and
// column: syntax, undefined rules (at the reference), rules defined twice,
// no root rule, an empty grammar, left recursion and rules that can never
// end (both named), and grammars too large once repetitions are expanded
// (more than about a million automaton nodes or half a million transitions).
//
// SchemaToGBNF turns a JSON schema into GBNF rules under a name prefix, so
// that several schemas can share one grammar text; FromJSONSchema compiles
// one schema on its own; JSONObject is any JSON object (OpenAI's
// json_object response format). Errors are *SchemaError with a JSON pointer
// into the schema and the keyword at fault. Supported:
//
//   - type: string, number, integer, boolean, null, object, array, or a list
//     of them; without type, the types the other keywords are about (any
//     value when there are none);
//   - properties (in the schema's order), required (the others may be left
//     out, and the order is kept), additionalProperties: false, true or a
//     schema. Absent, it means false when properties is given (the output
//     keeps to the declared keys) and true otherwise, so {"type":"object"}
//     is any object. Other properties come after the declared ones and have
//     keys of raw characters (no escapes) that are none of the declared
//     names;
//   - items (a schema or false), prefixItems, minItems, maxItems;
//   - enum and const of any JSON values (written compactly, as in the
//     schema), filtered by type;
//   - anyOf and oneOf as alternatives (oneOf is exact only when its branches
//     do not overlap, e.g. differ in type or const), allOf with one schema;
//   - $ref to "#", "#/$defs/...", "#/definitions/..." or any JSON pointer
//     into the schema, recursion included (a schema with no finite value is
//     an error); $id is not followed, so references resolve against the
//     whole document;
//   - minLength, maxLength (code points: an escaped surrogate pair counts
//     once, a lone surrogate escape is not produced);
//   - format date, time, date-time and uuid (RFC 3339 without leap seconds;
//     dates with day 29-31 only in months that always have them, so no
//     February 29);
//   - minimum, maximum, exclusiveMinimum, exclusiveMaximum on integers; on
//     numbers only minimum 0 and exclusiveMinimum 0;
//   - description, title, examples, default, $schema, $id, $comment,
//     deprecated, readOnly, writeOnly are annotations and ignored.
//
// Everything else is refused with a SchemaError naming the keyword: pattern
// (no regex subset), other formats, multipleOf, uniqueItems,
// minProperties, maxProperties, patternProperties, propertyNames, not,
// if/then/else, dependentRequired, contains, items as an array, and
// anyOf, oneOf, allOf, $ref, enum or const beside keywords that would have
// to be intersected with them.
//
// The JSON written is a subset of what the schema accepts, chosen so that a
// model cannot write forever: between tokens at most one blank, or one
// newline and up to 20 blanks; no leading or trailing whitespace around the
// value; integers of at most 16 digits, fractions of at most 16, exponents
// of at most 2; strings with JSON escapes (\uXXXX included) and no raw
// control characters.
//
// # Matching
//
// A grammar compiles to a recursive transition network: one automaton per
// rule, whose nodes read a byte from a set or call a rule, with successor
// sets already closed over empty moves. Small rules without loops (up to 64
// nodes; up to 1,024 when called inside a loop) are copied into their
// callers: a string's character rule into the string rule, so the whole
// string body is one frame; a number, whitespace or an enum into the object
// around it. Rules with loops stay called, so their tables are shared.
//
// A Matcher's state is the set of pushdown stacks of rule positions that the
// bytes so far can have led to, kept as a graph-structured stack (stacks
// with the same top share it, so an ambiguous grammar does not multiply
// them). Stacks and states are persistent and interned per (Grammar, Vocab),
// so a state is a pointer, Clone is O(1), and each state memoizes its byte
// transitions and, when it was costly, its mask.
//
// Masks follow xgrammar's idea, re-derived: for every node that can top a
// stack, one walk of the vocabulary's token trie, from the node's frame
// alone, finds the tokens that frame accepts whatever is below it and the
// trie nodes where the frame returns with bytes left. A mask is then the OR
// of the top nodes' accepted sets plus, for each return point, a walk of the
// trie below it from the state the stack returns into; these are few and
// short because of the copying above. The node tables depend only on the
// sub-grammar a node's rule reaches, so they are keyed by a hash of it and
// kept in the Vocab too: grammars compiled later for the same schema, or
// any schema with the same string rule, find them computed.
//
// # Speed
//
// BenchmarkMaskQwen3ToolSchema (Qwen3 vocabulary, 151,669 tokens; a nested
// tool-call schema; the mask before each of the 85 tokens of a call) on a
// 2-core AMD EPYC: about 0.35 µs per mask with a kept grammar (mostly a
// copy of a cached mask); about 7 µs per mask with a grammar compiled per
// request from the same schema (compile about 0.5 ms, first mask about
// 0.25 ms); about 75 µs per mask averaged over the first request after
// start-up, whose masks include the first walks of the trie. The widest
// walk, a string's body, where nearly every token is allowed, visits the
// whole trie (333,083 nodes) in about 2.2 ms (BenchmarkNodeTableQwen3), once
// per process. NewVocab takes about 55 ms for Qwen3. Figures were two to
// four times slower while other jobs loaded the machine.
//
// Costs to know: each position of a long bounded repetition, such as a
// string with maxLength 100, is its own node and gets its own trie walk the
// first time it is reached (shared across grammars); nested repetitions of
// things that may be empty, such as (.*){100}, make wide states.
//
// # Caches
//
// Everything cached is bounded: per (Grammar, Vocab) the intern tables
// (65,536 states, 131,072 stacks; past that they start afresh, and existing
// matchers stay valid), cached masks (16 MiB) and node tables (32 MiB); per
// Vocab the shared node tables (64 MiB). A Grammar is safe for concurrent
// use; keep one per schema or tool list, and one JSONObject per process, to
// reuse their caches. A Matcher is not safe for concurrent use; its clones
// are independent.
package grammar
