#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for NVFP4 weights (ggml's
// block_nvfp4: 36-byte blocks of 64 values, four UE4M3 sub-block scales then
// 32 bytes of E2M1 codes; engine/tensor/nvfp4.go), with the activations of
// MODE (engine/tensor/matmul.go, NVFP4Activations):
//   0 W4A8: Q8_0 blocks from quant_q8_0; per sub-block of 16 values an exact
//     int32 sum of ggml's doubled E2M1 integers times the quants, times
//     (scale/2)*d_x (dotNVFP4Q8);
//   1 W4A4: NVFP4 codes from quant_nvfp4, as doubled integers; the exact sum
//     times scale*(SF/4), and the row's total times 1/G (dotNVFP4FP4);
//   2 W4A16: F32 activations; the sub-block's doubled values times x summed
//     in F32, times scale/2 (dotNVFP4F32).
// The sums over sub-blocks are made in F32 in a fixed order that depends on
// the columns and TPR alone, so that a vector's result is the same bits
// whatever n and NV are; the CPU sums in another order, so the results
// agree to rounding.
//
// Workgroup g computes R = WG/TPR rows from R*(g/vgroups) for the vectors
// from NV*(g%vgroups) (see matmul_q8_0.comp). TPR invocations share a row,
// invocation t of them taking sub-blocks t, t+TPR, ... XVEC (W4A16): x's
// offset is a multiple of 4, so vec4 loads reach it. The partial sums are
// added in shared memory (TPR a power of two).
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint NV = 1;   // vectors per workgroup
layout(constant_id = 2) const uint TPR = 32; // invocations per row
layout(constant_id = 3) const uint MODE = 0;
layout(constant_id = 4) const bool XVEC = true;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // words: the activation codes or quants (four to a word); W4A16: floats of x
    uint soff; // floats: the activation scales (d per 32 values, or SF/4 per 16)
    uint ioff; // floats: W4A4's 1/G per vector
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint w[]; }; // 9 words a block
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XF { float xf[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
shared float part[NV * WG];

// nvScale is the UE4M3 value of a scale byte's low 7 bits; the NaN code reads as 0.
float nvScale(uint c) {
    c &= 0x7fu;
    if (c == 0x7fu) return 0.0;
    const uint e = c >> 3, m = c & 7u;
    if (e == 0u) return float(m) * (1.0 / 512.0);
    return uintBitsToFloat(((e + 120u) << 23) | (m << 20));
}

// e2m1x2 is ggml's kvalues_fp4 for the 4-bit code in the low bits of c:
// twice its E2M1 value, 0 1 2 3 4 6 8 12, negated when bit 3 is set.
int e2m1x2(uint c) {
    const int m = int(c & 7u);
    const int mag = m < 2 ? m : ((m & 1) | 2) << ((m >> 1) - 1);
    return (c & 8u) != 0u ? -mag : mag;
}

int q8(uint word, uint k) { return bitfieldExtract(int(word), 8 * int(k), 8); }

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint row = (g / pc.vgroups) * R + tid / TPR, lane = tid % TPR, v0 = (g % pc.vgroups) * NV;
    const uint nb = pc.cols / 64u, units = nb * 4u;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        const uint b = u >> 2, s = u & 3u;
        const uint base = row * nb * 9u + b * 9u;
        const float ws = nvScale((w[base] >> (8u * s)) & 0xffu);
        const uint c0 = w[base + 1u + 2u * s], c1 = w[base + 2u + 2u * s];
        // byte j of the sub-block's eight: value j in the low nibble, j+8 in the high
        int wv[16];
        for (uint j = 0u; j < 4u; j++) {
            wv[j] = e2m1x2(c0 >> (8u * j));
            wv[j + 4u] = e2m1x2(c1 >> (8u * j));
            wv[j + 8u] = e2m1x2(c0 >> (8u * j + 4u));
            wv[j + 12u] = e2m1x2(c1 >> (8u * j + 4u));
        }
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint vc = (v0 + v) * pc.cols;
                if (MODE == 2u) {
                    const uint xi = pc.xoff + vc + 16u * u;
                    float f = 0.0;
                    for (uint k = 0u; k < 4u; k++) {
                        const uint i = xi + 4u * k;
                        const vec4 a = XVEC ? x4[i / 4u] : vec4(xf[i], xf[i + 1u], xf[i + 2u], xf[i + 3u]);
                        f += float(wv[4u * k]) * a.x;
                        f += float(wv[4u * k + 1u]) * a.y;
                        f += float(wv[4u * k + 2u]) * a.z;
                        f += float(wv[4u * k + 3u]) * a.w;
                    }
                    acc[v] += (ws * 0.5) * f;
                } else {
                    const uint xi = pc.xoff + vc / 4u + 4u * u;
                    int t = 0;
                    for (uint k = 0u; k < 4u; k++) {
                        const uint a = xq[xi + k];
                        for (uint j = 0u; j < 4u; j++) t += wv[4u * k + j] * q8(a, j);
                    }
                    const float d = MODE == 0u ? (ws * 0.5) * xf[pc.soff + vc / 32u + u / 2u] : ws * xf[pc.soff + vc / 16u + u];
                    acc[v] += d * float(t);
                }
            }
        }
    }

    for (uint v = 0u; v < NV; v++) part[v * WG + tid] = acc[v];
    barrier();
    for (uint h = TPR / 2u; h > 0u; h >>= 1) {
        if (lane < h) {
            for (uint v = 0u; v < NV; v++) part[v * WG + tid] += part[v * WG + tid + h];
        }
        barrier();
    }
    if (lane < NV && row < pc.rows && v0 + lane < pc.n) {
        float o = part[lane * WG + tid - lane];
        if (MODE == 1u) o *= xf[pc.ioff + v0 + lane];
        y[pc.doff + (v0 + lane) * pc.rows + row] = o;
    }
}
