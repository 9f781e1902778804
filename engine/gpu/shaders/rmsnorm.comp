#version 450
// dst = x / sqrt(mean(x^2) + eps) * w per row of dim values (tensor.RMSNorm):
// one workgroup a row. tensor.RMSNorm sums the squares, each rounded to
// float32, in float64; here each invocation and then the tree across them
// add them as float32 pairs (hi + lo, Knuth's TwoSum), which keeps the sum
// to about 2^-44 relative, far below what the float32 mean can show.
// scale = 1/sqrt(float32(mean) + eps), each value (x*scale)*w. The
// division and square root are the GPU's (a few ulp), so scale may
// differ from the CPU's by that. dst may be x.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint rows, dim, dOff, xOff, wOff, hasW; float eps; } pc;
layout(std430, binding = 0) buffer D { float dst[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };

shared float hiS[256], loS[256];

void twoSum(inout float hi, inout float lo, float b) {
    precise float s = hi + b;
    precise float bb = s - hi;
    precise float err = (hi - (s - bb)) + (b - bb);
    precise float l = lo + err;
    hi = s;
    lo = l;
}

void main() {
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= pc.rows) return;
    const uint t = gl_LocalInvocationID.x;
    const uint xb = pc.xOff + row * pc.dim, db = pc.dOff + row * pc.dim;
    float hi = 0.0, lo = 0.0;
    for (uint i = t; i < pc.dim; i += 256u) {
        const float v = x[xb + i];
        precise float sq = v * v;
        twoSum(hi, lo, sq);
    }
    hiS[t] = hi;
    loS[t] = lo;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s) {
            float h = hiS[t], l = loS[t];
            twoSum(h, l, hiS[t + s]);
            precise float l2 = l + loS[t + s];
            hiS[t] = h;
            loS[t] = l2;
        }
        barrier();
    }
    precise float sum = hiS[0] + loS[0];
    precise float mean = sum / float(pc.dim);
    precise float ms = mean + pc.eps;
    const float scale = 1.0 / sqrt(ms);
    for (uint i = t; i < pc.dim; i += 256u) {
        precise float y = x[xb + i] * scale;
        if (pc.hasW != 0u) y = y * w[pc.wOff + i];
        dst[db + i] = y;
    }
}
