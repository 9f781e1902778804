#version 450
// matmul_kquant.comp with the integer sums made by packed 4x8-bit dot
// products (GL_EXT_integer_dot_product: dp4a on NVIDIA, one instruction
// per four multiply-adds), the weights packed after they are decoded, four
// int8 to a word; the activations' sums for the minimums likewise, against
// 0x01010101. The same integer sums, so the same bits as matmul_kquant
// (the float steps are the same statements). For devices that have
// shaderIntegerDotProduct (lavapipe, NVIDIA, Jetson); the others run
// matmul_kquant. Compiled with the newer glslc (build.sh): Debian 12's
// glslang lacks the extension.
#extension GL_EXT_integer_dot_product : require
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
    uint soff; // floats: the activation super-block scales
    uint ioff; // unused
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // blocks of an even byte count
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
// BH is a block's halfwords: 144, 176, 210, 84, 110, 136 bytes.
const uint BH = TYPE == 0u ? 72u : TYPE == 1u ? 88u : TYPE == 2u ? 105u : TYPE == 3u ? 42u : TYPE == 4u ? 55u : 68u;
const bool MINS = TYPE == 0u || TYPE == 1u || TYPE == 3u;
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

// w32 is the four bytes from halfword h, little end first.
uint w32(uint h) { return uint(w[h]) | (uint(w[h + 1u]) << 16); }
// by is byte i of the block at halfword base.
uint by(uint base, uint i) { return (uint(w[base + (i >> 1)]) >> (8u * (i & 1u))) & 0xffu; }

int q8(uint word, uint k) { return bitfieldExtract(int(word), int(8u * k), 8); }

