// llama.cpp's top logits on one golden prompt, the prompt fed in ubatches of UB tokens (0: the
// whole prompt as one batch, as golden.mjs does), then the golden's tokens one a step (teacher
// forcing): a line "p" for the prompt's last position, then line i after golden token i (the
// logits that choose token i+1). To compare llama.cpp's batch shapes with each other and with the
// engine's logits (docs/performance/kquants.md, "Exactness").
// Usage: node logits.mjs MODEL.gguf GOLDEN.jsonl INDEX UB STEPS [TOP=3]
// Needs node-llama-cpp 3.22.1 resolvable from this file's folder, AVX2 variant only (make.sh).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [modelPath, goldenPath, index, ubArg, stepsArg, topArg] = process.argv.slice(2);
const g = readFileSync(goldenPath, "utf8").split("\n").filter(l => l.length > 0).map(l => JSON.parse(l))[Number(index)];
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1,
    experimentalKvCacheKeyType: "F16", experimentalKvCacheValueType: "F16"});
const seq = context.getSequence();
const spec = {generateNext: {logits: {filter: {tokens: [], includeTop: Number(topArg ?? 3)}}}};
const p = g.prompt_tokens;
const ub = Number(ubArg) || p.length;
let out;
for (let at = 0; at < p.length; at += ub)
    out = await seq.controlledEvaluate(p.slice(at, at + ub).map((t, i) => at + i === p.length - 1 ? [t, spec] : t));
const show = (label, o) => console.log(label, [...o.next.logits.entries()].map(([t, v]) => `${t}:${v.toPrecision(9)}`).join(" "));
show("p", out[out.length - 1]);
for (let i = 0; i < Number(stepsArg) && i < g.tokens.length; i++) {
    out = await seq.controlledEvaluate([[g.tokens[i], spec]]);
    show(i, out[0]);
}
await context.dispose();
await model.dispose();
await llama.dispose();
