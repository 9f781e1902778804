#version 450
// Embedding rows of the K-quant and legacy block types: dst[doff + i*cols +
// c] = row ids[ioff+i] of a weight matrix of type TYPE (0 Q4_K, 1 Q5_K,
// 2 Q6_K, 3 Q2_K, 4 Q3_K, 5 IQ4_XS, 6 Q4_0, 7 Q4_1, 8 Q5_0, 9 Q5_1,
// 10 IQ4_NL), dequantized bit for bit as engine/tensor's DequantizeRow
// (kquant.go's dequantizeBlocks, ggml's dequantize_row_*): the same
// products and differences, each rounded once (precise: never fused). An
// id outside [0, rows) gives a row of zeros.
//
// One invocation per output value.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TYPE = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC { uint n; uint cols; uint rows; uint ioff; uint doff; } pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { float dst[]; };

const bool SUPER = TYPE <= 5u; // 256-value super-blocks, else 32-value blocks
// BH is a block's halfwords.
const uint BH = TYPE == 0u ? 72u : TYPE == 1u ? 88u : TYPE == 2u ? 105u : TYPE == 3u ? 42u : TYPE == 4u ? 55u :
    TYPE == 5u ? 68u : TYPE == 6u || TYPE == 10u ? 9u : TYPE == 7u ? 10u : TYPE == 8u ? 11u : 12u;

const int kvalues[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// f16 widens F16 bits (F16ToF32; a NaN comes back quiet).
float f16(uint h) {
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) {
        if (m == 0u) return uintBitsToFloat(s);
        const int p = findMSB(m);
        return uintBitsToFloat(s | (uint(p + 103) << 23) | ((m << (23 - p)) & 0x7fffffu));
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint by(uint base, uint i) { return (uint(w[base + (i >> 1)]) >> (8u * (i & 1u))) & 0xffu; }

float value(uint base, uint k) { // value k of the block at halfword base
    if (TYPE == 0u || TYPE == 1u) { // Q4_K, Q5_K
        const float d = f16(uint(w[base])), dmin = f16(uint(w[base + 1u]));
        const uint c = k / 32u, l = k % 32u, j = c / 2u; // sub-block c: nibble c&1 of qs[32j+l]
        uint sc, m;
        if (c < 4u) {
            sc = by(base, 4u + c) & 63u;
            m = by(base, 8u + c) & 63u;
        } else {
            sc = (by(base, 8u + c) & 15u) | ((by(base, c) >> 6) << 4);
            m = (by(base, 8u + c) >> 4) | ((by(base, 4u + c) >> 6) << 4);
        }
        uint q = (by(base, (TYPE == 0u ? 16u : 48u) + 32u * j + l) >> (4u * (c & 1u))) & 15u;
        if (TYPE == 1u && ((by(base, 16u + l) >> c) & 1u) != 0u) q += 16u;
        precise float d1 = d * float(sc);
        precise float m1 = dmin * float(m);
        precise float p = d1 * float(q);
        precise float r = p - m1;
        return r;
    } else if (TYPE == 2u) { // Q6_K
        const float d = f16(uint(w[base + 104u]));
        const uint n = k / 128u, kk = (k % 128u) / 32u, l = k % 32u;
        const uint lb = by(base, 64u * n + 32u * (kk & 1u) + l) >> (4u * (kk >> 1));
        const uint hb = by(base, 128u + 32u * n + l) >> (2u * kk);
        const int q = int((lb & 15u) | ((hb & 3u) << 4)) - 32;
        const int s = bitfieldExtract(int(by(base, 192u + 8u * n + l / 16u + 2u * kk)), 0, 8);
        precise float ds = d * float(s);
        precise float r = ds * float(q);
        return r;
    } else if (TYPE == 3u) { // Q2_K
        const float d = f16(uint(w[base + 40u])), dmin = f16(uint(w[base + 41u]));
        const uint n = k / 128u, v = (k % 128u) / 32u, p = k % 32u, is = k / 16u;
        const uint sc = by(base, is);
        const uint q = (by(base, 16u + 32u * n + p) >> (2u * v)) & 3u;
        precise float dl = d * float(sc & 15u);
        precise float ml = dmin * float(sc >> 4);
        precise float pr = dl * float(q);
        precise float r = pr - ml;
        return r;
    } else if (TYPE == 4u) { // Q3_K
        const float d = f16(uint(w[base + 54u]));
        const uint n = k / 128u, v = (k % 128u) / 32u, p = k % 32u, i = k / 16u;
        const uint lo = i < 8u ? by(base, 96u + i) & 15u : by(base, 96u + i - 8u) >> 4;
        const uint hi = (by(base, 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
        int q = int((by(base, 32u + 32u * n + p) >> (2u * v)) & 3u);
        if (((by(base, p) >> (4u * n + v)) & 1u) == 0u) q -= 4;
        precise float dl = d * float(int(lo | (hi << 4)) - 32);
        precise float r = dl * float(q);
        return r;
    } else if (TYPE == 5u) { // IQ4_XS
        const float d = f16(uint(w[base]));
        const uint ib = k / 32u, j = k % 32u;
        const uint ls = ((by(base, 4u + ib / 2u) >> (4u * (ib & 1u))) & 15u) | (((uint(w[base + 1u]) >> (2u * ib)) & 3u) << 4);
        const uint q = (by(base, 8u + 16u * ib + (j & 15u)) >> (j >= 16u ? 4u : 0u)) & 15u;
        precise float dl = d * float(int(ls) - 32);
        precise float r = dl * float(kvalues[q]);
        return r;
    }
    // the 32-value blocks
    const float d = f16(uint(w[base]));
    const uint qs = TYPE == 6u || TYPE == 10u ? 2u : TYPE == 7u ? 4u : TYPE == 8u ? 6u : 8u;
    uint q = (by(base, qs + (k & 15u)) >> (k >= 16u ? 4u : 0u)) & 15u;
    if (TYPE == 8u || TYPE == 9u) {
        const uint qh = uint(w[base + qs / 2u - 2u]) | (uint(w[base + qs / 2u - 1u]) << 16);
        q |= ((qh >> k) & 1u) << 4;
    }
    if (TYPE == 6u || TYPE == 8u) {
        precise float r = float(int(q) - (TYPE == 6u ? 8 : 16)) * d;
        return r;
    }
    if (TYPE == 10u) {
        precise float r = d * float(kvalues[q]);
        return r;
    }
    const float m = f16(uint(w[base + 1u]));
    precise float p = float(q) * d;
    precise float r = p + m;
    return r;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= pc.n * pc.cols) return;
    const uint v = i / pc.cols, c = i - v * pc.cols;
    const int id = ids[pc.ioff + v];
    float out_ = 0.0;
    if (id >= 0 && uint(id) < pc.rows) {
        const uint bs = SUPER ? 256u : 32u, nb = pc.cols / bs;
        out_ = value((uint(id) * nb + c / bs) * BH, c % bs);
    }
    dst[pc.doff + i] = out_;
}
