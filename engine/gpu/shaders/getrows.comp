#version 450
// Embedding rows: dst[doff + i*cols + c] = row ids[ioff+i] of a weight matrix
// of type TYPE (0 F32, 1 F16, 2 BF16, 3 Q8_0, 4 NVFP4), dequantized to F32
// bit for bit as engine/tensor's DequantizeRow (quant.go): every value is
// exact (a widening, or one product of two short significands), so the
// shader works on the bits. An id outside [0, rows) gives a row of zeros.
//
// One invocation per output value.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TYPE = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC { uint n; uint cols; uint rows; uint ioff; uint doff; } pc;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 0) readonly buffer W16 { uint16_t w16[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { uint dst[]; };

// f16Bits widens F16 bits to F32 bits (F16ToF32; a NaN comes back quiet).
uint f16Bits(uint h) {
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) {
        if (m == 0u) return s;
        const int p = findMSB(m); // subnormal: m * 2^-24 = 1.f * 2^(p-24)
        return s | (uint(p + 103) << 23) | ((m << (23 - p)) & 0x7fffffu);
    }
    if (e == 31u) return s | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
    return s | ((e + 112u) << 23) | (m << 13);
}

// nvScale is the UE4M3 value of a scale byte's low 7 bits; the NaN code reads as 0.
float nvScale(uint c) {
    c &= 0x7fu;
    if (c == 0x7fu) return 0.0;
    const uint e = c >> 3, m = c & 7u;
    if (e == 0u) return float(m) * (1.0 / 512.0);
    return uintBitsToFloat(((e + 120u) << 23) | (m << 20));
}

const float e2m1[8] = float[8](0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= pc.n * pc.cols) return;
    const uint v = i / pc.cols, c = i - v * pc.cols;
    const int id = ids[pc.ioff + v];
    uint bits = 0u;
    if (id >= 0 && uint(id) < pc.rows) {
        const uint r = uint(id);
        if (TYPE == 0u) {
            bits = w[r * pc.cols + c];
        } else if (TYPE == 1u) {
            bits = f16Bits(uint(w16[r * pc.cols + c]));
        } else if (TYPE == 2u) {
            bits = uint(w16[r * pc.cols + c]) << 16;
        } else if (TYPE == 3u) { // 34-byte blocks: an F16 scale, 32 int8 quants
            const uint b = r * (pc.cols / 32u) * 17u + (c / 32u) * 17u, j = c % 32u;
            const float d = uintBitsToFloat(f16Bits(uint(w16[b])));
            const int q = bitfieldExtract(int(uint(w16[b + 1u + j / 2u])), 8 * int(j & 1u), 8);
            bits = floatBitsToUint(float(q) * d);
        } else { // NVFP4: 36-byte blocks, 9 words: four scale bytes, 32 code bytes
            const uint b = r * (pc.cols / 64u) * 9u + (c / 64u) * 9u, s = (c % 64u) / 16u, k = c % 16u;
            const uint j = k % 8u; // byte 8s+j: value 16s+j low, 16s+j+8 high
            const uint code = (w[b + 1u + 2u * s + j / 4u] >> (8u * (j % 4u) + (k >= 8u ? 4u : 0u))) & 15u;
            const float d = nvScale((w[b] >> (8u * s)) & 0xffu);
            const float e = (code & 8u) != 0u ? -e2m1[code & 7u] : e2m1[code & 7u];
            bits = floatBitsToUint(e * d);
        }
    }
    dst[pc.doff + i] = bits;
}
