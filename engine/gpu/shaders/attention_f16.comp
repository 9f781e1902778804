#version 450
// Attention over an F16 cache as ggml-cpu's one-row flash attention
// computes it (ggml_compute_forward_flash_attn_ext_f16_one_chunk, which
// engine/model's attendF16 reproduces), for batches of fewer than 64
// tokens: Q rounded to F16; each score K.Q in ggml_vec_dot_f16's order (32
// float32 accumulators over blocks of 32, reduced as ggml does, the
// leftovers added after); an online softmax in float32 taken slot by slot
// in cache order; a running output kept in F16 (every rescale and every
// multiply-add rounded through F16, ggml_vec_scale_f16 and
// ggml_vec_mad_f16); and a final multiplication by 1/sum. llama.cpp's
// outputs with its default F16 cache differ from float32 attention by
// these roundings, so keeping them keeps the GPU's greedy tokens on
// llama.cpp's where two logits are nearly tied.
//
// A workgroup takes one (token, query head); its 64 invocations score 64
// slots at a time, then each walks those slots in order for the output
// dimensions it owns (d = tid, tid+64, ...), all of them taking the same
// softmax steps.
layout(local_size_x = 64) in;
layout(push_constant) uniform PC {
    uint tokens, heads, kvHeads, hd;
    uint base, chain, qOff, oOff; // float offsets
    uint kOff, vOff, aOff, pad;   // word offsets (the cache: F16 pairs; anc: int32s)
    float scale;
} pc;
layout(std430, binding = 0) writeonly buffer O { float outv[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) readonly buffer K { uint kc[]; };
layout(std430, binding = 3) readonly buffer V { uint vc[]; };
layout(std430, binding = 4) readonly buffer A { int anc[]; };

const uint WG = 64u;
const uint MAXD = 256u;
const uint PER = MAXD / WG;

shared float qs[MAXD];
shared float sc[WG];
shared uint slotS[WG];

// F16 bits to float32 with integer operations (shaders/README.md).
float f16(uint h) {
    const uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * (1.0 / 16777216.0)));
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

// tensor.F32ToF16 on the bits b (round to nearest even).
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

float roundF16(float x) { return f16(toF16(floatBitsToUint(x))); }

// expf as glibc computes it (engine/model's libm.go expf, which the CPU
// engine's softmax takes), in float64; for x <= 0, as the softmax needs.
const uvec2 expfTab[32] = uvec2[32](
    uvec2(0x00000000u, 0x3ff00000u),
    uvec2(0xd3158574u, 0x3fefd9b0u),
    uvec2(0x6cf9890fu, 0x3fefb558u),
    uvec2(0xd0125b51u, 0x3fef9301u),
    uvec2(0x3c7d517bu, 0x3fef72b8u),
    uvec2(0x3168b9aau, 0x3fef5487u),
    uvec2(0x6e756238u, 0x3fef387au),
    uvec2(0xf51fdee1u, 0x3fef1e9du),
    uvec2(0x0a31b715u, 0x3fef06feu),
    uvec2(0x373aa9cbu, 0x3feef1a7u),
    uvec2(0x4c123422u, 0x3feedea6u),
    uvec2(0x6061892du, 0x3feece08u),
    uvec2(0xd5362a27u, 0x3feebfdau),
    uvec2(0x569d4f82u, 0x3feeb42bu),
    uvec2(0xdd485429u, 0x3feeab07u),
    uvec2(0xb03a5585u, 0x3feea47eu),
    uvec2(0x667f3bcdu, 0x3feea09eu),
    uvec2(0xe8ec5f74u, 0x3fee9f75u),
    uvec2(0x73eb0187u, 0x3feea114u),
    uvec2(0x994cce13u, 0x3feea589u),
    uvec2(0x422aa0dbu, 0x3feeace5u),
    uvec2(0xb0cdc5e5u, 0x3feeb737u),
    uvec2(0x82a3f090u, 0x3feec491u),
    uvec2(0xb23e255du, 0x3feed503u),
    uvec2(0x995ad3adu, 0x3feee89fu),
    uvec2(0xf2fb5e47u, 0x3feeff76u),
    uvec2(0xdd85529cu, 0x3fef199bu),
    uvec2(0xdcef9069u, 0x3fef3720u),
    uvec2(0xdcfba487u, 0x3fef5818u),
    uvec2(0x337b9b5fu, 0x3fef7c97u),
    uvec2(0xa2a490dau, 0x3fefa4afu),
    uvec2(0x5b6e4540u, 0x3fefd076u));
float glibcExpf(float x) {
    if (isinf(x) || x < -103.97207641601562) return 0.0;
    precise double z = packDouble2x32(uvec2(0x652b82feu, 0x40471547u)) * double(x);
    precise double kd = z + packDouble2x32(uvec2(0x00000000u, 0x43380000u));
    const uvec2 ki = unpackDouble2x32(kd);
    kd = kd - packDouble2x32(uvec2(0x00000000u, 0x43380000u));
    precise double r = z - kd;
    const uvec2 tb = expfTab[ki.x & 31u];
    const double s = packDouble2x32(uvec2(tb.x, tb.y + (ki.x << 15)));
    precise double zz = fma(packDouble2x32(uvec2(0x4b912394u, 0x3ebc6af8u)), r, packDouble2x32(uvec2(0x50fac4f3u, 0x3f2ebfceu)));
    precise double r2 = r * r;
    precise double y = fma(packDouble2x32(uvec2(0xff0c52d6u, 0x3f962e42u)), r, 1.0LF);
    y = fma(zz, r2, y);
    return float(y * s);
}

