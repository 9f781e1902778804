// Checks one synthetic model's goldens: every llama.cpp configuration gave the same tokens, and
// the margins are clear. Usage: node check.mjs DIR  (DIR as written by make.sh)
// Prints a summary line and exits 1 when the model fails the criterion of ../README.md:
// identical tokens in all four configurations, min margin >= 0.1 (default configuration), and
// at every position margin >= 10 x |margin(F16 KV, flash attention) - margin(F32 KV, no flash attention)|.
import {readFileSync} from "node:fs";

const dir = process.argv[2];
const jsonl = f => readFileSync(`${dir}/${f}`, "utf8").split("\n").filter(Boolean).map(l => JSON.parse(l));
const configs = ["f16kv", "f32kv", "fa-f32kv", "nofa-f16kv"];
const goldens = Object.fromEntries(configs.map(c => [c, jsonl(`golden-${c}.jsonl`)]));
let same = true;
for (const c of configs.slice(1))
    goldens[c].forEach((g, i) => { if (JSON.stringify(g.tokens) !== JSON.stringify(goldens.f16kv[i].tokens)) same = false; });
const ma = jsonl("margins-f16kv.jsonl"), mb = jsonl("margins-f32kv.jsonl");
const sa = ma.pop(), sb = mb.pop();
let minRatio = Infinity, maxDelta = 0;
ma.forEach((p, i) => p.margins.forEach((m, j) => {
    const d = Math.abs(m - mb[i].margins[j]);
    maxDelta = Math.max(maxDelta, d);
    minRatio = Math.min(minRatio, m / Math.max(d, 1e-9));
}));
const distinct = goldens.f16kv.map(g => new Set(g.tokens).size);
const ok = same && sa.min >= 0.1 && minRatio >= 10 && sa.argmax_mismatches === 0 && sb.argmax_mismatches === 0;
console.log(JSON.stringify({ok, same_tokens_all_configs: same, f16kv: sa, f32kv: sb,
    max_margin_delta: maxDelta, min_margin_over_delta: minRatio, distinct_tokens_per_prompt: distinct}));
process.exit(ok ? 0 : 1);
