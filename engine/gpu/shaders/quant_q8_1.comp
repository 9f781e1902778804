#version 450
// Q8_1 activation quantizer, as engine/tensor's quantizeQ8_1 (kquant.go),
// ggml-cpu's x86 quantize_row_q8_1: the quants and F16-rounded scale of
// quant_q8_0's x86 flavour (FLAVOR 1, whose functions this copies), and
// per block s = F16(d*Σq) with d = amax/127 before its rounding: the sum
// the Q4_1 and Q5_1 products take the minimums with. Divisions are done in
// integers (divRN): Vulkan's OpFDiv may be 2.5 ULP off.
//
// One invocation per block. Block i's quants go to q[qoff+8i..], four to
// a word, little end first, its scale to d[doff+i] and its s to d[soff+i].
layout(constant_id = 0) const uint WG = 64;
const uint FLAVOR = 1u;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC { uint blocks; uint xoff; uint qoff; uint doff; uint soff; } pc;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

// divRN is a/b rounded to nearest even, for a >= 0 and b > 0 (finite or
// infinite, normal or subnormal), by long division of the significands.
float divRN(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    if (ua > 0x7f800000u || ub > 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
    if (ua == 0x7f800000u) return ub == 0x7f800000u ? uintBitsToFloat(0x7fc00000u) : a;
    if (ub == 0x7f800000u || ua == 0u) return 0.0;
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7fffffu, mb = ub & 0x7fffffu;
    if (ea == 0) { int s = 23 - findMSB(ma); ma <<= s; ea = 1 - s; } else ma |= 0x800000u;
    if (eb == 0) { int s = 23 - findMSB(mb); mb <<= s; eb = 1 - s; } else mb |= 0x800000u;
    int e = ea - eb + 127; // biased exponent of the quotient, whose significand is in [1,2)
    if (ma < mb) { ma <<= 1; e--; }
    uint qt = 0u, rem = ma;
    for (int i = 0; i < 26; i++) { // 1 integer bit, 23 fraction bits, 2 more
        qt <<= 1;
        if (rem >= mb) { rem -= mb; qt |= 1u; }
        rem <<= 1;
    }
    if (e >= 255) return uintBitsToFloat(0x7f800000u);
    int t = 2 + max(0, 1 - e); // bits to drop: 2, more for a subnormal result
    if (t > 27) return 0.0;
    uint m = qt >> t;
    uint g = (qt >> (t - 1)) & 1u;
    bool sticky = rem != 0u || (qt & ((1u << (t - 1)) - 1u)) != 0u;
    if (g == 1u && (sticky || (m & 1u) == 1u)) m++;
    uint bits = (uint(max(e, 1) - 1) << 23) + m;
    return uintBitsToFloat(min(bits, 0x7f800000u));
}

// f16Round is F16ToF32(F32ToF16(f)) (engine/tensor/half.go), in integers.
float f16Round(float f) {
    const uint b = floatBitsToUint(f);
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
    // widen (the value is finite unless it overflowed, or NaN)
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * (1.0 / 16777216.0)));
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

// quant rounds v*id to an integer as the flavour does and converts it to
// int8 as C does for in-range values; NaN gives 0 (roundToInt8).
int quant(float v, float id) {
    precise float r = v * id;
    if (isnan(r)) return 0;
    precise float a = abs(r);
    precise float t = floor(a);
    precise float f = a - t;
    if (FLAVOR == 0u) {
        if (f >= 0.5) t += 1.0;
    } else if (f > 0.5 || (f == 0.5 && (uint(t) & 1u) == 1u)) {
        t += 1.0;
    }
    // The low byte, as Go's int8(int32(r)) keeps; beyond int32 (only with
    // an infinite id, from an amax below 2^-121) amd64 gives 0x80000000.
    const int i = t < 2147483648.0 ? int(t) : int(0x80000000u);
    return bitfieldExtract(r < 0.0 ? -i : i, 0, 8);
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= pc.blocks) return;
    const uint base = pc.xoff + 32u * i;
    float amax = 0.0;
    for (uint j = 0u; j < 32u; j++) {
        const float a = abs(x[base + j]);
        if (!(amax > a)) amax = a; // ggml's MAX(amax, fabsf(v)), NaN included
    }
    const float dv = divRN(amax, 127.0);
    float id = 0.0;
    if (FLAVOR == 1u) {
        if (amax != 0.0) id = divRN(127.0, amax);
    } else if (dv != 0.0) {
        id = divRN(1.0, dv);
    }
    int sum = 0;
    for (uint k = 0u; k < 8u; k++) {
        uint w = 0u;
        for (uint j = 0u; j < 4u; j++) {
            const int qv = quant(x[base + 4u * k + j], id);
            sum += bitfieldExtract(qv, 0, 8);
            w |= uint(qv & 0xff) << (8u * j);
        }
        q[pc.qoff + 8u * i + k] = w;
    }
    d[pc.doff + i] = f16Round(dv);
    precise float sv = dv * float(sum);
    d[pc.soff + i] = f16Round(sv);
}
