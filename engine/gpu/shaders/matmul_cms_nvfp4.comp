#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for NVFP4 weights on
// cooperative matrices, for skinny passes (see matmul_cms_q8_0.comp: a
// workgroup takes BM weight rows × BN vectors over the whole depth, its four
// subgroups splitting the depth in stages of KB 64-value blocks, each
// staging its own; the partial sums added in subgroup order at the end).
// The arithmetic is matmul_cm_nvfp4.comp's, MODE as there:
//   0 W4A8: Q8_0 quants; per 16-value sub-block the exact int32 sum of
//     ggml's doubled E2M1 integers (0..±12) times the quants, times
//     (scale/2)*d_x;
//   1 W4A4: NVFP4 codes as doubled integers; the exact sum times
//     scale*(SF/4), and the total times 1/G.
// A sub-block is staged KT = max(TK, 16) deep with zeros after its 16
// values, so that a 32-deep int8 tile (NVIDIA's) still gives per-16 sums.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(constant_id = 0) const uint WG = 32; // 4 subgroups
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 8;
layout(constant_id = 3) const uint TK = 8;
layout(constant_id = 4) const uint CM = 2; // row tiles
layout(constant_id = 5) const uint CN = 2; // vector tiles
layout(constant_id = 6) const uint KB = 1; // 64-value blocks per stage
layout(constant_id = 7) const uint MODE = 0;
layout(local_size_x_id = 0) in;

