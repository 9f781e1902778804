package model

import "math"

// ropeMode is how RoPE pairs dimensions (llama.cpp's rope types).
type ropeMode int

const (
	// ropeNormal rotates adjacent pairs (2i, 2i+1): LLAMA_ROPE_TYPE_NORM, the llama arch.
	ropeNormal ropeMode = iota
	// ropeNeox rotates (i, i+dims/2): LLAMA_ROPE_TYPE_NEOX.
	ropeNeox
	// ropeIMRope is qwen35's interleaved multi-section RoPE (LLAMA_ROPE_TYPE_IMROPE):
	// NeoX pairing, each pair's angle taken from the time, height, width or
	// extra position by its section. Text tokens have t = h = w = pos and
	// extra = 0, so pairs of the extra section are not rotated.
	ropeIMRope
)

// rope holds what ggml's rope op needs for one model. Rotations are exact
// copies of ggml-cpu's arithmetic (ops.cpp: ggml_rope_cache_init,
// ggml_mrope_cache_init, rotate_pairs), including its float32 angle
// recurrence theta *= theta_scale, glibc's sincosf for the angles and the
// fused multiply-adds that the x86 build of rotate_pairs compiles to.
type rope struct {
	mode        ropeMode
	dims        int     // rotated dimensions per head (rope.dimension_count)
	thetaScale  float32 // powf(freq_base, -2/dims)
	freqScale   float32 // 1/rope.scaling.factor (linear scaling), 1 when absent
	freqFactors []float32
	sections    [4]int
}

func newRope(mode ropeMode, dims int, base, freqScale float32, freqFactors []float32, sections [4]int) rope {
	return rope{
		mode:        mode,
		dims:        dims,
		thetaScale:  float32(math.Pow(float64(base), float64(float32(-2)/float32(dims)))),
		freqScale:   freqScale,
		freqFactors: freqFactors,
		sections:    sections,
	}
}

// cache writes cos and sin of every pair's angle at position pos into cs
// (2 floats per pair, dims floats in all).
func (r *rope) cache(cs []float32, pos int32) {
	theta := float32(pos)
	sectDims := r.sections[0] + r.sections[1] + r.sections[2] + r.sections[3]
	for k := 0; k < r.dims/2; k++ {
		t := theta
		if r.mode == ropeIMRope {
			s := k % sectDims
			text := (s%3 == 1 && s < 3*r.sections[1]) ||
				(s%3 == 2 && s < 3*r.sections[2]) ||
				(s%3 == 0 && s < 3*r.sections[0])
			if !text {
				t = 0 // the extra position of a text token is 0
			}
		}
		if r.freqFactors != nil {
			t /= r.freqFactors[k]
		}
		t = r.freqScale * t
		cs[2*k+1], cs[2*k] = sincosf(t)
		theta *= r.thetaScale
	}
}

// apply rotates the first dims values of each of heads vectors of headDim
// values in x, using the angles in cs. Both pairings compute, as ggml's x86
// build of rotate_pairs does (GCC fuses the products of the pair's first
// value): y0 = x0*cos - round(x1*sin), y1 = x0*sin + round(x1*cos), each
// with one rounding.
func (r *rope) apply(x []float32, heads, headDim int, cs []float32) {
	half := r.dims / 2
	stride, step := half, 1 // NeoX: pairs (k, k+dims/2)
	if r.mode == ropeNormal {
		stride, step = 1, 2 // adjacent pairs (2k, 2k+1)
	}
	for h := 0; h < heads; h++ {
		v := x[h*headDim : h*headDim+r.dims]
		for k := 0; k < half; k++ {
			c, s := cs[2*k], cs[2*k+1]
			i := k * step
			x0, x1 := v[i], v[i+stride]
			v[i] = fma32(x0, c, -float32(x1*s))
			v[i+stride] = fma32(x0, s, float32(x1*c))
		}
	}
}
