// Package speculative decodes several tokens per target forward pass:
// drafters propose continuations of the sequence, a tree builder merges
// them, and the target verifies the whole tree in one batch-with-parents
// pass (engine/model), keeping the longest path it agrees with.
//
// Drafters: the model's MTP head, chained greedily for Config.Steps with
// each depth's top-k kept (its own small KV cache, fed the target's hidden
// states of accepted tokens), and a suffix drafter without weights that
// proposes what followed the context's last tokens earlier in this request
// or in earlier requests' prompts and outputs (a bounded stream with a
// hash chain per token pair). The tree is grown best-first by cumulative
// log-probability up to Config.VerifyNodes; linear mode is a single chain.
//
// FitMTP gives a model without a head (a llama such as stories260K) one,
// by ridge regression on the model's own generations (`edgellmd draft
// fit`); Measure reports how many drafts a model accepts.
//
// Greedy acceptance emits exactly the tokens plain greedy decoding emits;
// with temperature the multi-draft rejection rule keeps the target's
// distribution. The package does not sample the first token, tokenise, or
// decide when to stop: engine.Generate does.
package speculative
