#version 450
// Flash attention on cooperative matrices (tensor cores) over an F16 or
// E4M3 KV cache, for prefill chunks and verify trees: Q·Kᵀ and P·V are f16
// tile products with F32 accumulators, the softmax an online one in F32.
//
// SPLIT says which F32 operands go through the tiles as two F16 parts, a
// high part hi, x rounded to F16's 11 significant bits, and a low part
// lo = f16((x - hi)·2^12) (x - hi is exact in F32; the 2^12 keeps lo clear
// of F16's subnormals, which a driver may flush), whose products are
// added into F32 accumulators as hi-product + 2^-12·lo-product: bit 1 the
// query rows (Qhi·Kᵀ + Qlo·Kᵀ), bit 2 the softmax weights (Phi·V + Plo·V).
// The operand then loses ~2^-24 of its value instead of 2^-12, close to
// the CPU engine's F32 attention (ggml's tiled path, the E4M3 path), for
// twice the tile products. Without a bit that operand is rounded to F16
// once.
//
// A workgroup takes R = 4·TM query rows sharing one KV head (G query heads
// of T consecutive tokens, rows past G·T empty) and one split of the slots
// they see (attention.comp's splits and partial results, merged by
// attention_combine); subgroup s owns rows [s·TM, s·TM+TM). The query rows
// are rounded to F16 (or split, SPLIT bit 1) and held as A tiles. The
// slots are walked BC at a time: the block's keys and values, converted to F16 in the load (E4M3
// codes are exact in F16; the scales are applied in F32 as attention.comp
// does), go to shared memory, zeros past the end; each subgroup makes its
// TM×BC scores, then per row the block's maximum, the factor
// exp(mOld - mNew) that rescales its running output (an element-wise
// product with a tile whose rows hold it), and the weights
// P = exp(score - mNew) rounded to F16 (or split, SPLIT bit 2), whose sum
// (of the values the tiles take) updates the row's denominator; then
// O += P·V.
//
// Visible slots: a chain's token i sees [0, base+i]; a tree's token i sees
// [0, base) and base + idx[off[i]:off[i+1]] (engine/model's ancestry: its
// ancestors and itself), held as a bit mask over the tree's nodes
// (at most 32·MAXTW of them). A row sees nothing past the visible slots,
// whatever block they fall in.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(constant_id = 0) const uint WG = 32; // 4 subgroups
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 8;
layout(constant_id = 3) const uint TK = 8;
layout(constant_id = 4) const uint HD = 64; // head dimension, a multiple of TN and TK
layout(constant_id = 5) const uint KV = 1; // 1 F16, 2 E4M3
layout(constant_id = 6) const uint BC = 32; // slots per block, a multiple of TN and TK
layout(constant_id = 7) const uint SPLIT = 3; // bit 1: Q in hi and lo F16 parts, bit 2: P likewise
layout(local_size_x_id = 0) in;

const uint SGS = WG / 4u;
const uint R = 4u * TM;
const uint MAXTW = 8u; // words of a tree's visibility mask: 256 nodes
const float LOW = -3.402823466e38;
const float LOSCALE = 4096.0, LOUNSCALE = 1.0 / 4096.0; // a low part's 2^12

