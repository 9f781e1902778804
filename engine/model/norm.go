package model

import (
	"math"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// rmsNormRows normalises n rows of dim values each: dst = x/rms(x) * w
// (llama.cpp build_norm with LLM_NORM_RMS: ggml_rms_norm, then ggml_mul by
// the weight). The weights of qwen35's zero-centred norms already carry the
// +1 (llama.cpp's converter folds it in), so the same code serves both.
func rmsNormRows(dst, x, w []float32, n, dim int, eps float32) {
	for r := 0; r < n; r++ {
		tensor.RMSNorm(dst[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], w, eps)
	}
}

// l2Norm scales x in place to unit L2 norm the way llama.cpp's
// build_gdn_l2_norm does (src/models/models.h): rms_norm with eps/n, then a
// scale by 1/sqrt(n), i.e. x/sqrt(sum(x^2)+eps) up to float rounding.
func l2Norm(x []float32, eps float32) {
	n := float32(len(x))
	tensor.RMSNorm(x, x, nil, eps/n)
	tensor.Scale(x, 1/float32(math.Sqrt(float64(n))))
}

// sigmoid is ggml's op_sigmoid: 1/(1+expf(-x)).
func sigmoid(x float32) float32 {
	return 1 / (1 + expf(-x))
}

// softplus is ggml's op_softplus: x above 20 passes through, else
// logf(1+expf(x)).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return logf(1 + expf(x))
}

// fma32 is the fused multiply-add a*b+c rounded once to float32, as the x86
// FMA instructions that ggml's compiled kernels use. The product of two
// float32 is exact in float64, so only the sum is rounded twice, which can
// differ from one rounding only in exceedingly rare halfway cases.
func fma32(a, b, c float32) float32 {
	return float32(float64(a)*float64(b) + float64(c))
}
