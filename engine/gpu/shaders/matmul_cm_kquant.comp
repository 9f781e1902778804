#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for the K-quant weight types
// and IQ4_XS (TYPE as matmul_kquant.comp's: 0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q2_K,
// 4 Q3_K, 5 IQ4_XS) with Q8_K activations (quant_q8_k), and for the legacy
// 32-value block types (TYPE 6 Q4_0, 7 Q4_1, 8 Q5_0, 9 Q5_1, 10 IQ4_NL, as
// getrows_kquant numbers them) with Q8_0 or Q8_1 activations (quant_q8_0,
// quant_q8_1; a block is one chunk of scale 1, and Q4_1's and Q5_1's
// minimum adds m_w*s_x per block, as matmul_legacy.comp), on cooperative
// matrices (tensor cores). Each 32-value chunk of a super-block is one
// 32-deep slice: its integer weights (0..63 or -32..31: int8) are
// unpacked from the blocks into shared memory as the tile is staged, and
// the int8·int8→int32 tile products give each row's and vector's integer
// sums over the chunk, exactly; where a chunk has a scale per 16 values
// (Q6_K, Q2_K, Q3_K: SPLIT) the sums of the two halves are made apart
// (the k-steps of each half into their own accumulators, or, with 32-deep
// tiles, the activations staged twice with the other half zeroed). Then,
// as matmul_kquant.comp does per chunk, isum = sA*sum_A + sB*sum_B and
// msum = mA*Σx_A + mB*Σx_B in integers (the CPU's, exactly), and acc +=
// (d_w*d_x)*isum - (dmin_w*d_x)*msum in F32, chunk after chunk.
//
// Tiles, workgroup and ragged edges as matmul_cm_q8_0.comp: TM×TN×TK from
// the driver's s8·s8→s32 list (TK 8, 16 or 32), four subgroups in 2×2 with
// CM×CN accumulator tiles each, a block of BM rows × BN vectors, rows or
// vectors past the end staged as zeros, the integer sums through shared
// memory, each invocation scaling and writing its own BM·BN/WG outputs.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

layout(constant_id = 0) const uint WG = 32; // 4 subgroups
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 8;
layout(constant_id = 3) const uint TK = 8;
layout(constant_id = 4) const uint TYPE = 0;
layout(local_size_x_id = 0) in;

const uint CM = 2, CN = 2;
const uint BM = 2 * CM * TM, BN = 2 * CN * TN, BK = 32;
const uint PER = BM * BN / WG; // outputs per invocation
const bool SPLIT = TYPE == 2u || TYPE == 3u || TYPE == 4u;
const bool MINS = TYPE == 0u || TYPE == 1u || TYPE == 3u;
const bool LEG = TYPE >= 6u; // the legacy types: a 32-value block per chunk
const bool LEGMIN = TYPE == 7u || TYPE == 9u; // Q4_1, Q5_1
const uint CHUNKS = LEG ? 1u : 8u; // chunks per block
const bool TWICE = SPLIT && TK > 16u; // the activations staged twice, a half zeroed in each
const uint BH = TYPE == 0u ? 72u : TYPE == 1u ? 88u : TYPE == 2u ? 105u : TYPE == 3u ? 42u : TYPE == 4u ? 55u :
    TYPE == 5u ? 68u : TYPE == 6u || TYPE == 10u ? 9u : TYPE == 7u ? 10u : TYPE == 8u ? 11u : 12u;
// QS is a legacy block's first quant halfword (after d, m and qh).
const uint QS = TYPE == 7u ? 2u : TYPE == 8u ? 3u : TYPE == 9u ? 4u : 1u;

