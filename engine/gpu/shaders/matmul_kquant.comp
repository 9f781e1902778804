#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for the K-quant weight types
// and IQ4_XS (TYPE: 0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q2_K, 4 Q3_K, 5 IQ4_XS;
// ggml's layouts, engine/tensor/kquant.go) with the activations quantized
// to Q8_K by quant_q8_k, as the CPU engine does (ggml's vec_dot_type for
// these types). A 256-value super-block is eight 32-value chunks; a chunk's
// weights are integers w (Q6_K's and Q3_K's offsets taken off) with a
// scale per 16 values (sA, sB) and, for Q4_K, Q5_K and Q2_K, a minimum per
// 16 (mA, mB), so that W = d*s*w - dmin*m. Per chunk the shader makes the
// exact integer sums isum = sA*Σw*x + sB*Σw*x and msum = mA*Σx + mB*Σx (the
// CPU's integers, which it adds in other groupings, exactly too), then
// acc += (d_w*d_x)*isum - (dmin_w*d_x)*msum in F32, in a fixed order that
// depends on the columns and TPR alone, so that a vector's result is the
// same bits whatever n and NV are.
//
// Workgroup g computes R = WG/TPR rows from R*(g/vgroups) for the vectors
// from NV*(g%vgroups) (matmul_q8_0.comp's scheme): TPR invocations share a
// row, invocation t taking chunks t, t+TPR, ..., each chunk's weights
// decoded once for its NV vectors; partial sums are added in shared memory.
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
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * (pc.cols / 4u) + u * 8u;
                int dA = 0, dB = 0, bA = 0, bB = 0;
                for (uint k = 0u; k < 4u; k++) {
                    const uint xa = xq[xi + k], xb = xq[xi + 4u + k];
                    for (uint j = 0u; j < 4u; j++) {
                        const int a = q8(xa, j), bb = q8(xb, j);
                        dA += wq[4u * k + j] * a;
                        dB += wq[16u + 4u * k + j] * bb;
                        bA += a;
                        bB += bb;
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