float kAt(uint e) { const uint w = kc[pc.kOff + (e >> 1)]; return f16((w >> (16u * (e & 1u))) & 0xffffu); }
float vAt(uint e) { const uint w = vc[pc.vOff + (e >> 1)]; return f16((w >> (16u * (e & 1u))) & 0xffffu); }

void main() {
    const uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= pc.tokens * pc.heads) return;
    const uint tid = gl_LocalInvocationID.x;
    const uint i = wg / pc.heads, h = wg % pc.heads;
    const uint hd = pc.hd;
    const uint kvh = h / (pc.heads / pc.kvHeads);
    const uint row = pc.kvHeads * hd; // cache values per slot
    for (uint d = tid; d < hd; d += WG) qs[d] = roundF16(q[pc.qOff + wg * hd + d]);
    uint nvis, ancStart = 0u;
    if (pc.chain != 0u) {
        nvis = pc.base + i + 1u;
    } else {
        ancStart = uint(anc[pc.aOff + i]);
        nvis = pc.base + (uint(anc[pc.aOff + i + 1u]) - ancStart);
    }
    float acc[PER];
    for (uint k = 0u; k < PER; k++) acc[k] = 0.0;
    float M = uintBitsToFloat(0xff800000u); // -inf
    precise float S = 0.0;
    const uint np = hd & ~31u;
    barrier();
    for (uint b = 0u; b < nvis; b += WG) {
        const uint p = b + tid;
        if (p < nvis) {
            uint slot = p;
            if (pc.chain == 0u && p >= pc.base) {
                slot = pc.base + uint(anc[pc.aOff + pc.tokens + 1u + ancStart + (p - pc.base)]);
            }
            slotS[tid] = slot;
            const uint e0 = slot * row + kvh * hd;
            // ggml_vec_dot_f16: the products of F16 values are exact in
            // float32, so only the order of the additions matters.
            float a32[32];
            for (uint l = 0u; l < 32u; l++) a32[l] = 0.0;
            for (uint d0 = 0u; d0 < np; d0 += 32u) {
                for (uint l = 0u; l < 32u; l++) {
                    precise float pr = kAt(e0 + d0 + l) * qs[d0 + l];
                    precise float s_ = a32[l] + pr;
                    a32[l] = s_;
                }
            }
            float sum = 0.0;
            if (np > 0u) {
                // ggmlReduce32: x0 += x2, x1 += x3 lane by lane, x0 += x1,
                // the high four lanes onto the low four, two horizontal adds
                precise float t[4];
                for (uint l = 0u; l < 4u; l++) {
                    precise float x0a = a32[l] + a32[16u + l];
                    precise float x1a = a32[8u + l] + a32[24u + l];
                    precise float x0b = a32[4u + l] + a32[20u + l];
                    precise float x1b = a32[12u + l] + a32[28u + l];
                    precise float ya = x0a + x1a;
                    precise float yb = x0b + x1b;
                    t[l] = ya + yb;
                }
                precise float u0 = t[0] + t[1];
                precise float u1 = t[2] + t[3];
                sum = u0 + u1;
            }
            // leftovers: added in float64 by ggml (ggml_float)
            double dsum = double(sum);
            for (uint d = np; d < hd; d++) dsum += double(kAt(e0 + d) * qs[d]);
            precise float sf = float(dsum);
            precise float scaled = sf * pc.scale;
            sc[tid] = scaled;
        }
        barrier();
        const uint m = min(WG, nvis - b);
        for (uint j = 0u; j < m; j++) {
            const float s = sc[j];
            float ms = 1.0, vs = 1.0;
            if (s > M) {
                ms = glibcExpf(M - s);
                M = s;
            } else {
                vs = glibcExpf(s - M);
            }
            precise float sm = S * ms;
            S = sm + vs;
            const uint e0 = slotS[j] * row + kvh * hd;
            for (uint k = 0u; k < PER; k++) {
                const uint d = tid + k * WG;
                if (d < hd) {
                    float a = acc[k];
                    if (ms != 1.0) {
                        precise float am = a * ms;
                        a = roundF16(am);
                    }
                    // ggml fuses this multiply-add: in float64 the product is exact
                    // and so, here, is the sum, so one rounding to float32 is its bits
                    // (a driver may not fuse fma(): Mesa 22.3 does not).
                    a = roundF16(float(fma(double(vAt(e0 + d)), double(vs), double(a))));
                    acc[k] = a;
                }
            }
        }
        barrier();
    }
    // 1/S as the CPU's correctly rounded float32 division: Vulkan lets a
    // float division be off by 2.5 ulp (NVIDIA's is), a float64 one is
    // exact to far below a float32 ulp, and rounding it to float32 is the
    // CPU's bits (the exact 1/S of a float S is never a float32 midpoint).
    const float inv = S == 0.0 ? 0.0 : float(1.0LF / double(S));
    for (uint k = 0u; k < PER; k++) {
        const uint d = tid + k * WG;
        if (d < hd) outv[pc.oOff + wg * hd + d] = acc[k] * inv;
    }
}
