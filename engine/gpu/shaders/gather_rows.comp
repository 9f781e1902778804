#version 450
// dst row i = src row idx[i], rows of dim 32-bit words, bits copied.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, dim, dOff, sOff, iOff; } pc; // n = rows*dim
layout(std430, binding = 0) writeonly buffer D { uint dst[]; };
layout(std430, binding = 1) readonly buffer S { uint src[]; };
layout(std430, binding = 2) readonly buffer I { uint idx[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    const uint r = i / pc.dim, j = i - r * pc.dim;
    dst[pc.dOff + i] = src[pc.sOff + idx[pc.iOff + r] * pc.dim + j];
}
