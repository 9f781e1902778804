#version 450
// x[i] *= sigmoid(gate[i]), sigmoid(g) = 1 / (1 + exp(-g)) as engine/model's
// sigmoid (qwen35's attention output gate), with ggml's polynomial exp.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, xOff, gOff; } pc;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };

// ewExp is ggml_v_expf (ggml-cpu vec.h), as in swiglu.comp.
float ewExp(float x) {
    const float shift = uintBitsToFloat(0x4b400000u); // 0x1.8p23
    precise float z = fma(x, uintBitsToFloat(0x3fb8aa3bu), shift);
    precise float n = z - shift;
    // b = x - n*ln2 in two steps (Cody-Waite). n*ln2hi is exact and so is
    // the difference: a precise product and difference are the fused
    // operation's bits. (The compiler may rewrite fma() calls, which glslang
    // cannot mark precise: fma(-n, lo, fma(-n, hi, x)) becomes
    // fma(-n, float(hi+lo), x), 2^-24*|n| off.)
    precise float nh = n * uintBitsToFloat(0x3f317200u);
    precise float b1 = x - nh;
    precise float nl = n * uintBitsToFloat(0x35bfbe8eu);
    precise float b = b1 - nl;
    const uint e = floatBitsToUint(z) << 23;
    const float k = uintBitsToFloat(e + 0x3f800000u);
    precise float q = b * b;
    precise float c0b = uintBitsToFloat(0x3f7ffff6u) * b;
    precise float j = fma(fma(fma(uintBitsToFloat(0x3c072010u), b, uintBitsToFloat(0x3d2b9f17u)), q,
                               fma(uintBitsToFloat(0x3e2aaf33u), b, uintBitsToFloat(0x3efffedbu))), q, c0b);
    const float an = abs(n);
    if (!(an > 126.0)) return fma(k, j, k);
    const uint gg = n <= 0.0 ? 0x82000000u : 0u;
    const float s1 = uintBitsToFloat(gg + 0x7f000000u);
    const float s2 = uintBitsToFloat(e - gg);
    if (an > 192.0) return s1 * s1;
    return fma(s2, j, s2) * s1;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    precise float s = 1.0 / (1.0 + ewExp(-g[pc.gOff + i]));
    precise float y = x[pc.xOff + i] * s;
    x[pc.xOff + i] = y;
}
