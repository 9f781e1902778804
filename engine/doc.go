// Package engine is the inference engine's face: load a GGUF model (mapped,
// not copied) with its tokenizer, place it on the CPU or a GPU (device.go;
// the GPU twin comes from engine/gpu), and run generations that stream
// tokens as they are decoded, several at once, behind a bounded queue
// (Scheduler). The rest of edgellmd (web, engine/turn, daemon, cmd) reaches
// the model through this package; it knows nothing of HTTP, chat
// templates or the daemon.
//
// Its files: engine.go (Options, Load, Close, what a loaded engine says of
// itself), generate.go (Request, Token, Result and the generation loop:
// restore from the prefix cache, prefill in chunks, decode), draft.go
// (the draft parameters in force and the drafting loop), seq.go (a
// sequence slot's state and the slot pool's glue), scheduler.go (the
// queue in front of the slots), device.go (where the passes run, and the
// fingerprint of that arithmetic), bench.go (edgellmd bench's speed runs).
//
// The rooms below it, each a package that knows nothing of this one:
//
//   - engine/batch: the one goroutine that runs the model, gathering the
//     running sequences' steps into shared forward passes, with the
//     per-pass time budget for prompt chunks and the panic guard.
//   - engine/slots: the sequence slots and admission by memory (a pool
//     behind its own lock, and the state-size arithmetic).
//   - engine/logits: logit shaping (grammar constraints, lazy triggers,
//     penalties) and log-probabilities, with the vocabulary they need,
//     built once per model.
//   - engine/speculative: drafters, draft trees and verification, and the
//     draft parameters' one type (speculative.Config).
//
// The cut follows what changes together and what has its own lock or
// goroutine: the batcher owns the model and its own goroutine, the pool
// owns the slots' bookkeeping under its lock, the shaper is per request
// and pure over a logits row; the face keeps what ties them to one
// request's life (generate.go) and the objects' construction (Load).
// Below them are engine/model (the CPU forward passes), engine/gpu,
// engine/tensor (kernels), engine/tokenizer, engine/grammar,
// engine/sample, engine/state (the prefix cache) and engine/gguf.
package engine
