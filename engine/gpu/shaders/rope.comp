#version 450
// RoPE in place on tokens rows of heads vectors of headDim values, the first
// dims of each rotated by pairs (k, k+dims/2) (NeoX, IMRoPE) or (2k, 2k+1)
// with the cos and sin of model.Rope.Table (cs: dims floats a token, cos and
// sin of pair 0, then pair 1...). The rotation is engine/model rope.apply's:
// y0 = fma(x0, c, -round(x1*s)), y1 = fma(x0, s, round(x1*c)).
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, heads, headDim, dims, neox, xOff, cOff; } pc; // n = tokens*heads*dims/2
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer C { float cs[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    const uint half_ = pc.dims / 2u;
    const uint th = i / half_, k = i - th * half_;
    const uint tok = th / pc.heads;
    const float c = cs[pc.cOff + tok * pc.dims + 2u * k], s = cs[pc.cOff + tok * pc.dims + 2u * k + 1u];
    const uint stride = pc.neox != 0u ? half_ : 1u;
    const uint at = pc.xOff + th * pc.headDim + (pc.neox != 0u ? k : 2u * k);
    const float x0 = x[at], x1 = x[at + stride];
    precise float a = x1 * s;
    precise float y0 = fma(x0, c, -a);
    precise float b = x1 * c;
    precise float y1 = fma(x0, s, b);
    x[at] = y0;
    x[at + stride] = y1;
}
