#version 450
// Q8_K activation quantizer: blocks of 256 values to 256 int8 quants and an
// F32 scale, bit for bit as engine/tensor's quantizeQ8K (kquant.go), which
// is ggml's quantize_row_q8_K_ref: max is the value of largest magnitude
// (the first one, its sign kept; NaN never), iscale = -127/max, q =
// min(127, nearest_int(iscale*v)) with nearest_int's 1.5*2^23 trick
// (halves to even), d = 1/iscale; a block of zeros gives d = 0 and zero
// quants. Divisions are done in integers (divRN): Vulkan's OpFDiv may be
// 2.5 ULP off. The block sums ggml keeps (bsums) are not stored: the
// products take them from the quants.
//
// One workgroup of 64 per block, four values each. x holds the blocks one
// after the other (a vector's length is a multiple of 256); block i's
// quants go to q[qoff+64i..], four to a word, little end first, and its
// scale to d[doff+i].
layout(local_size_x = 64) in;

layout(push_constant) uniform PC { uint blocks; uint xoff; uint qoff; uint doff; } pc;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

// divRN is a/b rounded to nearest even, for a >= 0 and b > 0 (finite or
// infinite, normal or subnormal), by long division of the significands
// (quant_q8_0.comp's).
float divRN(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    if (ua > 0x7f800000u || ub > 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
    if (ua == 0x7f800000u) return ub == 0x7f800000u ? uintBitsToFloat(0x7fc00000u) : a;
    if (ub == 0x7f800000u || ua == 0u) return 0.0;
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7fffffu, mb = ub & 0x7fffffu;
    if (ea == 0) { int s = 23 - findMSB(ma); ma <<= s; ea = 1 - s; } else ma |= 0x800000u;
    if (eb == 0) { int s = 23 - findMSB(mb); mb <<= s; eb = 1 - s; } else mb |= 0x800000u;
    int e = ea - eb + 127;
    if (ma < mb) { ma <<= 1; e--; }
    uint qt = 0u, rem = ma;
    for (int i = 0; i < 26; i++) {
        qt <<= 1;
        if (rem >= mb) { rem -= mb; qt |= 1u; }
        rem <<= 1;
    }
    if (e >= 255) return uintBitsToFloat(0x7f800000u);
    int t = 2 + max(0, 1 - e);
    if (t > 27) return 0.0;
    uint m = qt >> t;
    uint g = (qt >> (t - 1)) & 1u;
    bool sticky = rem != 0u || (qt & ((1u << (t - 1)) - 1u)) != 0u;
    if (g == 1u && (sticky || (m & 1u) == 1u)) m++;
    uint bits = (uint(max(e, 1) - 1) << 23) + m;
    return uintBitsToFloat(min(bits, 0x7f800000u));
}

// quant is int8(min(127, nearest_int(iscale*v))) as Go converts it.
int quant(float v, float iscale) {
    precise float f = iscale * v;
    precise float t = f + 12582912.0;
    int i = isnan(t) ? 0 : int(floatBitsToUint(t) & 0x7fffffu) - 0x400000;
    return bitfieldExtract(min(127, i), 0, 8);
}

shared float sAmax[64];
shared uint sIdx[64];

void main() {
    const uint blk = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (blk >= pc.blocks) return; // uniform over the workgroup
    const uint t = gl_LocalInvocationID.x;
    const uint base = pc.xoff + 256u * blk + 4u * t;
    float v[4];
    float best = 0.0;
    uint idx = 0xffffffffu;
    for (uint j = 0u; j < 4u; j++) {
        v[j] = x[base + j];
        const float a = abs(v[j]);
        if (a > best) { best = a; idx = 4u * t + j; } // NaN never wins
    }
    sAmax[t] = best;
    sIdx[t] = idx;
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
        if (t < h) {
            const float a = sAmax[t + h];
            const uint i = sIdx[t + h];
            if (a > sAmax[t] || (a == sAmax[t] && i < sIdx[t])) { sAmax[t] = a; sIdx[t] = i; }
        }
        barrier();
    }
    const float amax = sAmax[0];
    float iscale = 0.0;
    if (amax != 0.0) {
        const float mx = x[pc.xoff + 256u * blk + sIdx[0]];
        iscale = divRN(127.0, amax);
        if (mx > 0.0) iscale = -iscale;
    }
    uint w = 0u;
    for (uint j = 0u; j < 4u; j++) w |= uint(amax != 0.0 ? quant(v[j], iscale) & 0xff : 0) << (8u * j);
    q[pc.qoff + 64u * blk + t] = w;
    if (t == 0u) {
        float dd = 0.0;
        if (amax != 0.0) {
            const float ai = abs(iscale); // 0 where amax is infinite: d is then infinite
            dd = ai == 0.0 ? uintBitsToFloat(0x7f800000u) : divRN(1.0, ai);
            if ((floatBitsToUint(iscale) & 0x80000000u) != 0u) dd = -dd;
        }
        d[pc.doff + blk] = dd;
    }
}
