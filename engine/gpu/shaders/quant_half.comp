#version 450
// Activations rounded to F16 (MODE 0) or BF16 (MODE 1) and stored as F32:
// dst[doff+i] = RoundF16(x[xoff+i]) or BF16ToF32(F32ToBF16(x[xoff+i]))
// (engine/tensor/half.go), the values the CPU's F16 and BF16 products
// multiply the weights with. Integer operations only, so the bits are the
// CPU's whatever the device does with floats.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint MODE = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC { uint count; uint xoff; uint doff; } pc;

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };

// f16Round is F16ToF32(F32ToF16(f)), on the bits.
uint f16Round(uint b) {
    const uint sign = (b >> 16) & 0x8000u, abs = b & 0x7fffffffu;
    uint h;
    if (abs > 0x7f800000u) h = sign | 0x7e00u;
    else if (abs >= 0x477ff000u) h = sign | 0x7c00u;
    else if (abs >= 0x38800000u) {
        h = (abs - 0x38000000u) >> 13;
        const uint rem = abs & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) h++;
        h |= sign;
    } else if (abs >= 0x33000000u) {
        const uint e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u, s = 126u - e;
        h = m >> s;
        const uint rem = m & ((1u << s) - 1u), hf = 1u << (s - 1u);
        if (rem > hf || (rem == hf && (h & 1u) == 1u)) h++;
        h |= sign;
    } else h = sign;
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) {
        if (m == 0u) return s;
        const int p = findMSB(m); // subnormal: m * 2^-24 = 1.f * 2^(p-24)
        return s | (uint(p + 103) << 23) | ((m << (23 - p)) & 0x7fffffu);
    }
    if (e == 31u) return s | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
    return s | ((e + 112u) << 23) | (m << 13);
}

// bf16Round is BF16ToF32(F32ToBF16(f)): ties to even, a NaN kept quiet.
uint bf16Round(uint u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 64u) << 16;
    return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) << 16;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= pc.count) return;
    const uint b = x[pc.xoff + i];
    dst[pc.doff + i] = MODE == 0u ? f16Round(b) : bf16Round(b);
}
