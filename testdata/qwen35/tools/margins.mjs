// Top-1 minus top-2 logit margin of llama.cpp at every position of a golden file.
// Usage: [KV=F32] [FA=0] node margins.mjs MODEL.gguf GOLDEN.jsonl > margins.jsonl
// For each golden line it feeds prompt_tokens + tokens[:-1] as one batch (teacher forcing) and
// reads the two largest raw logits at the last prompt position and at every generated one, so
// margins[i] belongs to tokens[i]. Prints one line per prompt {prompt, argmax, margins} and a
// final summary line {positions, argmax_mismatches, min, p01, p05, median, max}; argmax_mismatches
// counts positions where this batched pass's argmax is not the golden (incremental) token.
// Needs node-llama-cpp 3.22.1 resolvable from this file's folder (see ../README.md).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [modelPath, goldenPath] = process.argv.slice(2);
const lines = readFileSync(goldenPath, "utf8").split("\n").filter(l => l.length > 0).map(l => JSON.parse(l));
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const kv = process.env.KV ?? "F16";
const all = [];
let mismatches = 0;
for (const g of lines) {
    const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1,
        ...(process.env.FA === "0" ? {flashAttention: false} : {}),
        experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv});
    const seq = context.getSequence();
    const input = [...g.prompt_tokens, ...g.tokens.slice(0, -1)];
    const first = g.prompt_tokens.length - 1;
    const items = input.map((t, i) => i >= first
        ? [t, {generateNext: {logits: {filter: {tokens: [], includeTop: 2}}}}] : t);
    const out = await seq.controlledEvaluate(items);
    const margins = [], argmax = [];
    for (let i = first; i < input.length; i++) {
        const top = [...out[i].next.logits.entries()];
        margins.push(top[0][1] - top[1][1]);
        argmax.push(top[0][0]);
        if (top[0][0] !== g.tokens[i - first]) mismatches++;
    }
    all.push(...margins);
    console.log(JSON.stringify({prompt: g.prompt, argmax, margins}));
    await context.dispose();
}
all.sort((a, b) => a - b);
const q = p => all[Math.min(all.length - 1, Math.floor(p * all.length))];
console.log(JSON.stringify({positions: all.length, argmax_mismatches: mismatches,
    min: all[0], p01: q(0.01), p05: q(0.05), median: q(0.5), max: all[all.length - 1]}));
await model.dispose();
await llama.dispose();
