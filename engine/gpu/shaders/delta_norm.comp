#version 450
// Gated DeltaNet, stage 3 (engine/model/deltanet.go forward): the gated
// RMSNorm of every value head's output, in place: o = (o * 1/sqrt(mean(o^2)
// + eps)) * w * silu(z), as tensor.RMSNorm (x*scale, then *w) followed by
// SiLU(z) and the product. One workgroup per (token, value head).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;

layout(push_constant) uniform PC {
    uint n;      // tokens
    uint D;      // head size
    uint Hv;     // value heads
    uint oOff, oStride;
    uint zOff, zStride;
    uint wOff;   // norm weight in the layer's parameters
    float eps;
} pc;

layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer Z { float z[]; };
layout(std430, binding = 2) readonly buffer L { float lp[]; };

shared float red[64];

void main() {
    const uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= pc.n * pc.Hv) return;
    const uint t = wg / pc.Hv, h = wg % pc.Hv, lid = gl_LocalInvocationID.x;
    const uint ob = pc.oOff + t * pc.oStride + h * pc.D, zb = pc.zOff + t * pc.zStride + h * pc.D;
    precise float ss = 0.0;
    for (uint c = lid; c < pc.D; c += 64u) {
        precise float sq = o[ob + c] * o[ob + c];
        ss = ss + sq;
    }
    red[lid] = ss;
    barrier();
    [[unroll]] for (uint s = 32u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    const float scale = 1.0 / sqrt(red[0] / float(pc.D) + pc.eps);
    for (uint c = lid; c < pc.D; c += 64u) {
        const float zv = z[zb + c];
        o[ob + c] = ((o[ob + c] * scale) * lp[pc.wOff + c]) * (zv / (1.0 + exp(-zv)));
    }
}
