#version 450
// Softmax attention over the KV cache with grouped-query heads, in float32
// with an online (flash-style) softmax. A workgroup takes R = G*T query rows
// that share one KV head: G query heads of T consecutive tokens (T = 1 for
// a tree batch), and one split of the slots they see; it walks them in
// blocks of Bk slots: the scores of every (row, slot) pair, the running
// maximum of each row, the block's exp(score - max), then the rows' sums
// and the values. With one split it writes out = sum p*V / sum p; with
// several, the partial (max, sum, unnormalised output) of its split, which
// attention_combine merges.
//
// Visible slots: a chain's token i sees [0, base+i]; a tree's token i sees
// [0, base) and base + idx[off[i]:off[i+1]] (anc: int32 off[tokens+1], then
// idx, engine/model's ancestry). Scores are (q.k)*sk, with sk = 1/sqrt(hd)
// (times kScale for E4M3, whose values are codes times the scale, as
// engine/model's attendFP8 takes them); the output of an E4M3 cache is
// multiplied by vScale.
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KV = 0; // 0 F32, 1 F16, 2 E4M3
layout(push_constant) uniform PC {
    uint tokens, heads, kvHeads, hd;
    uint base, chain, qOff, oOff; // float offsets
    uint kOff, vOff, aOff, sOff;  // word offsets (anc: int32s, scratch: floats)
    uint G, T, nTiles, headTiles;
    uint S, chunk, Bk, pad;
    float sk, vScale;
} pc;
layout(std430, binding = 0) writeonly buffer O { float outv[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) readonly buffer K { uint kc[]; };
layout(std430, binding = 3) readonly buffer V { uint vc[]; };
layout(std430, binding = 4) readonly buffer A { int anc[]; };
layout(std430, binding = 5) writeonly buffer P { float part[]; };

const uint WG = 256u;
const uint MAXQ = 2048u; // R*hd
const uint QS = MAXQ + 32u; // R*(hd+1): rows padded by a word, so that rows read together fall in different banks
const uint MAXSC = 1024u; // R*Bk
const uint MAXR = 32u;
const uint NO = MAXQ / WG; // outputs per invocation
const float LOW = -3.402823466e38;

shared float qs[QS];
shared float sc[MAXSC]; // slot-major: sc[p*R + r]
shared uint slots[WG];
shared float mS[MAXR], lS[MAXR], aS[MAXR];
shared uint limS[MAXR];

// F16 bits to float32 with integer operations (shaders/README.md).
float f16(uint h) {
    const uint sign = (h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) {
        return uintBitsToFloat(sign | floatBitsToUint(float(m) * 5.9604644775390625e-8)); // m * 2^-24, exact
    }
    if (e == 31u) return uintBitsToFloat(sign | (m == 0u ? 0x7f800000u : 0x7fc00000u | (m << 13)));
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// E4M3 code to float32 (tensor.E4M3ToF32).
float e4m3(uint c) {
    const uint sign = (c & 0x80u) << 24;
    const uint e = (c >> 3) & 15u, m = c & 7u;
    if ((c & 0x7fu) == 0x7fu) return uintBitsToFloat(sign | 0x7fc00000u);
    if (e == 0u) return uintBitsToFloat(sign | floatBitsToUint(float(m) * 0.001953125)); // m * 2^-9
    return uintBitsToFloat(sign | ((e + 120u) << 23) | (m << 20));
}

// value d of the cache row that starts at element e (e a multiple of 4)
float kvAt(bool isV, uint e, uint d) {
    const uint off = isV ? pc.vOff : pc.kOff;
    if (KV == 0u) {
        return uintBitsToFloat(isV ? vc[off + e + d] : kc[off + e + d]);
    }
    if (KV == 1u) {
        const uint w = isV ? vc[off + ((e + d) >> 1)] : kc[off + ((e + d) >> 1)];
        return f16((w >> (16u * (d & 1u))) & 0xffffu);
    }
    const uint w = isV ? vc[off + ((e + d) >> 2)] : kc[off + ((e + d) >> 2)];
    return e4m3((w >> (8u * (d & 3u))) & 0xffu);
}

float dotK(uint r, uint e) {
    const uint hd = pc.hd, qb = r * (hd + 1u);
    float s = 0.0;
    if (KV == 0u) {
        for (uint j = 0u; j < hd; j++) s += qs[qb + j] * uintBitsToFloat(kc[pc.kOff + e + j]);
    } else if (KV == 1u) {
        const uint wb = pc.kOff + (e >> 1);
        for (uint j = 0u; j < hd / 2u; j++) {
            const uint w = kc[wb + j];
            s += qs[qb + 2u * j] * f16(w & 0xffffu);
            s += qs[qb + 2u * j + 1u] * f16(w >> 16);
        }
    } else {
        const uint wb = pc.kOff + (e >> 2);
        for (uint j = 0u; j < hd / 4u; j++) {
            const uint w = kc[wb + j];
            s += qs[qb + 4u * j] * e4m3(w & 0xffu);
            s += qs[qb + 4u * j + 1u] * e4m3((w >> 8) & 0xffu);
            s += qs[qb + 4u * j + 2u] * e4m3((w >> 16) & 0xffu);
            s += qs[qb + 4u * j + 3u] * e4m3(w >> 24);
        }
    }
    return s;
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint sp = wg % pc.S;
    wg /= pc.S;
    const uint ht = wg % pc.headTiles;
    wg /= pc.headTiles;
    const uint kh = wg % pc.kvHeads;
    const uint tile = wg / pc.kvHeads;
    if (tile >= pc.nTiles) return;
    const uint t = gl_LocalInvocationID.x;
    const uint hd = pc.hd, G = pc.G, R = G * pc.T, Bk = pc.Bk;
    const uint group = pc.heads / pc.kvHeads;
    const uint kvDim = pc.kvHeads * hd;
    const uint tok0 = tile * pc.T;

    // the slots the workgroup walks: positions [0, len) of its list
    uint len, idxBase = 0u;
    if (pc.chain != 0u) {
        len = pc.base + min(tok0 + pc.T, pc.tokens);
    } else {
        const int o0 = anc[pc.aOff + tok0], o1 = anc[pc.aOff + tok0 + 1u];
        len = pc.base + uint(o1 - o0);
        idxBase = pc.aOff + pc.tokens + 1u + uint(o0);
    }

    for (uint i = t; i < R * hd; i += WG) {
        const uint r = i / hd, d = i - r * hd;
        const uint tok = tok0 + r / G, h = kh * group + ht * G + r % G;
        qs[r * (hd + 1u) + d] = tok < pc.tokens ? q[pc.qOff + (tok * pc.heads + h) * hd + d] : 0.0;
    }
    if (t < R) {
        const uint tok = tok0 + t / G;
        mS[t] = LOW;
        lS[t] = 0.0;
        limS[t] = tok >= pc.tokens ? 0u : pc.chain != 0u ? pc.base + tok + 1u : len;
    }
    float acc[NO];
    for (uint k = 0u; k < NO; k++) acc[k] = 0.0;
    const bool sameD = WG % hd == 0u; // every output of an invocation has the same d
    barrier();

    const uint pLo = sp * pc.chunk, pHi = min(pLo + pc.chunk, len);
    for (uint b0 = pLo; b0 < pHi; b0 += Bk) {
        const uint nb = min(Bk, pHi - b0);
        if (t < nb) {
            const uint p = b0 + t;
            slots[t] = (pc.chain != 0u || p < pc.base) ? p : pc.base + uint(anc[idxBase + p - pc.base]);
        }
        barrier();
        // scores; row r of consecutive invocations read the same key
        for (uint i = t; i < R * nb; i += WG) {
            const uint p = i / R, r = i - p * R;
            if (b0 + p < limS[r]) sc[i] = dotK(r, slots[p] * kvDim + kh * hd) * pc.sk;
        }
        barrier();
        if (t < R) {
            float bm = LOW;
            const uint lim = limS[t];
            for (uint p = 0u; p < nb && b0 + p < lim; p++) bm = max(bm, sc[p * R + t]);
            const float mOld = mS[t], mNew = max(mOld, bm);
            aS[t] = mNew > mOld ? exp(mOld - mNew) : 1.0;
            mS[t] = mNew;
        }
        barrier();
        for (uint i = t; i < R * nb; i += WG) {
            const uint p = i / R, r = i - p * R;
            sc[i] = b0 + p < limS[r] ? exp(sc[i] - mS[r]) : 0.0;
        }
        barrier();
        if (t < R) {
            float s = 0.0;
            for (uint p = 0u; p < nb; p++) s += sc[p * R + t];
            lS[t] = lS[t] * aS[t] + s;
        }
        if (sameD) {
            const uint d = t % hd;
            uint rs[NO];
            for (uint k = 0u; k < NO; k++) {
                rs[k] = (t + k * WG) / hd;
                if (rs[k] < R) acc[k] *= aS[rs[k]];
            }
            for (uint p = 0u; p < nb; p++) {
                const float v = kvAt(true, slots[p] * kvDim + kh * hd, d);
                for (uint k = 0u; k < NO; k++) {
                    if (rs[k] < R) acc[k] += sc[p * R + rs[k]] * v;
                }
            }
        } else {
            for (uint k = 0u; k < NO; k++) {
                const uint o = t + k * WG;
                if (o >= R * hd) break;
                const uint r = o / hd, d = o - r * hd;
                float a = acc[k] * aS[r];
                for (uint p = 0u; p < nb; p++) a += sc[p * R + r] * kvAt(true, slots[p] * kvDim + kh * hd, d);
                acc[k] = a;
            }
        }
        barrier();
    }

    const uint rows = pc.tokens * pc.heads;
    for (uint k = 0u; k < NO; k++) {
        const uint o = t + k * WG;
        if (o >= R * hd) break;
        const uint r = o / hd, d = o - r * hd;
        const uint tok = tok0 + r / G, h = kh * group + ht * G + r % G;
        if (tok >= pc.tokens) continue;
        const uint row = tok * pc.heads + h;
        if (pc.S == 1u) {
            const float l = lS[r];
            outv[pc.oOff + row * hd + d] = l > 0.0 ? acc[k] * (pc.vScale / l) : 0.0;
        } else {
            const uint pr = sp * rows + row;
            part[pc.sOff + 2u * pc.S * rows + pr * hd + d] = acc[k];
            if (d == 0u) {
                part[pc.sOff + 2u * pr] = mS[r];
                part[pc.sOff + 2u * pr + 1u] = lS[r];
            }
        }
    }
}
