// Raw logits of llama.cpp (node-llama-cpp 3.22.1 prebuilt CPU build, 1 thread) for a token
// sequence, as little-endian float32 rows of the whole vocabulary.
// Usage: [KV=F32] [FA=0] node logits.mjs MODEL.gguf 'TOKENS_JSON' MODE FIRST > out.f32
//   MODE "step":  tokens[0:half] as one batch (logits of its last token), then one token per batch;
//   MODE "batch": all tokens as one batch, logits of every position.
//   Rows before FIRST are dropped.
// Needs node-llama-cpp resolvable from this folder (symlink node_modules to /tmp/llamaref/node_modules).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
const [modelPath, toksJson, mode, firstArg] = process.argv.slice(2);
const toks = JSON.parse(toksJson);
const first = Number(firstArg ?? 0);
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const kv = process.env.KV ?? "F16";
const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1,
    ...(process.env.FA === "0" ? {flashAttention: false} : {}),
    experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv});
const seq = context.getSequence();
const req = {generateNext: {logits: {filter: {tokens: [], includeTop: 1 << 20}}}};
const rows = [];
if (mode === "batch") {
    const out = await seq.controlledEvaluate(toks.map(t => [t, req]));
    for (const o of out) rows.push(o.next.logits);
} else {
    const h = Math.floor(toks.length / 2);
    const out = await seq.controlledEvaluate(toks.slice(0, h).map((t, i) => i === h - 1 ? [t, req] : t));
    rows.push(out[h - 1].next.logits);
    for (let i = h; i < toks.length; i++) {
        const o = await seq.controlledEvaluate([[toks[i], req]]);
        rows.push(o[0].next.logits);
    }
}
const vocab = rows[0].size;
const buf = new Float32Array((rows.length - first) * vocab);
rows.slice(first).forEach((m, r) => { for (const [id, v] of m) buf[r * vocab + id] = v; });
process.stdout.write(Buffer.from(buf.buffer));
await context.dispose(); await model.dispose(); await llama.dispose();
