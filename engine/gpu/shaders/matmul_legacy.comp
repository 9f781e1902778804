#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for ggml's legacy 32-value
// block types (TYPE: 0 Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 4 IQ4_NL; layouts in
// engine/tensor/kquant.go) with the activations quantized as the CPU
// engine does for them: Q8_0 by quant_q8_0 (Q4_0, Q5_0, IQ4_NL), Q8_1 by
// quant_q8_1 (Q4_1, Q5_1: the Q8_0 quants and scale, and s = d*Σq per
// block). Per half block of 16 values an exact int32 sum of the integer
// weights (offsets taken off) times the quants, then acc += (d_w*d_x)*sum
// in F32, and for Q4_1 and Q5_1 acc += m_w*s_x once per block, in a fixed
// order that depends on the columns and TPR alone (matmul_q8_0.comp's
// scheme), so that a vector's result is the same bits whatever n and NV
// are.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint NV = 1;
layout(constant_id = 2) const uint TPR = 32;
layout(constant_id = 3) const uint TYPE = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // words: the activation quants, four to a word
    uint soff; // floats: the activation block scales
    uint ioff; // floats: Q8_1's s per block
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
// BH is a block's halfwords (18, 20, 22, 24, 18 bytes); QS the halfword of its quants.
const uint BH = TYPE == 0u || TYPE == 4u ? 9u : TYPE == 1u ? 10u : TYPE == 2u ? 11u : 12u;
const uint QS = TYPE == 0u || TYPE == 4u ? 1u : TYPE == 1u ? 2u : TYPE == 2u ? 3u : 4u;
const bool MIN = TYPE == 1u || TYPE == 3u;
shared float part[NV * WG];

// kvalueSel is ggml's kvalues_iq4nl[q] (-127, -104, -83, -65, -49, -35, -22,
// -10, 1, 13, 25, 38, 53, 69, 89, 113), from four packed words by selects:
// an indexed constant array would sit in local memory (on NVIDIA, five
// times slower than the rest of the product).
int kvalueSel(uint q) {
    const uint w = q < 8u ? (q < 4u ? 0xBFAD9881u : 0xF6EADDCFu) : (q < 12u ? 0x26190D01u : 0x71594535u);
    return bitfieldExtract(int(w), int(8u * (q & 3u)), 8);
}

// The levels in shared memory, filled by kvalueSel at the start (as
// llama.cpp's Vulkan shaders keep kvalues_iq4nl): one load per value, the
// 16 entries in 16 banks.
shared int kvs[16];
int kvalue(uint q) { return kvs[q]; }

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

uint w32(uint h) { return uint(w[h]) | (uint(w[h + 1u]) << 16); }

int q8(uint word, uint k) { return bitfieldExtract(int(word), int(8u * k), 8); }

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    if (TYPE == 4u) { // IQ4's levels
        if (tid < 16u) kvs[tid] = kvalueSel(tid);
        barrier();
    }
    const uint row = (g / pc.vgroups) * R + tid / TPR, lane = tid % TPR, v0 = (g % pc.vgroups) * NV;
    const uint nb = pc.cols / 32u, units = nb * 2u;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        const uint b = u >> 1, h = u & 1u; // half h: values 16h..16h+15, nibble h of qs[0..15]
        const uint base = (row * nb + b) * BH;
        const float dw = halfToFloat(uint(w[base]));
        uint qh = 0u;
        if (TYPE == 2u || TYPE == 3u) qh = w32(base + QS - 2u) >> (16u * h); // bit j: fifth bit of value 16h+j
        int wq[16];
        for (uint k = 0u; k < 4u; k++) {
            const uint word = w32(base + QS + 2u * k) >> (4u * h);
            for (uint j = 0u; j < 4u; j++) {
                const uint i = 4u * k + j;
                uint q = (word >> (8u * j)) & 15u;
                if (TYPE == 2u || TYPE == 3u) q |= ((qh >> i) & 1u) << 4;
                if (TYPE == 0u) wq[i] = int(q) - 8;
                else if (TYPE == 2u) wq[i] = int(q) - 16;
                else if (TYPE == 4u) wq[i] = kvalue(q);
                else wq[i] = int(q);
            }
        }
        float mw = 0.0;
        if (MIN && h == 0u) mw = halfToFloat(uint(w[base + 1u]));
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * (pc.cols / 4u) + b * 8u + h * 4u;
                int s = 0;
                for (uint k = 0u; k < 4u; k++) {
                    const uint xa = xq[xi + k];
                    for (uint j = 0u; j < 4u; j++) s += wq[4u * k + j] * q8(xa, j);
                }
                const uint bi = (v0 + v) * nb + b;
                acc[v] += (dw * xd[pc.soff + bi]) * float(s);
                if (MIN && h == 0u) acc[v] += mw * xd[pc.ioff + bi];
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