// chunk decodes chunk c of the block at halfword base.
void chunk(uint base, uint c, out int wq[32], out int sA, out int sB, out int mA, out int mB, out float dw, out float dm) {
    mA = 0;
    mB = 0;
    dm = 0.0;
    if (TYPE == 0u || TYPE == 1u) { // Q4_K, Q5_K: d, dmin, scales[12], (qh[32]), qs[128]
        dw = halfToFloat(uint(w[base]));
        dm = halfToFloat(uint(w[base + 1u]));
        uint sc, m; // get_scale_min_k4
        if (c < 4u) {
            sc = by(base, 4u + c) & 63u;
            m = by(base, 8u + c) & 63u;
        } else {
            sc = (by(base, 8u + c) & 15u) | ((by(base, c) >> 6) << 4);
            m = (by(base, 8u + c) >> 4) | ((by(base, 4u + c) >> 6) << 4);
        }
        sA = int(sc);
        sB = int(sc);
        mA = int(m);
        mB = int(m);
        const uint qs = TYPE == 0u ? base + 8u : base + 24u;
        const uint sh = 4u * (c & 1u);
        for (uint k = 0u; k < 8u; k++) {
            const uint word = w32(qs + 16u * (c >> 1) + 2u * k);
            uint hb = 0u;
            if (TYPE == 1u) hb = w32(base + 8u + 2u * k) >> c; // qh[l] bit c
            for (uint j = 0u; j < 4u; j++) {
                uint v = (word >> (8u * j + sh)) & 15u;
                if (TYPE == 1u) v |= ((hb >> (8u * j)) & 1u) << 4;
                wq[4u * k + j] = int(v);
            }
        }
    } else if (TYPE == 2u) { // Q6_K: ql[128], qh[64], scales[16] int8, d
        dw = halfToFloat(uint(w[base + 104u]));
        const uint n = c >> 2, k4 = c & 3u;
        const uint sw = uint(w[base + 96u + 4u * n + k4]);
        sA = bitfieldExtract(int(sw), 0, 8);
        sB = bitfieldExtract(int(sw), 8, 8);
        const uint ql = base + 32u * n + 16u * (k4 & 1u), qh = base + 64u + 16u * n;
        const uint lsh = 4u * (k4 >> 1), hsh = 2u * k4;
        for (uint k = 0u; k < 8u; k++) {
            const uint lw = w32(ql + 2u * k) >> lsh, hw = w32(qh + 2u * k) >> hsh;
            for (uint j = 0u; j < 4u; j++) {
                wq[4u * k + j] = int(((lw >> (8u * j)) & 15u) | (((hw >> (8u * j)) & 3u) << 4)) - 32;
            }
        }
    } else if (TYPE == 3u) { // Q2_K: scales[16], qs[64], d, dmin
        dw = halfToFloat(uint(w[base + 40u]));
        dm = halfToFloat(uint(w[base + 41u]));
        const uint sw = uint(w[base + c]); // scales 2c, 2c+1
        sA = int(sw & 15u);
        mA = int((sw >> 4) & 15u);
        sB = int((sw >> 8) & 15u);
        mB = int((sw >> 12) & 15u);
        const uint qs = base + 8u + 16u * (c >> 2), sh = 2u * (c & 3u);
        for (uint k = 0u; k < 8u; k++) {
            const uint word = w32(qs + 2u * k) >> sh;
            for (uint j = 0u; j < 4u; j++) wq[4u * k + j] = int((word >> (8u * j)) & 3u);
        }
    } else if (TYPE == 4u) { // Q3_K: hmask[32], qs[64], scales[12], d
        dw = halfToFloat(uint(w[base + 54u]));
        for (uint h = 0u; h < 2u; h++) { // the 6-bit scales 2c+h (dequantize_row_q3_K's kmask shuffle)
            const uint i = 2u * c + h;
            const uint lo = i < 8u ? by(base, 96u + i) & 15u : by(base, 96u + i - 8u) >> 4;
            const uint hi = (by(base, 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
            const int s = int(lo | (hi << 4)) - 32;
            if (h == 0u) sA = s; else sB = s;
        }
        const uint qs = base + 16u + 16u * (c >> 2), sh = 2u * (c & 3u);
        for (uint k = 0u; k < 8u; k++) {
            const uint word = w32(qs + 2u * k) >> sh, hm = w32(base + 2u * k) >> c;
            for (uint j = 0u; j < 4u; j++) {
                int v = int((word >> (8u * j)) & 3u);
                if (((hm >> (8u * j)) & 1u) == 0u) v -= 4;
                wq[4u * k + j] = v;
            }
        }
    } else { // IQ4_XS: d, scales_h, scales_l[4], qs[128]
        dw = halfToFloat(uint(w[base]));
        const uint ls = ((by(base, 4u + (c >> 1)) >> (4u * (c & 1u))) & 15u) | (((uint(w[base + 1u]) >> (2u * c)) & 3u) << 4);
        sA = int(ls) - 32;
        sB = sA;
        for (uint k = 0u; k < 4u; k++) {
            const uint word = w32(base + 4u + 8u * c + 2u * k);
            for (uint j = 0u; j < 4u; j++) {
                const uint b = (word >> (8u * j)) & 0xffu;
                wq[4u * k + j] = kvalue(b & 15u);
                wq[16u + 4u * k + j] = kvalue(b >> 4);
            }
        }
    }
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    if (TYPE == 5u) { // IQ4's levels
        if (tid < 16u) kvs[tid] = kvalueSel(tid);
        barrier();
    }
    const uint row = (g / pc.vgroups) * R + tid / TPR, lane = tid % TPR, v0 = (g % pc.vgroups) * NV;
    const uint nb = pc.cols / 256u, units = nb * 8u;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        const uint b = u >> 3, c = u & 7u;
        int wq[32];
        int sA, sB, mA, mB;
        float dw, dm;
        chunk((row * nb + b) * BH, c, wq, sA, sB, mA, mB, dw, dm);
        int wp[8];
        for (uint k = 0u; k < 8u; k++) {
            wp[k] = int((uint(wq[4u * k]) & 0xffu) | ((uint(wq[4u * k + 1u]) & 0xffu) << 8) |
                ((uint(wq[4u * k + 2u]) & 0xffu) << 16) | (uint(wq[4u * k + 3u]) << 24));
        }
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * (pc.cols / 4u) + u * 8u;
                int dA = 0, dB = 0, bA = 0, bB = 0;
                for (uint k = 0u; k < 4u; k++) {
                    const int xa = int(xq[xi + k]), xb = int(xq[xi + 4u + k]);
                    dA += dotPacked4x8EXT(wp[k], xa);
                    dB += dotPacked4x8EXT(wp[4u + k], xb);
                    if (MINS) {
                        bA += dotPacked4x8EXT(xa, 0x01010101);
                        bB += dotPacked4x8EXT(xb, 0x01010101);
                    }
                }
                const float dx = xd[pc.soff + (v0 + v) * nb + b];
                acc[v] += (dw * dx) * float(sA * dA + sB * dB);
                if (MINS) acc[v] -= (dm * dx) * float(mA * bA + mB * bB);
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