layout(push_constant) uniform PC {
    uint tokens, heads, kvHeads, hd;
    uint base, chain, qOff, oOff; // float offsets
    uint kOff, vOff, aOff, sOff;  // word offsets (anc: int32s, scratch: floats)
    uint G, T, nTiles, headTiles;
    uint S, chunk, pad0, pad1;
    float sk, vScale;
} pc;
layout(std430, binding = 0) writeonly buffer O { float outv[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) readonly buffer K { uint kc[]; };
layout(std430, binding = 3) readonly buffer V { uint vc[]; };
layout(std430, binding = 4) readonly buffer A { int anc[]; };
layout(std430, binding = 5) writeonly buffer P { float part[]; };

shared float16_t kvsh[2u * BC * HD]; // the block's keys, then its values (first the query rows)
shared float ssh[4u * TM * BC];      // per subgroup: scores, then the rescaling tile, then output tiles
shared float16_t psh[4u * TM * BC];  // per subgroup: the weights (their high parts)
shared float16_t plsh[(SPLIT & 2u) != 0u ? 4u * TM * BC : 1u]; // their low parts ·2^12
shared float mS[R], lS[R], aS[R];
shared uint visw[R * MAXTW]; // trees: per token of the workgroup, the nodes it sees

// The high part of x: x rounded to 11 significant bits by F32 arithmetic
// (Veltkamp's split: c = (2^13+1)·x, c - (c - x)), which F16 holds exactly
// in its normal range. Not f32(f16(x)): Mesa 26 lavapipe evaluates that
// as x (written so, every low part came out zero, the output bit for bit
// the unsplit one), precise or not.
float hiPart(float x) {
    precise const float c = x * 8193.0;
    precise const float h = c - (c - x);
    return h;
}

// The low part of x, scaled by 2^12: exact in F32 (x - hi has at most 12
// significant bits), rounded once to F16.
float16_t loPart(float x, float hi) {
    precise const float l = (x - hi) * LOSCALE;
    return float16_t(l);
}

// E4M3 code to F16 bits, exact (every E4M3 value is an F16 value).
uint e4m3ToHalf(uint c) {
    const uint sign = (c & 0x80u) << 8;
    const uint e = (c >> 3) & 15u, m = c & 7u;
    if ((c & 0x7fu) == 0x7fu) return sign | 0x7e00u; // NaN
    if (e == 0u) {
        if (m == 0u) return sign;
        // m·2^-9: normal in F16
        const int p = findMSB(m); // 0..2
        return sign | (uint(p - 9 + 15) << 10) | (((m << (10 - p)) & 0x3ffu));
    }
    return sign | ((e + 8u) << 10) | (m << 7);
}

// F16 bits of value d of the cache row that starts at element e.
uint kvHalf(bool isV, uint e) {
    const uint off = isV ? pc.vOff : pc.kOff;
    if (KV == 1u) {
        const uint w = isV ? vc[off + (e >> 1)] : kc[off + (e >> 1)];
        return (w >> (16u * (e & 1u))) & 0xffffu;
    }
    const uint w = isV ? vc[off + (e >> 2)] : kc[off + (e >> 2)];
    return e4m3ToHalf((w >> (8u * (e & 3u))) & 0xffu);
}

void subgroupSync() {
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint sp = wg % pc.S;
    wg /= pc.S;
    const uint ht = wg % pc.headTiles;
    wg /= pc.headTiles;
    const uint kh = wg % pc.kvHeads;
    const uint tile = wg / pc.kvHeads;
    if (tile >= pc.nTiles) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const bool ok = gl_SubgroupSize == SGS && sg < 4u; // uniform over the subgroup
    const uint G = pc.G, group = pc.heads / pc.kvHeads, kvDim = pc.kvHeads * pc.hd;
    const uint tok0 = tile * pc.T;
    const uint sr = sg * TM; // this subgroup's first row
    const uint sb = sg * TM * BC;

    // the slots the workgroup walks: [0, len), masked per row
    const uint ntok = min(pc.T, pc.tokens - tok0);
    const uint len = pc.base + (pc.chain != 0u ? ntok + tok0 : pc.tokens);

    // the query rows, rounded to F16 (their high parts), into A tiles
    for (uint i = tid; i < R * HD; i += WG) {
        const uint r = i / HD, d = i % HD;
        const uint tok = tok0 + r / G, h = kh * group + ht * G + r % G;
        const bool live = r < G * pc.T && tok < pc.tokens;
        const float x = live ? q[pc.qOff + (tok * pc.heads + h) * HD + d] : 0.0;
        kvsh[i] = float16_t((SPLIT & 1u) != 0u ? hiPart(x) : x);
    }
    for (uint i = tid; i < R; i += WG) {
        mS[i] = LOW;
        lS[i] = 0.0;
    }
    if (pc.chain == 0u) {
        for (uint i = tid; i < R * MAXTW; i += WG) visw[i] = 0u;
    }
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> qa[HD / TK];
    if (ok) {
        for (uint k = 0u; k < HD / TK; k++)
            coopMatLoad(qa[k], kvsh, sr * HD + k * TK, HD, gl_CooperativeMatrixLayoutRowMajor);
    }
    // their low parts ·2^12 (SPLIT bit 1), staged where the high parts were
    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> ql[(SPLIT & 1u) != 0u ? HD / TK : 1u];
    if ((SPLIT & 1u) != 0u) {
        barrier(); // the high parts read
        for (uint i = tid; i < R * HD; i += WG) {
            const uint r = i / HD, d = i % HD;
            const uint tok = tok0 + r / G, h = kh * group + ht * G + r % G;
            const bool live = r < G * pc.T && tok < pc.tokens;
            const float x = live ? q[pc.qOff + (tok * pc.heads + h) * HD + d] : 0.0;
            kvsh[i] = loPart(x, hiPart(x));
        }
        barrier();
        if (ok) {
            for (uint k = 0u; k < HD / TK; k++)
                coopMatLoad(ql[k], kvsh, sr * HD + k * TK, HD, gl_CooperativeMatrixLayoutRowMajor);
        }
    }
    if (pc.chain == 0u) {
        for (uint lt = 0u; lt < ntok; lt++) {
            const int o0 = anc[pc.aOff + tok0 + lt], o1 = anc[pc.aOff + tok0 + lt + 1u];
            for (int j = o0 + int(tid); j < o1; j += int(WG)) {
                const uint a = uint(anc[pc.aOff + pc.tokens + 1u + uint(j)]);
                atomicOr(visw[lt * MAXTW + a / 32u], 1u << (a % 32u));
            }
        }
    }
    barrier(); // the query rows read, the masks made

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> o[HD / TN];
    for (uint j = 0u; j < HD / TN; j++) o[j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    const uint pLo = sp * pc.chunk, pHi = min(pLo + pc.chunk, len);
    for (uint b0 = pLo; b0 < pHi; b0 += BC) {
        const uint nb = min(BC, pHi - b0);
        for (uint i = tid; i < BC * HD; i += WG) {
            const uint p = i / HD, d = i % HD;
            const uint e = (b0 + p) * kvDim + kh * HD + d;
            kvsh[i] = p < nb ? uint16BitsToHalf(uint16_t(kvHalf(false, e))) : float16_t(0.0);
            kvsh[BC * HD + i] = p < nb ? uint16BitsToHalf(uint16_t(kvHalf(true, e))) : float16_t(0.0);
        }
        barrier();
        if (ok) {
            // scores: TM rows × BC slots
            for (uint c = 0u; c < BC / TN; c++) {
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> s = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> sl = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
                for (uint k = 0u; k < HD / TK; k++) {
                    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> kb;
                    coopMatLoad(kb, kvsh, c * TN * HD + k * TK, HD, gl_CooperativeMatrixLayoutColumnMajor);
                    s = coopMatMulAdd(qa[k], kb, s);
                    if ((SPLIT & 1u) != 0u) sl = coopMatMulAdd(ql[k], kb, sl);
                }
                if ((SPLIT & 1u) != 0u) s = s + sl * LOUNSCALE;
                coopMatStore(s, ssh, sb + c * TN, BC, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        subgroupSync();
        // the online softmax, a row an invocation (rows rr, rr+SGS, ...)
        for (uint rr = lane; ok && rr < TM; rr += SGS) {
            const uint r = sr + rr, lt = r / G, tok = tok0 + lt;
            const bool live = r < G * pc.T && tok < pc.tokens;
            const uint lim = !live ? 0u : pc.chain != 0u ? pc.base + tok + 1u : len;
            float bm = LOW;
            for (uint p = 0u; p < nb; p++) {
                const uint slot = b0 + p;
                bool vis = slot < lim;
                if (vis && pc.chain == 0u && slot >= pc.base) {
                    const uint a = slot - pc.base;
                    vis = (visw[lt * MAXTW + a / 32u] & (1u << (a % 32u))) != 0u;
                }
                const float x = ssh[sb + rr * BC + p] * pc.sk;
                ssh[sb + rr * BC + p] = vis ? x : LOW;
                if (vis) bm = max(bm, x);
            }
            const float mOld = mS[r], mNew = max(mOld, bm);
            float sum = 0.0;
            for (uint p = 0u; p < BC; p++) {
                const float x = p < nb ? ssh[sb + rr * BC + p] : LOW;
                const float w = x > LOW ? exp(x - mNew) : 0.0;
                if ((SPLIT & 2u) != 0u) {
                    const float wh = hiPart(w);
                    psh[sb + rr * BC + p] = float16_t(wh);
                    plsh[sb + rr * BC + p] = loPart(w, wh);
                    sum += w;
                } else {
                    const float16_t wh = float16_t(w);
                    psh[sb + rr * BC + p] = wh;
                    sum += float(wh);
                }
            }
            const float alpha = mNew > mOld ? exp(mOld - mNew) : 1.0;
            aS[r] = alpha;
            mS[r] = mNew;
            lS[r] = lS[r] * alpha + sum;
        }
        subgroupSync();
        for (uint i = lane; ok && i < TM * TN; i += SGS) ssh[sb + i] = aS[sr + i / TN];
        subgroupSync();
        if (ok) {
            coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> al;
            coopMatLoad(al, ssh, sb, TN, gl_CooperativeMatrixLayoutRowMajor);
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> pa[BC / TK];
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> pl[(SPLIT & 2u) != 0u ? BC / TK : 1u];
            for (uint k = 0u; k < BC / TK; k++) {
                coopMatLoad(pa[k], psh, sb + k * TK, BC, gl_CooperativeMatrixLayoutRowMajor);
                if ((SPLIT & 2u) != 0u) coopMatLoad(pl[k], plsh, sb + k * TK, BC, gl_CooperativeMatrixLayoutRowMajor);
            }
            for (uint j = 0u; j < HD / TN; j++) {
                o[j] = o[j] * al;
                coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> ol = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
                for (uint k = 0u; k < BC / TK; k++) {
                    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> vb;
                    coopMatLoad(vb, kvsh, BC * HD + k * TK * HD + j * TN, HD, gl_CooperativeMatrixLayoutRowMajor);
                    o[j] = coopMatMulAdd(pa[k], vb, o[j]);
                    if ((SPLIT & 2u) != 0u) ol = coopMatMulAdd(pl[k], vb, ol);
                }
                if ((SPLIT & 2u) != 0u) o[j] = o[j] + ol * LOUNSCALE;
            }
        }
        barrier(); // before the next block's keys and values overwrite these
    }

    // out = O·(vScale/l), or the split's partial result (O, m, l)
    const uint rows = pc.tokens * pc.heads;
    for (uint i = lane; ok && i < TM * TN; i += SGS) {
        const float l = lS[sr + i / TN];
        ssh[sb + TM * TN + i] = pc.S == 1u ? (l > 0.0 ? pc.vScale / l : 0.0) : 1.0;
    }
    subgroupSync();
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> fm;
    if (ok) coopMatLoad(fm, ssh, sb + TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
    for (uint j = 0u; j < HD / TN; j++) {
        if (ok) coopMatStore(o[j] * fm, ssh, sb, TN, gl_CooperativeMatrixLayoutRowMajor);
        subgroupSync();
        for (uint i = lane; ok && i < TM * TN; i += SGS) {
            const uint r = sr + i / TN, d = j * TN + i % TN;
            const uint tok = tok0 + r / G, h = kh * group + ht * G + r % G;
            if (r >= G * pc.T || tok >= pc.tokens) continue;
            const uint row = tok * pc.heads + h;
            float x = ssh[sb + i];
            if (gl_SubgroupSize != SGS) x = uintBitsToFloat(0x7fc00000u);
            if (pc.S == 1u) {
                outv[pc.oOff + row * HD + d] = x;
            } else {
                const uint pr = sp * rows + row;
                part[pc.sOff + 2u * pc.S * rows + pr * HD + d] = x;
                if (d == 0u) {
                    part[pc.sOff + 2u * pr] = mS[r];
                    part[pc.sOff + 2u * pr + 1u] = lS[r];
                }
            }
        }
        subgroupSync();
    }
}
