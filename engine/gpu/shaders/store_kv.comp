#version 450
// Writes n rows of dim float32 values of K and V into cache slots firstSlot..
// of the K and V caches, as the CPU engine's attention.forward does: F32
// bits copied, F16 by tensor.F32ToF16 (round to nearest even, ggml's NaN),
// E4M3 by tensor.EncodeE4M3Row (the code of x/scale, the quotient rounded
// to float32 first, then to E4M3, saturating at ±448). Both conversions
// work on the bits with integer operations, the quotient by long
// division, so no float behaviour of the GPU (flushed denormals, an
// approximate division) can change a code. One invocation writes one
// 32-bit word of a cache: 1 F32, 2 F16 or 4 E4M3 values.
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KV = 0; // 0 F32, 1 F16, 2 E4M3
layout(push_constant) uniform PC {
    uint words;        // words of one cache to write: n*dim / values per word
    uint kOff, vOff;   // word offsets of the caches' first slot to write
    uint ksOff, vsOff; // float offsets of the sources
    uint kScale, vScale; // E4M3 scales' bits
} pc;
layout(std430, binding = 0) buffer KC { uint kc[]; };
layout(std430, binding = 1) buffer VC { uint vc[]; };
layout(std430, binding = 2) readonly buffer KS { uint ks[]; };
layout(std430, binding = 3) readonly buffer VS { uint vs[]; };

// tensor.F32ToF16 on the bits b.
uint toF16(uint b) {
    const uint sign = (b >> 16) & 0x8000u;
    const uint a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a >= 0x38800000u) {
        uint h = (a - 0x38000000u) >> 13;
        const uint rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) h++;
        return sign | h;
    }
    if (a >= 0x33000000u) {
        const uint e = a >> 23;
        const uint m = (a & 0x7fffffu) | 0x800000u;
        const uint s = 126u - e;
        uint h = m >> s;
        const uint rem = m & ((1u << s) - 1u);
        const uint half_ = 1u << (s - 1u);
        if (rem > half_ || (rem == half_ && (h & 1u) == 1u)) h++;
        return sign | h;
    }
    return sign;
}

// normal splits a non-zero finite magnitude a into m (24 bits, the top one
// set) and e: a = m * 2^(e-23).
void normal(uint a, out uint m, out int e) {
    const uint ex = a >> 23;
    if (ex == 0u) {
        const int lz = 23 - findMSB(a);
        m = a << uint(lz);
        e = -126 - lz;
    } else {
        m = (a & 0x7fffffu) | 0x800000u;
        e = int(ex) - 127;
    }
}

// e4m3Mag is tensor's encodeE4M3Mag of the float32 m * 2^(e-23).
uint e4m3Mag(uint m, int e) {
    if (e > 8 || (e == 8 && m >= 0xe00000u)) return 0x7eu; // >= 448
    if (e < -6) { // below 2^-6: multiples of 2^-9, RoundToEven(a*512)
        const int sh = 14 - e;
        if (sh >= 32) return 0u;
        uint r = m >> uint(sh);
        const uint rem = m & ((1u << uint(sh)) - 1u);
        const uint half_ = 1u << uint(sh - 1);
        if (rem > half_ || (rem == half_ && (r & 1u) == 1u)) r++;
        return r;
    }
    const uint f = m & 0x7fffffu;
    uint r = f >> 20;
    const uint rest = f & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (r & 1u) == 1u)) r++;
    return min(uint(e + 7) * 8u + r, 0x7eu); // a carry bumps the exponent
}

// toE4M3 is tensor.F32ToE4M3(x / scale) for the bits of x and of a
// positive finite scale.
uint toE4M3(uint b, uint scale) {
    const uint sign = (b >> 24) & 0x80u;
    const uint a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7fu;
    if (a == 0x7f800000u) return sign | 0x7eu;
    if (a == 0u) return sign;
    uint mx, ms;
    int ex, es;
    normal(a, mx, ex);
    if (scale == 0x3f800000u) return sign | e4m3Mag(mx, ex);
    normal(scale, ms, es);
    int e = ex - es;
    uint rem = mx;
    if (rem < ms) {
        rem <<= 1;
        e--;
    }
    // ms <= rem < 2*ms: 25 bits of the quotient rem/ms in [1, 2)
    uint q = 0u;
    for (int i = 0; i < 25; i++) {
        q <<= 1;
        if (rem >= ms) {
            rem -= ms;
            q |= 1u;
        }
        rem <<= 1;
    }
    uint m = q >> 1;
    if ((q & 1u) != 0u && (rem != 0u || (m & 1u) != 0u)) m++; // float32 rounding, ties to even
    if (m == 0x1000000u) {
        m = 0x800000u;
        e++;
    }
    if (e > 127) return sign | 0x7eu; // the float32 quotient is +-Inf
    if (e < -126) return sign;        // a float32 subnormal: below every E4M3 code but 0
    return sign | e4m3Mag(m, e);
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= 2u * pc.words) return;
    const bool isV = i >= pc.words;
    const uint j = isV ? i - pc.words : i;
    const uint per = KV == 0u ? 1u : KV == 1u ? 2u : 4u;
    const uint src = (isV ? pc.vsOff : pc.ksOff) + j * per;
    uint w = 0u;
    for (uint l = 0u; l < per; l++) {
        const uint b = isV ? vs[src + l] : ks[src + l];
        if (KV == 0u) {
            w = b;
        } else if (KV == 1u) {
            w |= toF16(b) << (16u * l);
        } else {
            w |= toE4M3(b, isV ? pc.vScale : pc.kScale) << (8u * l);
        }
    }
    if (isV) {
        vc[pc.vOff + j] = w;
    } else {
        kc[pc.kOff + j] = w;
    }
}