layout(push_constant) uniform PC {
    uint rows, cols, n, rgroups, groups;
    uint xoff; // words: the activation quants, four to a word
    uint soff; // floats: the activation scales per super-block (per block: legacy)
    uint doff; // floats: dst
    uint ioff; // floats: Q8_1's s per block (Q4_1, Q5_1)
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

// The arrays the tiles are loaded from and stored to come first, each a
// multiple of 16 bytes: NVIDIA's driver needs cooperative-matrix loads and
// stores 16-byte aligned in shared memory (an int array after a 1-byte one
// gave wrong sums on an H200, right ones on lavapipe).
shared int csa[BM * BN]; // the chunk's integer sums (SPLIT: first half), row major
shared int csb[SPLIT ? BM * BN : 4];
shared int8_t ash[BM * BK]; // weights, row major
shared int8_t bsh[BN * BK]; // activations, one vector per BK (TWICE: the second half zeroed)
shared int8_t bsh2[TWICE ? BN * BK : 16]; // TWICE: the first half zeroed
shared int sash[BM], sbsh[BM], mash[BM], mbsh[BM];
shared float dwsh[BM], dmsh[BM]; // d, and dmin (legacy: m)
shared int xa[BN], xb[BN]; // Σx over each half of the chunk
shared float dxsh[BN], sxsh[BN]; // d_x, and Q8_1's s

float halfToFloat(uint h) {
    const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0u) {
        if (m == 0u) return uintBitsToFloat(s);
        const int p = findMSB(m);
        return uintBitsToFloat(s | (uint(p + 103) << 23) | ((m << (23 - p)) & 0x7fffffu));
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint w32(uint h) { return uint(w[h]) | (uint(w[h + 1u]) << 16); }
uint by(uint base, uint i) { return (uint(w[base + (i >> 1)]) >> (8u * (i & 1u))) & 0xffu; }

int kvalue(uint q) { // kvalues_iq4nl[q], as matmul_kquant.comp
    const uint x = q < 8u ? (q < 4u ? 0xBFAD9881u : 0xF6EADDCFu) : (q < 12u ? 0x26190D01u : 0x71594535u);
    return bitfieldExtract(int(x), int(8u * (q & 3u)), 8);
}

// quad is values 4k..4k+3 of chunk c of the block at halfword base, packed
// as four int8 in a word (matmul_kquant.comp's chunk, four at a time).
uint quad(uint base, uint c, uint k) {
    uint out_ = 0u;
    if (TYPE == 0u || TYPE == 1u) {
        const uint word = w32((TYPE == 0u ? base + 8u : base + 24u) + 16u * (c >> 1) + 2u * k) >> (4u * (c & 1u));
        uint hb = 0u;
        if (TYPE == 1u) hb = w32(base + 8u + 2u * k) >> c;
        for (uint j = 0u; j < 4u; j++) {
            uint v = (word >> (8u * j)) & 15u;
            if (TYPE == 1u) v |= ((hb >> (8u * j)) & 1u) << 4;
            out_ |= v << (8u * j);
        }
    } else if (TYPE == 2u) {
        const uint n = c >> 2, k4 = c & 3u;
        const uint lw = w32(base + 32u * n + 16u * (k4 & 1u) + 2u * k) >> (4u * (k4 >> 1));
        const uint hw = w32(base + 64u + 16u * n + 2u * k) >> (2u * k4);
        for (uint j = 0u; j < 4u; j++) {
            const int v = int(((lw >> (8u * j)) & 15u) | (((hw >> (8u * j)) & 3u) << 4)) - 32;
            out_ |= (uint(v) & 0xffu) << (8u * j);
        }
    } else if (TYPE == 3u) {
        out_ = (w32(base + 8u + 16u * (c >> 2) + 2u * k) >> (2u * (c & 3u))) & 0x03030303u;
    } else if (TYPE == 4u) {
        const uint word = w32(base + 16u + 16u * (c >> 2) + 2u * k) >> (2u * (c & 3u)), hm = w32(base + 2u * k) >> c;
        for (uint j = 0u; j < 4u; j++) {
            int v = int((word >> (8u * j)) & 3u);
            if (((hm >> (8u * j)) & 1u) == 0u) v -= 4;
            out_ |= (uint(v) & 0xffu) << (8u * j);
        }
    } else if (TYPE == 5u) {
        const uint word = w32(base + 4u + 8u * c + 2u * (k & 3u)) >> (k >= 4u ? 4u : 0u);
        for (uint j = 0u; j < 4u; j++) out_ |= (uint(kvalue((word >> (8u * j)) & 15u)) & 0xffu) << (8u * j);
    } else { // legacy: value i < 16 the low nibble of qs[i], i >= 16 the high nibble of qs[i-16]
        const uint word = w32(base + QS + 2u * (k & 3u)) >> (k >= 4u ? 4u : 0u);
        uint qh = 0u;
        if (TYPE == 8u || TYPE == 9u) qh = w32(base + QS - 2u) >> (4u * k); // bit i: fifth bit of value i
        for (uint j = 0u; j < 4u; j++) {
            uint q = (word >> (8u * j)) & 15u;
            if (TYPE == 8u || TYPE == 9u) q |= ((qh >> j) & 1u) << 4;
            int v = int(q);
            if (TYPE == 6u) v -= 8;
            else if (TYPE == 8u) v -= 16;
            else if (TYPE == 10u) v = kvalue(q);
            out_ |= (uint(v) & 0xffu) << (8u * j);
        }
    }
    return out_;
}

// scales are chunk c's scales per half (sA, sB), minimums (mA, mB), d and
// dmin, as matmul_kquant.comp's chunk gives them.
void scales(uint base, uint c, out int sA, out int sB, out int mA, out int mB, out float dw, out float dm) {
    mA = 0;
    mB = 0;
    dm = 0.0;
    if (TYPE == 0u || TYPE == 1u) {
        dw = halfToFloat(uint(w[base]));
        dm = halfToFloat(uint(w[base + 1u]));
        uint sc, m;
        if (c < 4u) {
            sc = by(base, 4u + c) & 63u;
            m = by(base, 8u + c) & 63u;
        } else {
            sc = (by(base, 8u + c) & 15u) | ((by(base, c) >> 6) << 4);
            m = (by(base, 8u + c) >> 4) | ((by(base, 4u + c) >> 6) << 4);
        }
        sA = int(sc);
        sB = sA;
        mA = int(m);
        mB = mA;
    } else if (TYPE == 2u) {
        dw = halfToFloat(uint(w[base + 104u]));
        const uint sw = uint(w[base + 96u + 4u * (c >> 2) + (c & 3u)]);
        sA = bitfieldExtract(int(sw), 0, 8);
        sB = bitfieldExtract(int(sw), 8, 8);
    } else if (TYPE == 3u) {
        dw = halfToFloat(uint(w[base + 40u]));
        dm = halfToFloat(uint(w[base + 41u]));
        const uint sw = uint(w[base + c]);
        sA = int(sw & 15u);
        mA = int((sw >> 4) & 15u);
        sB = int((sw >> 8) & 15u);
        mB = int((sw >> 12) & 15u);
    } else if (TYPE == 4u) {
        dw = halfToFloat(uint(w[base + 54u]));
        int s[2];
        for (uint h = 0u; h < 2u; h++) {
            const uint i = 2u * c + h;
            const uint lo = i < 8u ? by(base, 96u + i) & 15u : by(base, 96u + i - 8u) >> 4;
            const uint hi = (by(base, 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
            s[h] = int(lo | (hi << 4)) - 32;
        }
        sA = s[0];
        sB = s[1];
    } else if (LEG) {
        dw = halfToFloat(uint(w[base]));
        if (LEGMIN) dm = halfToFloat(uint(w[base + 1u]));
        sA = 1;
        sB = 1;
    } else {
        dw = halfToFloat(uint(w[base]));
        const uint ls = ((by(base, 4u + (c >> 1)) >> (4u * (c & 1u))) & 15u) | (((uint(w[base + 1u]) >> (2u * c)) & 3u) << 4);
        sA = int(ls) - 32;
        sB = sA;
    }
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint r0 = (g % pc.rgroups) * BM, v0 = (g / pc.rgroups) * BN;
    const uint sg = gl_SubgroupID;
    const bool tiles = sg < 4u; // uniform over the subgroup
    const uint sr = (sg / 2u) * CM * TM, scn = (sg % 2u) * CN * TN;
    const uint nb = pc.cols / (32u * CHUNKS); // blocks per row

    float acc[PER];
    for (uint e = 0u; e < PER; e++) acc[e] = 0.0;

    for (uint u = 0u; u < nb * CHUNKS; u++) {
        const uint b = u / CHUNKS, c = u % CHUNKS;
        for (uint i = tid; i < BM * 8u; i += WG) {
            const uint r = i / 8u, k = i % 8u, gr = r0 + r;
            const uint q = gr < pc.rows ? quad((gr * nb + b) * BH, c, k) : 0u;
            for (uint j = 0u; j < 4u; j++) ash[r * BK + 4u * k + j] = int8_t(int(q << (24u - 8u * j)) >> 24);
        }
        for (uint r = tid; r < BM; r += WG) {
            const uint gr = r0 + r;
            int sA = 0, sB = 0, mA = 0, mB = 0;
            float dw = 0.0, dm = 0.0;
            if (gr < pc.rows) scales((gr * nb + b) * BH, c, sA, sB, mA, mB, dw, dm);
            sash[r] = sA;
            sbsh[r] = sB;
            mash[r] = mA;
            mbsh[r] = mB;
            dwsh[r] = dw;
            dmsh[r] = dm;
        }
        for (uint i = tid; i < BN * 8u; i += WG) {
            const uint v = i / 8u, k = i % 8u, gv = v0 + v;
            const uint q = gv < pc.n ? xq[pc.xoff + gv * (pc.cols / 4u) + u * 8u + k] : 0u;
            for (uint j = 0u; j < 4u; j++) {
                const int8_t x = int8_t(int(q << (24u - 8u * j)) >> 24);
                if (TWICE) {
                    bsh[v * BK + 4u * k + j] = k < 4u ? x : int8_t(0);
                    bsh2[v * BK + 4u * k + j] = k < 4u ? int8_t(0) : x;
                } else {
                    bsh[v * BK + 4u * k + j] = x;
                }
            }
        }
        for (uint v = tid; v < BN; v += WG) {
            const uint gv = v0 + v;
            int sa = 0, sb = 0;
            float dx = 0.0, sx = 0.0;
            if (gv < pc.n && MINS) {
                const uint base = pc.xoff + gv * (pc.cols / 4u) + u * 8u;
                for (uint k = 0u; k < 8u; k++) {
                    const uint q = xq[base + k];
                    int s = 0;
                    for (uint j = 0u; j < 4u; j++) s += bitfieldExtract(int(q), int(8u * j), 8);
                    if (k < 4u) sa += s; else sb += s;
                }
            }
            if (gv < pc.n) {
                dx = xd[pc.soff + gv * nb + b];
                if (LEGMIN) sx = xd[pc.ioff + gv * nb + b];
            }
            xa[v] = sa;
            xb[v] = sb;
            dxsh[v] = dx;
            sxsh[v] = sx;
        }
        barrier();

        if (tiles) {
            coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> ca[CM][CN], cb[CM][CN];
            for (uint i = 0u; i < CM; i++)
                for (uint j = 0u; j < CN; j++) {
                    ca[i][j] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
                    cb[i][j] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
                }
            for (uint k = 0u; k < BK; k += TK) {
                coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm[CN];
                for (uint i = 0u; i < CM; i++)
                    coopMatLoad(a[i], ash, (sr + i * TM) * BK + k, BK, gl_CooperativeMatrixLayoutRowMajor);
                for (uint j = 0u; j < CN; j++)
                    coopMatLoad(bm[j], bsh, (scn + j * TN) * BK + k, BK, gl_CooperativeMatrixLayoutColumnMajor);
                if (TWICE) {
                    coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm2[CN];
                    for (uint j = 0u; j < CN; j++)
                        coopMatLoad(bm2[j], bsh2, (scn + j * TN) * BK + k, BK, gl_CooperativeMatrixLayoutColumnMajor);
                    for (uint i = 0u; i < CM; i++)
                        for (uint j = 0u; j < CN; j++) {
                            ca[i][j] = coopMatMulAdd(a[i], bm[j], ca[i][j]);
                            cb[i][j] = coopMatMulAdd(a[i], bm2[j], cb[i][j]);
                        }
                } else if (SPLIT && k >= 16u) {
                    for (uint i = 0u; i < CM; i++)
                        for (uint j = 0u; j < CN; j++) cb[i][j] = coopMatMulAdd(a[i], bm[j], cb[i][j]);
                } else {
                    for (uint i = 0u; i < CM; i++)
                        for (uint j = 0u; j < CN; j++) ca[i][j] = coopMatMulAdd(a[i], bm[j], ca[i][j]);
                }
            }
            for (uint i = 0u; i < CM; i++)
                for (uint j = 0u; j < CN; j++) {
                    coopMatStore(ca[i][j], csa, (sr + i * TM) * BN + scn + j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
                    if (SPLIT) coopMatStore(cb[i][j], csb, (sr + i * TM) * BN + scn + j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
                }
        }
        barrier();
        for (uint e = 0u; e < PER; e++) {
            const uint i = tid + e * WG, r = i / BN, v = i % BN;
            const int isum = SPLIT ? sash[r] * csa[i] + sbsh[r] * csb[i] : sash[r] * csa[i];
            acc[e] += (dwsh[r] * dxsh[v]) * float(isum);
            if (MINS) acc[e] -= (dmsh[r] * dxsh[v]) * float(mash[r] * xa[v] + mbsh[r] * xb[v]);
            if (LEGMIN) acc[e] += dmsh[r] * sxsh[v];
        }
        barrier(); // before the next chunk's staging overwrites the shared arrays
    }
    for (uint e = 0u; e < PER; e++) {
        const uint i = tid + e * WG, r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) y[pc.doff + v * pc.rows + r] = acc[e];
    }
}
