#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for F16 (BF16 false) or BF16
// weights and activations already rounded to F16 or BF16 by quant_half (as
// ggml's CPU does, engine/tensor/matmul.go): every product is exact in F32,
// and the sums are made in F32 in a fixed order that depends on the columns
// and TPR alone, so that a vector's result is the same bits whatever n and
// NV are. The CPU sums in another order: the results agree to rounding.
//
// Workgroup g computes R = WG/TPR rows from R*(g/vgroups) for the vectors
// from NV*(g%vgroups) (see matmul_q8_0.comp). TPR invocations share a row,
// invocation t of them taking units t, t+TPR, ...: eight values, one uvec4
// of weights (VEC8, when cols is a multiple of 8), else one. XVEC: the
// activations' offset is a multiple of 4, so vec4 loads reach them. The
// partial sums are added in shared memory (TPR a power of two).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint NV = 1;   // vectors per workgroup
layout(constant_id = 2) const uint TPR = 32; // invocations per row
layout(constant_id = 3) const bool BF16 = false;
layout(constant_id = 4) const bool VEC8 = true;
layout(constant_id = 5) const bool XVEC = true;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff;       // floats: the rounded activations
    uint soff, ioff; // unused
    uint doff;       // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
layout(std430, binding = 0) readonly buffer W8 { uvec4 w8[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
const uint U = VEC8 ? 8u : 1u; // values per unit
shared float part[NV * WG];

// widen decodes the 16 bits of a weight (F16 with integer operations,
// shaders/README.md).
float widen(uint h) {
    if (BF16) return uintBitsToFloat(h << 16);
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
    const uint units = pc.cols / U;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        float wv[8];
        if (VEC8) {
            const uvec4 q = w8[row * units + u];
            for (uint i = 0u; i < 4u; i++) {
                wv[2u * i] = widen(q[i] & 0xffffu);
                wv[2u * i + 1u] = widen(q[i] >> 16);
            }
        } else {
            wv[0] = widen(uint(w[row * pc.cols + u]));
        }
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * pc.cols + u * U;
                float s;
                if (!VEC8) {
                    s = wv[0] * x[xi];
                } else {
                    float xv[8];
                    if (XVEC) {
                        const vec4 a = x4[xi / 4u], b = x4[xi / 4u + 1u];
                        xv = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
                    } else {
                        for (uint i = 0u; i < 8u; i++) xv[i] = x[xi + i];
                    }
                    s = wv[0] * xv[0];
                    for (uint i = 1u; i < 8u; i++) s += wv[i] * xv[i];
                }
                acc[v] += s;
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
        y[pc.doff + (v0 + lane) * pc.rows + row] = part[lane * WG + tid - lane];
    }
}
