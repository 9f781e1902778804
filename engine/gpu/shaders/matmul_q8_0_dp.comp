#version 450
// matmul_q8_0.comp with packed int8 dot products (GL_EXT_integer_dot_product:
// dp4a on NVIDIA, one instruction for four multiply-adds) where the device
// has shaderIntegerDotProduct: the same integer sums and float steps (a
// compiler may fuse the latter differently from matmul_q8_0.comp).
//
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for Q8_0 weights and
// activations quantized to Q8_0 by quant_q8_0 (W8A8, ggml's CPU arithmetic,
// engine/tensor/kernels.go): per quarter block of 8 quants an exact int32 sum
// of int8 products, then acc += (d_w*d_x) * sum in F32, in a fixed order
// that depends on the columns and TPR alone, so that a vector's result is
// the same bits whatever n and NV are.
//
// Workgroup g computes R = WG/TPR rows from R*(g/vgroups) for the vectors
// from NV*(g%vgroups): each weight quarter block is read once for its NV
// vectors, and the workgroups of one row block follow one another, so that
// its other vector groups find it in the cache. TPR invocations share a
// row, invocation t of them taking quarter blocks t, t+TPR, ...; their
// partial sums are added in shared memory (TPR a power of two).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_integer_dot_product : require

layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint NV = 1; // vectors per workgroup
layout(constant_id = 2) const uint TPR = 32; // invocations per row: WG/TPR rows per workgroup
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // words: the activation quants, four to a word
    uint soff; // floats: the activation block scales
    uint ioff; // unused
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // 34-byte blocks: 17 halfwords
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
shared float part[NV * WG];

// halfToFloat widens F16 bits with integer operations (shaders/README.md).
float halfToFloat(uint h) {
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) {
        if (m == 0u) return uintBitsToFloat(s);
        const int p = findMSB(m);
        return uintBitsToFloat(s | (uint(p + 103) << 23) | ((m << (23 - p)) & 0x7fffffu));
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint row = (g / pc.vgroups) * R + tid / TPR, lane = tid % TPR, v0 = (g % pc.vgroups) * NV;
    const uint nb = pc.cols / 32u, units = nb * 4u;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        const uint b = u >> 2, q = u & 3u;
        const uint base = row * nb * 17u + b * 17u;
        const float dw = halfToFloat(uint(w[base]));
        const uint o = base + 1u + q * 4u;
        const uint w0 = uint(w[o]) | (uint(w[o + 1u]) << 16);
        const uint w1 = uint(w[o + 2u]) | (uint(w[o + 3u]) << 16);
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * (pc.cols / 4u) + b * 8u + q * 2u;
                const int s = dotPacked4x8EXT(int(w0), int(xq[xi])) + dotPacked4x8EXT(int(w1), int(xq[xi + 1u])); // signed int8 x int8
                acc[v] += (dw * xd[pc.soff + (v0 + v) * nb + b]) * float(s);
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
        y[pc.doff + (v0 + lane) * pc.rows + row] = o;
    }
}
