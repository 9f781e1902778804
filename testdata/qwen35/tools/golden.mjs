// Greedy (temperature 0) continuations from llama.cpp (node-llama-cpp prebuilt CPU build),
// used as the reference that the project's own engine must reproduce token for token.
// Usage: node golden.mjs MODEL.gguf PROMPTS.txt N_TOKENS > out.jsonl   (one prompt a line)
// KV=F32 (or F16, the default, or Q8_0) sets the KV cache type, to compare like with like.
// FA=0 turns flash attention off. (This line and the FA switch are the only changes from
// ../../../shared/tools/llamaref/golden.mjs: with flash attention on, which is llama.cpp's
// choice on CPU, llama.cpp casts an F32 KV cache to F16 before attention, so KV=F32 only
// takes effect with FA=0.)
// IGNORE_EOS=1 keeps generating past end-of-generation tokens (N tokens exactly), like `run --ignore-eos`.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [modelPath, promptsPath, nArg] = process.argv.slice(2);
const nGen = Number(nArg ?? 64);
const prompts = readFileSync(promptsPath, "utf8").split("\n").filter(l => l.length > 0);
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
for (const prompt of prompts) {
    const kv = process.env.KV ?? "F16";
    const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 1,
        ...(process.env.FA === "0" ? {flashAttention: false} : {}),
        experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv});
    const seq = context.getSequence();
    let toks = model.tokenize(prompt, false);
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) toks = [model.tokens.bos, ...toks];
    const gen = [];
    const ignoreEos = process.env.IGNORE_EOS === "1";
    for await (const t of seq.evaluate(toks, {temperature: 0, yieldEogToken: ignoreEos})) {
        gen.push(t);
        if (gen.length >= nGen || (!ignoreEos && t === model.tokens.eos)) break;
    }
    console.log(JSON.stringify({prompt, prompt_tokens: toks, tokens: gen, text: model.detokenize(gen)}));
    await context.dispose();
}
await model.dispose();
await llama.dispose();
