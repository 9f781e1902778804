package batch

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
)

// The per-pass token budget for prefill beside decode (Sarathi-Serve's
// stall-free batching, Agrawal et al. 2024; vLLM's chunked prefill with a
// token budget): a pass that carries decode steps and a prompt chunk takes
// as long as its slowest part allows, so every decoding sequence's next
// token waits for the whole chunk. The batcher therefore cuts the chunk so
// that the pass is predicted to take at most DecodeSlowdown times a
// decode-only pass of the same sequences, and when even the smallest
// piece it may cut costs more, lets the piece wait for passes that save
// up for it (batcher.budget). The prediction is measured: an EMA of the
// decode-only pass time per batch size, and an EMA of what a prompt token
// adds to a pass, with the attention part growing with the chunk's
// position in the prompt (passCost).

// MinPrefillChunk is the fewest prompt tokens a pass beside decode steps
// carries (when Options.PrefillChunk allows as many), so that a prompt
// always progresses whatever the budget says. It is small because on a CPU
// a prompt token costs a good part of a decode step: on the bench model
// (2 threads) 16 tokens beside two decoding sequences make a pass 4x a
// decode-only one. (Not 1: a one-token pass is a decode step, which
// attends another way over an F32 cache; TestPrefillPiecesExact checks
// that it does.) Smaller pieces would keep the bits (one token over F16
// and FP8, two over F32: TestPrefillPiecesExact passed with those floors
// in place of this one) but cost more per token deep in a long prompt,
// where each piece walks the whole cache: on a Zen 3 (2 threads) one-token
// pieces made a 16k prompt beside two decoders prefill 31% slower for a
// p90 TPOT 13% lower.
const MinPrefillChunk = 4

const (
	decodeEMA = 0.2 // weight of a new decode-only pass time
	tokenEMA  = 0.2 // weight of a new per-token cost
)

// passCost predicts pass times from the passes measured so far. It is the
// batcher's own (one goroutine).
//
// A prompt chunk of n tokens from position pos adds to a pass
// perToken * (n + keyCost*keys), keys = the keys its tokens attend to
// (chunkKeys). keyCost is what attending to one key costs against a
// token's matrix products, from the model's shape (attention FLOPs per key
// over linear FLOPs per token); perToken is measured: an EMA of what
// chunks added to passes over the decode-only pass of the same sequences.
// As a prompt is prefilled in order, the EMA follows the current
// position, so a keyCost off by the kernels' relative speed costs little.
type passCost struct {
	// decode[k] is the EMA of a decode-only pass of k sequences, seconds;
	// 0 while none was measured.
	decode   [MaxStatSize + 1]float64
	keyCost  float64
	perToken float64 // seconds; 0 while unknown
}

func newPassCost(keyCost float64) *passCost { return &passCost{keyCost: keyCost} }

// KeyCost is Options.KeyCost for a model file: keyCostOf its shape over
// its decoder layers' linear weights.
func KeyCost(hp model.Hyper, f *gguf.File) float64 { return keyCostOf(hp, linearWeights(f, hp.Layers)) }

// keyCostOf is passCost.keyCost for a model: attention does 4*head_dim
// FLOPs per head and key (q.k and the weighted v), the matrix products 2
// per weight, for linearWeights weights per token.
func keyCostOf(hp model.Hyper, linearWeights int64) float64 {
	if linearWeights <= 0 {
		return 0
	}
	attn := 0
	for i := range hp.Layers {
		if i >= len(hp.Recurrent) || !hp.Recurrent[i] {
			attn++
		}
	}
	return float64(4*attn*hp.Heads*hp.HeadDim) / float64(2*linearWeights)
}

// linearWeights counts the weights of the decoder layers' matrices (a
// prompt token's matrix products; not the embedding, the output head that
// runs once per chunk, or an MTP block).
func linearWeights(f *gguf.File, layers int) int64 {
	var n int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		var blk int
		if len(t.Shape) != 2 || t.Shape[1] < 2 {
			continue
		}
		if _, err := fmt.Sscanf(t.Name, "blk.%d.", &blk); err != nil || blk >= layers || strings.Contains(t.Name, "nextn") {
			continue
		}
		n += t.Shape[0] * t.Shape[1]
	}
	return n
}

// chunkKeys is the attention work of a chunk of n prompt tokens from
// position pos: each token attends to the keys up to itself.
func chunkKeys(n, pos int) float64 {
	return float64(n)*float64(pos) + float64(n)*float64(n+1)/2
}

// fixed is the predicted decode-only pass of k sequences (k >= 1), from
// the nearest batch size measured; 0 when none was.
func (c *passCost) fixed(k int) float64 {
	k = min(max(k, 1), MaxStatSize)
	for d := 0; d <= MaxStatSize; d++ {
		if k-d >= 1 && c.decode[k-d] > 0 {
			return c.decode[k-d]
		}
		if k+d <= MaxStatSize && c.decode[k+d] > 0 {
			return c.decode[k+d]
		}
	}
	return 0
}

// observe records a pass of decoders sequences that are not prefilling
// (the others' decode or verify steps) and prompt chunks of tokens tokens
// with keys attention keys in all, which took el.
func (c *passCost) observe(decoders, tokens int, keys float64, el time.Duration) {
	s := el.Seconds()
	if tokens == 0 {
		if decoders > 0 {
			k := min(decoders, MaxStatSize)
			if c.decode[k] == 0 {
				c.decode[k] = s
			} else {
				c.decode[k] += decodeEMA * (s - c.decode[k])
			}
		}
		return
	}
	base := c.fixed(decoders) // a prompt alone still reads the weights: about a 1-sequence pass
	if base == 0 {
		return
	}
	u := (s - base) / (float64(tokens) + c.keyCost*keys)
	if c.perToken == 0 {
		if u > 0 {
			c.perToken = u
		}
		return
	}
	// A pass slowed by something else (another process on the cores)
	// moves the estimate by a bounded step.
	u = min(max(u, c.perToken/2), 2*c.perToken)
	c.perToken += tokenEMA * (u - c.perToken)
}

// extra is the predicted time n prompt tokens from position pos add to a
// pass; ok is false while nothing was measured.
func (c *passCost) extra(n, pos int) (s float64, ok bool) {
	if c.perToken == 0 {
		return 0, false
	}
	return c.perToken * (float64(n) + c.keyCost*chunkKeys(n, pos)), true
}

// chunk is how many of want prompt tokens from position pos fit in budget
// seconds beside the other sequences, cutting them into pieces of at least
// lo tokens (the one that runs and the rest; all want when they cannot be
// cut so); lo while the cost is not known yet.
func (c *passCost) chunk(want, pos, lo int, budget float64) int {
	if want < 2*lo {
		return want
	}
	if s, ok := c.extra(want, pos); ok && s <= budget {
		return want
	}
	if s, ok := c.extra(lo, pos); !ok || s >= budget {
		return lo
	}
	// extra grows with n: the largest n in [lo, want-lo] within budget.
	hi := want - lo
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s, _ := c.extra(mid, pos); s <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