const uint SGS = WG / 4u;
const uint BM = CM * TM, BN = CN * TN;
const uint KT = TK > 16u ? TK : 16u;
const uint U = 4u * KB, SK = U * KT; // sub-blocks and staged depth per stage
const uint PER = BM * BN / SGS;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // words: the activation quants or codes, four to a word
    uint soff; // floats: the activation scales (d per 32 values, or SF/4 per 16)
    uint ioff; // floats: W4A4's 1/G per vector
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint w[]; }; // 9 words a block
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XF { float xf[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared int8_t ash[4u * BM * SK];
shared int8_t bsh[4u * BN * SK];
shared float dwsh[4u * BM * U];
shared float dxsh[4u * BN * U];
shared int csh[4u * BM * BN];

float nvScale(uint c) {
    c &= 0x7fu;
    if (c == 0x7fu) return 0.0;
    const uint e = c >> 3, m = c & 7u;
    if (e == 0u) return float(m) * (1.0 / 512.0);
    return uintBitsToFloat(((e + 120u) << 23) | (m << 20));
}

int e2m1x2(uint c) {
    const int m = int(c & 7u);
    const int mag = m < 2 ? m : ((m & 1) | 2) << ((m >> 1) - 1);
    return (c & 8u) != 0u ? -mag : mag;
}

void subgroupSync() {
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint r0 = (g / pc.vgroups) * BM, v0 = (g % pc.vgroups) * BN;
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const bool ok = gl_SubgroupSize == SGS && sg < 4u; // uniform over the subgroup
    const uint nb = pc.cols / 64u, units = nb * 4u, stages = (nb + KB - 1u) / KB;
    const uint ab = sg * BM * SK, bb = sg * BN * SK, db = sg * BM * U, xb = sg * BN * U, cb = sg * BM * BN;

    float acc[PER];
    for (uint e = 0u; e < PER; e++) acc[e] = 0.0;
    if (ok) { // the zero tails of the sub-blocks stay zero
        for (uint i = lane; i < BM * SK; i += SGS) ash[ab + i] = int8_t(0);
        for (uint i = lane; i < BN * SK; i += SGS) bsh[bb + i] = int8_t(0);
    }

    const uint rounds = (stages + 3u) / 4u;
    for (uint j = 0u; j < rounds; j++) {
        const uint st = 4u * j + sg;
        const bool mine = ok && st < stages; // uniform over the subgroup
        const uint b0 = st * KB;
        subgroupSync(); // the zeros, or the last stage's reads, before the staging
        if (mine) {
            for (uint i = lane; i < BM * KB * 9u; i += SGS) {
                const uint r = i / (KB * 9u), h = i % (KB * 9u), k = h / 9u, wd = h % 9u, gr = r0 + r;
                const bool inb = gr < pc.rows && b0 + k < nb;
                const uint q = inb ? w[(gr * nb + b0) * 9u + h] : 0u;
                if (wd == 0u) {
                    for (uint s = 0u; s < 4u; s++) dwsh[db + r * U + 4u * k + s] = inb ? nvScale(q >> (8u * s)) : 0.0;
                } else {
                    // bytes 4·((wd-1)%2).. of sub-block (wd-1)/2: value j in the low nibble, j+8 in the high
                    const uint s = (wd - 1u) / 2u, j0 = ((wd - 1u) % 2u) * 4u;
                    const uint o = ab + r * SK + (4u * k + s) * KT;
                    for (uint t = 0u; t < 4u; t++) {
                        const uint c = (q >> (8u * t)) & 0xffu;
                        ash[o + j0 + t] = int8_t(e2m1x2(c));
                        ash[o + j0 + t + 8u] = int8_t(e2m1x2(c >> 4));
                    }
                }
            }
            for (uint i = lane; i < BN * U * 4u; i += SGS) {
                const uint v = i / (U * 4u), t = i % (U * 4u), lu = t / 4u, gv = v0 + v, gu = b0 * 4u + lu;
                const uint q = gv < pc.n && gu < units ? xq[pc.xoff + gv * (pc.cols / 4u) + 4u * gu + t % 4u] : 0u;
                const uint o = bb + v * SK + lu * KT + 4u * (t % 4u);
                for (uint u = 0u; u < 4u; u++) bsh[o + u] = int8_t(int(q << (24u - 8u * u)) >> 24);
            }
            for (uint i = lane; i < BN * U; i += SGS) {
                const uint v = i / U, lu = i % U, gv = v0 + v, gu = b0 * 4u + lu;
                float d = 0.0;
                if (gv < pc.n && gu < units) d = MODE == 0u ? xf[pc.soff + gv * (pc.cols / 32u) + gu / 2u] : xf[pc.soff + gv * (pc.cols / 16u) + gu];
                dxsh[xb + i] = d;
            }
        }
        subgroupSync();
        for (uint lu = 0u; lu < U; lu++) {
            const bool blk = mine && b0 * 4u + lu < units; // uniform over the subgroup
            if (blk) {
                coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
                for (uint i = 0u; i < CM; i++)
                    for (uint t = 0u; t < CN; t++) c[i][t] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
                for (uint d = 0u; d < KT; d += TK) {
                    coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                    coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm[CN];
                    for (uint i = 0u; i < CM; i++)
                        coopMatLoad(a[i], ash, ab + i * TM * SK + lu * KT + d, SK, gl_CooperativeMatrixLayoutRowMajor);
                    for (uint t = 0u; t < CN; t++)
                        coopMatLoad(bm[t], bsh, bb + t * TN * SK + lu * KT + d, SK, gl_CooperativeMatrixLayoutColumnMajor);
                    for (uint i = 0u; i < CM; i++)
                        for (uint t = 0u; t < CN; t++) c[i][t] = coopMatMulAdd(a[i], bm[t], c[i][t]);
                }
                for (uint i = 0u; i < CM; i++)
                    for (uint t = 0u; t < CN; t++)
                        coopMatStore(c[i][t], csh, cb + i * TM * BN + t * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
            }
            subgroupSync();
            if (blk) {
                for (uint e = 0u; e < PER; e++) {
                    const uint i = lane + e * SGS, r = i / BN, v = i % BN;
                    if (v0 + v >= pc.n) continue; // a vector past the end (its sums are zeros)
                    const float dw = dwsh[db + r * U + lu], dx = dxsh[xb + v * U + lu];
                    const float d = MODE == 0u ? (dw * 0.5) * dx : dw * dx;
                    acc[e] += d * float(csh[cb + i]);
                }
            }
            subgroupSync(); // before the next sub-block's sums overwrite csh
        }
    }
    if (ok) {
        for (uint e = 0u; e < PER; e++) csh[cb + lane + e * SGS] = floatBitsToInt(acc[e]);
    }
    barrier();
    for (uint i = tid; i < BM * BN; i += WG) {
        const uint r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) {
            float o = intBitsToFloat(csh[i]);
            for (uint s = 1u; s < 4u; s++) o += intBitsToFloat(csh[s * BM * BN + i]);
            if (MODE == 1u) o *= xf[pc.ioff + v];
            if (gl_SubgroupSize != SGS) o = uintBitsToFloat(0x7fc00000u);
            y[pc.doff + v * pc.rows + r] = o;
        }
    }
}
