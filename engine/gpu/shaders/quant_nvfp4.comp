#version 450
// W4A4 activations: each vector quantized to NVFP4 per 16 values, bit for
// bit as engine/tensor's quantizeActFP4 (nvfp4a4.go): the global scale
// G = 1/input_scale (the weight's, else amax(|x|)/(6*448) of the vector),
// per 16 values SF = UE4M3(min(G*(vmax*(1/6)), 448)) and the E2M1 code of
// x*o, o = 1/(SF*(1/G)), clamped to ±6, ties to even. Divisions are done
// in integers (divRN): Vulkan's OpFDiv may be 2.5 ULP off.
//
// One workgroup per vector. Vector v's codes go to q[qoff + v*cols/4 ..] as
// ggml's doubled E2M1 integers (int8, four to a word, in value order), its
// sub-block scales SF/4 to s[soff + v*cols/16 + k], and 1/G to s[ioff + v]
// (all 0 for a vector of zeros without an input scale).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC { uint n; uint cols; uint xoff; uint qoff; uint soff; uint ioff; float inputScale; } pc;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, binding = 2) writeonly buffer S { float s[]; };

shared float red[WG];

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

// ue4m3 is nvScale[F32ToUE4M3(x)] (fp8.go, nvfp4.go): x rounded to unsigned
// E4M3, ties to even, saturating at 448, and decoded; NaN gives 0 (nvScale
// reads the NaN code as 0), as do zero and negative values.
float ue4m3(float x) {
    if (isnan(x) || !(x > 0.0)) return 0.0;
    uint c;
    if (x >= 448.0) c = 0x7eu;
    else if (x < 1.0 / 64.0) { // subnormal codes: multiples of 2^-9
        precise float y = x * 512.0;
        precise float t = floor(y);
        precise float f = y - t;
        if (f > 0.5 || (f == 0.5 && (uint(t) & 1u) == 1u)) t += 1.0;
        c = uint(t);
    } else {
        const uint b = floatBitsToUint(x);
        const uint e = (b >> 23) - 127u + 7u, m = b & 0x7fffffu;
        uint r = m >> 20;
        const uint rest = m & 0xfffffu;
        if (rest > 0x80000u || (rest == 0x80000u && (r & 1u) == 1u)) r++;
        c = min((e << 3) + r, 0x7eu);
    }
    const uint e = c >> 3, m = c & 7u;
    if (e == 0u) return float(m) * (1.0 / 512.0);
    return uintBitsToFloat(((e + 120u) << 23) | (m << 20));
}

// e2m1x2 is nvI8[F32ToE2M1(x)]: ggml's doubled E2M1 integer of x rounded to
// nearest even (x is already clamped to ±6).
int e2m1x2(float x) {
    const float a = abs(x);
    int m;
    if (a <= 0.25) m = 0;
    else if (a < 0.75) m = 1;
    else if (a <= 1.25) m = 2;
    else if (a < 1.75) m = 3;
    else if (a <= 2.5) m = 4;
    else if (a < 3.5) m = 6;
    else if (a <= 5.0) m = 8;
    else m = 12;
    return (floatBitsToUint(x) >> 31) != 0u ? -m : m;
}

void main() {
    const uint v = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (v >= pc.n) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint base = pc.xoff + v * pc.cols;
    float is = pc.inputScale;
    if (!(is > 0.0)) { // no input scale: the vector's own, from its amax
        float amax = 0.0;
        for (uint i = tid; i < pc.cols; i += WG) {
            const float a = abs(x[base + i]);
            if (a > amax) amax = a;
        }
        red[tid] = amax;
        barrier();
        for (uint h = WG / 2u; h > 0u; h >>= 1) {
            if (tid < h && red[tid + h] > red[tid]) red[tid] = red[tid + h];
            barrier();
        }
        is = divRN(red[0], 2688.0); // 6*448
    }
    bool ok = is > 0.0 && !isinf(is);
    const float g = ok ? divRN(1.0, is) : 0.0;
    ok = ok && !isinf(g);
    const float invG = ok ? divRN(1.0, g) : 0.0;
    const float inv6 = uintBitsToFloat(0x3e2aaaabu); // float32(1.0/6)
    for (uint k = tid; k < pc.cols / 16u; k += WG) {
        const uint xb = base + 16u * k;
        float vmax = 0.0;
        for (uint i = 0u; i < 16u; i++) {
            const float a = abs(x[xb + i]);
            if (a > vmax) vmax = a;
        }
        precise float sf = 0.0;
        if (ok) {
            precise float t = vmax * inv6;
            precise float y = g * t;
            sf = ue4m3(min(y, 448.0));
        }
        precise float p = sf * invG;
        const float o = sf != 0.0 ? divRN(1.0, p) : 0.0;
        for (uint w = 0u; w < 4u; w++) {
            uint word = 0u;
            for (uint j = 0u; j < 4u; j++) {
                precise float y = x[xb + 4u * w + j] * o;
                const int c = ok ? e2m1x2(min(max(y, -6.0), 6.0)) : 0;
                word |= uint(c & 0xff) << (8u * j);
            }
            q[pc.qoff + (v * pc.cols) / 4u + 4u * k + w] = word;
        }
        s[pc.soff + (v * pc.cols) / 16u + k] = sf * 0.25;
    }
    if (tid == 0u) s[pc.ioff + v] = invG;
}
