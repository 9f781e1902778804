package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
)

// SpeedRun is one prefill + decode speed measurement.
type SpeedRun struct {
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	Threads      int     `json:"threads"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// WeightBytes are the weight bytes a decode step reads (every tensor
	// but the token embedding, of which it reads one row); DecodeGBs is
	// that times DecodeTokS: the bandwidth decoding draws, to set beside the
	// machine's (go test ./engine/tensor -bench Stream).
	WeightBytes int64   `json:"weight_bytes_per_token"`
	DecodeGBs   float64 `json:"decode_weight_gb_s"`
	// The time one forward pass takes: a decode step (one token), and a
	// prefill pass (up to prefillChunk tokens; PrefillPasses of them).
	DecodeStepMS  float64 `json:"decode_step_ms"`
	PrefillPassMS float64 `json:"prefill_pass_ms"`
	PrefillPasses int     `json:"prefill_passes"`
	// PrefillTensorCoreShare is the share of the prefill's matrix-product
	// multiply-adds that ran on cooperative matrices (tensor cores; GPU
	// only, 0 on the scalar path). Attention and the DeltaNet recurrence
	// run on scalar shaders and are not counted.
	PrefillTensorCoreShare float64 `json:"prefill_tensor_core_share"`
	// PrefillMACs is the multiply-adds of the prefill's matrix products
	// (GPU only): 2·PrefillMACs over the prefill time is its achieved rate.
	PrefillMACs int64 `json:"prefill_macs,omitempty"`
	// Verify16StepMS is one pass of 16 tokens after the decoded ones with
	// the logits of all 16, what verifying a 16-node draft costs (a tree
	// of 16 runs the same matrix products), the mean of up to three when
	// the context has room (0 when it has none); VerifyTensorCoreShare is
	// the share of its matrix multiply-adds on tensor cores (GPU only).
	Verify16StepMS        float64 `json:"verify16_step_ms"`
	VerifyTensorCoreShare float64 `json:"verify_tensor_core_share"`
}

// weightBytesPerToken sums the tensor bytes a decode step reads.
func (e *Engine) weightBytesPerToken() int64 {
	var b int64
	for _, t := range e.file.Tensors {
		if t.Name == "token_embd.weight" {
			if len(t.Shape) == 2 && t.Shape[1] > 0 {
				b += t.Size / t.Shape[1] // one row
			}
			continue
		}
		b += t.Size
	}
	if _, ok := e.file.Tensor("output.weight"); !ok { // tied LM head: the whole embedding is read
		if t, ok := e.file.Tensor("token_embd.weight"); ok {
			b += t.Size
		}
	}
	return b
}

// BenchPrompt is the deterministic prompt llama.cpp's reference bench
// (shared/tools/llamaref/bench.mjs) uses: ids cycling through a range every
// vocabulary has.
func BenchPrompt(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + (i*7919)%250)
	}
	return p
}

// MeasureSpeed measures prefill and greedy decode the way bench.mjs measures
// llama.cpp: prefill nPrompt tokens (timed), then evaluate the first prompt
// token again and decode nGen tokens ignoring EOS; decode speed is
// (nGen-1) tokens over the time from the first output token to the last.
func (e *Engine) MeasureSpeed(ctx context.Context, nPrompt, nGen int) (SpeedRun, error) {
	run := SpeedRun{PromptTokens: nPrompt, GenTokens: nGen, Threads: e.pool.Threads()}
	if nPrompt < 1 || nGen < 2 {
		return run, fmt.Errorf("bench needs at least 1 prompt token and 2 generated tokens")
	}
	if nPrompt+nGen+1 > e.ctxLen {
		return run, fmt.Errorf("%w: %d prompt + %d generated tokens, context %d", ErrContextFull, nPrompt, nGen, e.ctxLen)
	}
	prompt := BenchPrompt(nPrompt)
	q, err := e.acquire(ctx)
	if err != nil {
		return run, err
	}
	defer e.release(q)
	q.sequence()
	coop0, scalar0 := e.MatMulMACs()
	t0 := time.Now()
	if err := q.prefill(ctx, prompt, nil, nil); err != nil {
		return run, err
	}
	prefill := time.Since(t0)
	if coop1, scalar1 := e.MatMulMACs(); coop1+scalar1 > coop0+scalar0 {
		run.PrefillTensorCoreShare = float64(coop1-coop0) / float64(coop1-coop0+scalar1-scalar0)
		run.PrefillMACs = coop1 - coop0 + scalar1 - scalar0
	}
	one := []int32{prompt[0]}
	var tFirst time.Time
	for i := 0; i < nGen; i++ {
		if err := q.decode(one); err != nil {
			return run, err
		}
		one[0] = sample.Argmax(q.logits)
		if i == 0 {
			tFirst = time.Now()
		}
	}
	decode := time.Since(tFirst)
	if reps := min(3, (e.ctxLen-q.state.Len())/16); reps > 0 {
		toks := BenchPrompt(16)
		logits := make([]float32, 16*e.model.Hyper().Vocab)
		coop0, scalar0 := e.MatMulMACs()
		tv := time.Now()
		for i := 0; i < reps; i++ {
			if err := e.model.Forward(q.state, model.ChainBatch(toks, q.state.Len(), true), logits); err != nil {
				return run, err
			}
		}
		run.Verify16StepMS = time.Since(tv).Seconds() * 1000 / float64(reps)
		if coop1, scalar1 := e.MatMulMACs(); coop1+scalar1 > coop0+scalar0 {
			run.VerifyTensorCoreShare = float64(coop1-coop0) / float64(coop1-coop0+scalar1-scalar0)
		}
	}
	run.PrefillTokS = float64(nPrompt) / prefill.Seconds()
	run.DecodeTokS = float64(nGen-1) / decode.Seconds()
	run.PrefillPasses = (nPrompt + e.prefillChunk - 1) / e.prefillChunk
	run.PrefillPassMS = prefill.Seconds() * 1000 / float64(run.PrefillPasses)
	run.DecodeStepMS = decode.Seconds() * 1000 / float64(nGen-1)
	run.WeightBytes = e.weightBytesPerToken()
	run.DecodeGBs = float64(run.WeightBytes) * run.DecodeTokS / 1e9
	return run, nil
}

// ErrNoDevice is MeasureDeviceCopy on an engine that runs on the CPU.
var ErrNoDevice = errors.New("the engine runs on the CPU: no device to measure")

// MeasureDeviceCopy is the device's memory bandwidth in GB/s (bytes read
// plus bytes written per second / 1e9, GPU timestamps): reps copies of n
// bytes between two device buffers (n <= 0: 512 MiB, less on a device with
// under 4 GiB). A decode step only reads, so DecodeGBs / this is the share
// of the device's bandwidth decoding draws.
func (e *Engine) MeasureDeviceCopy(n int64, reps int) (float64, error) {
	d := e.placed.dev
	if d == nil {
		return 0, ErrNoDevice
	}
	if n <= 0 {
		n = min(512<<20, int64(d.Info().MemoryBytes)/8)
	}
	bw, err := d.CopyBandwidth(n&^15, max(reps, 1))
	return bw / 1e9, err
}
