package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/quantize"
	"github.com/edgellmd/edgellmd/engine/synth"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// BenchmarkModel27B is `edgellmd bench decode` inside the test binary, for
// a GPU machine that can take the test binary but not edgellmd (the
// device tool's carry limit): a synthetic model with the 27B model's layer
// shapes and vocabulary (EDGELLMD_BENCH_LAYERS layers, default 2; type
// EDGELLMD_BENCH_TYPE, default Q8_0; F16, BF16, F32 or NVFP4, with
// EDGELLMD_BENCH_ACT=nvfp4 for W4A4, or Q4_K_M: random K-quant blocks,
// kqRandomFile), and with gpu_matmul scalar and
// coopmat (and coopmat_fa: attention on cooperative matrices too): prefill of 512 tokens in passes of 256 (engine.DefaultPrefillChunk)
// in tok/s, the matrix products' TFLOPS and share on tensor cores, a decode
// step and the GB/s of weights it reads (against the copy bandwidth), and
// a 16-token verify pass (all 16 logits) against a decode step.
//
//	go test ./engine/gpu -run '^$' -bench Model27B -benchtime 1x
func BenchmarkModel27B(b *testing.B) {
	d := testDevice(b)
	if d.Info().Kind == KindCPU && os.Getenv("EDGELLMD_BENCH_LAYERS") == "" {
		b.Skip("the 27B shapes need a GPU (lavapipe's bindings hold 128 MiB): set EDGELLMD_BENCH_LAYERS to try")
	}
	layers, typ := 2, "Q8_0"
	if s := os.Getenv("EDGELLMD_BENCH_LAYERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("EDGELLMD_BENCH_LAYERS=%q: want a layer count", s)
		}
		layers = n
	}
	if s := os.Getenv("EDGELLMD_BENCH_TYPE"); s != "" {
		typ = s
	}
	size := "27b"
	if d.Info().Kind == KindCPU {
		size = "bench" // lavapipe: the 0.8B head geometry, to try the benchmark
	}
	// NVFP4: the synthetic F16 model quantized as `edgellmd quantize` does,
	// run with Q8_0 activations (W4A8), or NVFP4 ones (W4A4) when
	// EDGELLMD_BENCH_ACT=nvfp4.
	synthType, act := typ, tensor.NVFP4ActQ8
	if typ == "Q4_K_M" { // random K-quant blocks in the F16 file's shapes (kqRandomFile)
		synthType = "F16"
	}
	if typ == "NVFP4" {
		synthType = "F16"
		if os.Getenv("EDGELLMD_BENCH_ACT") == "nvfp4" {
			act = tensor.NVFP4ActFP4
		}
	}
	path := filepath.Join(b.TempDir(), fmt.Sprintf("%s-%dl-%s.gguf", size, layers, synthType))
	t0 := time.Now()
	if err := synth.Write(path, synth.Options{Size: size, Type: synthType, Layers: layers, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if typ == "NVFP4" {
		dst := path + ".nvfp4.gguf"
		if _, err := quantize.QuantizeFile(path, dst, quantize.Options{Type: tensor.NVFP4}); err != nil {
			b.Fatal(err)
		}
		path = dst
	}
	if typ == "Q4_K_M" {
		path = kqRandomFile(b, path)
	}
	b.Logf("synth %s %d layers %s: %s", size, layers, typ, time.Since(t0).Round(time.Millisecond))
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	var weightBytes int64 // what a decode step reads: every tensor but one row of the embedding
	for _, t := range f.Tensors {
		if t.Name == "token_embd.weight" && len(t.Shape) == 2 && t.Shape[1] > 0 {
			weightBytes += t.Size / t.Shape[1]
		} else {
			weightBytes += t.Size
		}
	}
	f.Close()
	copyBW, err := d.CopyBandwidth(256<<20, 10)
	if err != nil {
		b.Fatal(err)
	}
	_, gm := loadPair(b, path, tensor.F16, act)
	V := gm.Hyper().Vocab
	const nPrompt, chunk, nGen, ctxLen = 512, 256, 32, 1024
	prompt := make([]int32, nPrompt)
	for i := range prompt {
		prompt[i] = int32(1 + (i*7919)%(V-1))
	}
	logits := make([]float32, 16*V)
	defer func() {
		d.attCoopMin, d.skinnyMin = attCoopMinTokens, mmSkinnyMinVectors
		d.SetMatMul(MatMulAuto)
	}()
	// coopmat_fa: coopmat with attention on cooperative matrices too
	// (attention_cm.comp, which coopmat runs for prefill chunks only:
	// Device.attCoopMin), decode steps and verify trees included.
	// coopmat_skinny: coopmat with passes below 64 vectors (decode steps,
	// verify trees) on the skinny tile shaders too (off by default:
	// mmSkinnyMinVectors).
	for _, run := range []string{MatMulScalar, MatMulCoopMat, "coopmat_fa", "coopmat_skinny"} {
		mm := run
		if run == "coopmat_fa" || run == "coopmat_skinny" {
			mm = MatMulCoopMat
		}
		if err := d.SetMatMul(mm); err != nil {
			b.Logf("%s: %v", mm, err)
			continue
		}
		d.attCoopMin, d.skinnyMin = attCoopMinTokens, mmSkinnyMinVectors
		switch run {
		case "coopmat_fa":
			d.attCoopMin = 1
		case "coopmat_skinny":
			d.skinnyMin = 1
		}
		b.Run(run, func(b *testing.B) {
			var prefill, decode, verify time.Duration
			var prefillMACs, prefillCoop, verifyMACs, verifyCoop int64
			for i := 0; i < b.N; i++ {
				st := gm.NewState(ctxLen)
				m0 := d.MatMulMACs()
				t0 := time.Now()
				for p := 0; p < nPrompt; p += chunk {
					if err := gm.Forward(st, model.ChainBatch(prompt[p:p+chunk], p, false), logits[:V]); err != nil {
						b.Fatal(err)
					}
				}
				prefill += time.Since(t0)
				m1 := d.MatMulMACs()
				prefillMACs += m1.CoopMat + m1.Scalar - m0.CoopMat - m0.Scalar
				prefillCoop += m1.CoopMat - m0.CoopMat
				one := []int32{prompt[0]}
				if err := gm.Forward(st, model.ChainBatch(one, st.Len(), false), logits[:V]); err != nil { // warm
					b.Fatal(err)
				}
				t1 := time.Now()
				for s := 0; s < nGen; s++ {
					one[0] = argmax(logits[:V])
					if err := gm.Forward(st, model.ChainBatch(one, st.Len(), false), logits[:V]); err != nil {
						b.Fatal(err)
					}
				}
				decode += time.Since(t1)
				m2 := d.MatMulMACs()
				t2 := time.Now()
				for r := 0; r < 3; r++ {
					if err := gm.Forward(st, model.ChainBatch(prompt[16*r:16*r+16], st.Len(), true), logits); err != nil {
						b.Fatal(err)
					}
				}
				verify += time.Since(t2)
				m3 := d.MatMulMACs()
				verifyMACs += m3.CoopMat + m3.Scalar - m2.CoopMat - m2.Scalar
				verifyCoop += m3.CoopMat - m2.CoopMat
			}
			n := float64(b.N)
			stepMS := decode.Seconds() * 1000 / (n * nGen)
			verifyMS := verify.Seconds() * 1000 / (n * 3)
			b.ReportMetric(n*nPrompt/prefill.Seconds(), "prefill_tok/s")
			b.ReportMetric(2*float64(prefillMACs)/prefill.Seconds()/1e12, "prefill_TFLOPS")
			b.ReportMetric(float64(prefillCoop)/float64(max(prefillMACs, 1)), "prefill_tensor_core_share")
			b.ReportMetric(stepMS, "decode_ms/step")
			b.ReportMetric(float64(weightBytes)/(stepMS/1000)/1e9, "decode_GB/s")
			b.ReportMetric(float64(weightBytes)/(stepMS/1000)/copyBW, "decode_of_copy")
			b.ReportMetric(verifyMS, "verify16_ms")
			b.ReportMetric(verifyMS/stepMS, "verify16/decode")
			b.ReportMetric(float64(verifyCoop)/float64(max(verifyMACs, 1)), "verify_tensor_core_share")
		})
	}
	b.Logf("copy bandwidth %.1f GB/s; %d weight bytes per decode step", copyBW/1e9, weightBytes)
}

// BenchmarkLoadInPlace measures what importing the mapped file's weights
// saves on a device whose memory is the host's (Jetson, integrated GPUs,
// lavapipe): the time to build the GPU model and the device memory it
// holds, weights in place against copied, on a synthetic model of the
// 0.8B head geometry (bench size, EDGELLMD_BENCH_LAYERS layers, default
// 4, Q8_0).
//
//	go test ./engine/gpu -run '^$' -bench LoadInPlace -benchtime 3x
func BenchmarkLoadInPlace(b *testing.B) {
	d := testDevice(b)
	if !d.sharesHostMemory() {
		b.Skipf("%s: weights are copied on this device", d.Info().Name)
	}
	layers := 4
	if s := os.Getenv("EDGELLMD_BENCH_LAYERS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			layers = n
		}
	}
	path := filepath.Join(b.TempDir(), "bench.gguf")
	if err := synth.Write(path, synth.Options{Size: "bench", Type: "Q8_0", Layers: layers, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	cpu, _ := loadPair(b, path, tensor.F16, tensor.NVFP4ActQ8)
	w, err := model.Describe(cpu)
	if err != nil {
		b.Fatal(err)
	}
	for _, inPlace := range []bool{true, false} {
		name := "copied"
		if inPlace {
			name = "in_place"
		}
		b.Run(name, func(b *testing.B) {
			var used int64
			for i := 0; i < b.N; i++ {
				before := d.MemoryUsed()
				gm, err := load(d, w, tensor.NVFP4ActQ8, inPlace)
				if err != nil {
					b.Fatal(err)
				}
				used = d.MemoryUsed() - before
				gm.(*gpuModel).Close()
			}
			b.ReportMetric(float64(used)/(1<<20), "device_MiB")
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "load_ms")
		})
	}
}
