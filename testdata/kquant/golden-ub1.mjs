// Greedy continuations of llama.cpp with every token in a ubatch of its own: the prompt fed one
// token at a time, then one token a step, as many tokens as GOLDEN.jsonl's line has (past EOS). The shape at which
// llama.cpp's arithmetic is that of its decode steps for every block type (its prompt batches
// take other kernels for some: see docs/performance/kquants.md, "Exactness").
// Usage: node golden-ub1.mjs MODEL.gguf GOLDEN.jsonl > out.jsonl
// The prompts and their tokens are GOLDEN.jsonl's (golden.mjs's output for the same file), and the
// lines are written as golden.mjs writes them, so that where the tokens agree the files are equal.
// Needs node-llama-cpp 3.22.1 resolvable from this file's folder, AVX2 variant only (make.sh).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [modelPath, goldenPath] = process.argv.slice(2);
const lines = readFileSync(goldenPath, "utf8").split("\n").filter(l => l.length > 0).map(l => JSON.parse(l));
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const top1 = {generateNext: {logits: {filter: {tokens: [], includeTop: 1}}}};
for (const g of lines) {
    const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1,
        experimentalKvCacheKeyType: "F16", experimentalKvCacheValueType: "F16"});
    const seq = context.getSequence();
    const p = g.prompt_tokens;
    let out;
    for (let i = 0; i < p.length; i++)
        out = await seq.controlledEvaluate([i === p.length - 1 ? [p[i], top1] : p[i]]);
    const gen = [];
    for (;;) {
        const t = [...out[0].next.logits.keys()][0];
        gen.push(t);
        if (gen.length >= g.tokens.length) break;
        out = await seq.controlledEvaluate([[t, top1]]);
    }
    console.log(JSON.stringify({prompt: g.prompt, prompt_tokens: p, tokens: gen, text: model.detokenize(gen)}));
    await context.dispose();
}
await model.dispose();
await llama.dispose();
