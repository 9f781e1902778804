#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for Q8_0 weights and Q8_0
// activations (W8A8) on cooperative matrices, for skinny passes: a few to a
// few dozen vectors (tree verify, several sequences' decode steps), where
// the product is bound by reading the weights once, not by multiply-adds.
// The arithmetic is matmul_cm_q8_0.comp's: the int8·int8→int32 sums of each
// 32-deep block are exact tile products (the CPU's integer sums), then
// acc += (d_w*d_x) * float(sum) in F32.
//
// A workgroup takes BM = CM·TM weight rows and BN = CN·TN vectors (16 or
// more: a whole verify tree) over the whole depth, split between its four
// subgroups: the depth is cut into stages of KB blocks, subgroup s taking
// stages s, s+4, s+8, ... Each subgroup stages its own rows' blocks and
// vectors' quants in its own part of shared memory (zeros past the ends:
// ragged rows and vectors), so it synchronizes with itself only; each of
// its invocations scales and adds BM·BN/SGS outputs, block after block. At
// the end the four partial sums of every output are added in shared memory
// in subgroup order. So every weight block is read once per workgroup, and
// an output's order of additions depends on the columns alone: a vector's
// result is the same bits whatever the other vectors of its pass.
//
// The subgroup size SGS is the device's (WG = 4·SGS); a driver that runs
// the shader with another subgroup size gets NaN, loudly, not wrong sums.
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
layout(constant_id = 4) const uint CM = 2; // row tiles
layout(constant_id = 5) const uint CN = 2; // vector tiles
layout(constant_id = 6) const uint KB = 4; // 32-deep blocks per stage
layout(local_size_x_id = 0) in;

const uint SGS = WG / 4u;
const uint BM = CM * TM, BN = CN * TN, SK = KB * 32u;
const uint PER = BM * BN / SGS; // outputs per invocation

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // words: the activation quants, four to a word
    uint soff; // floats: the activation block scales
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // 34-byte blocks: 17 halfwords
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared int8_t ash[4u * BM * SK]; // per subgroup: its rows' quants, row major
shared int8_t bsh[4u * BN * SK]; // per subgroup: its vectors' quants, one vector per SK
shared float dwsh[4u * BM * KB];
shared float dxsh[4u * BN * KB];
shared int csh[4u * BM * BN]; // per subgroup: a block's integer sums, then its partial results

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
    const uint nb = pc.cols / 32u, stages = (nb + KB - 1u) / KB;
    const uint ab = sg * BM * SK, bb = sg * BN * SK, db = sg * BM * KB, xb = sg * BN * KB, cb = sg * BM * BN;

    float acc[PER];
    for (uint e = 0u; e < PER; e++) acc[e] = 0.0;

    // Every subgroup runs the same rounds and synchronization points (a
    // driver may make a subgroup barrier a workgroup one: lavapipe does);
    // in round j, subgroup s stages and multiplies stage 4j+s, if any.
    const uint rounds = (stages + 3u) / 4u;
    for (uint j = 0u; j < rounds; j++) {
        const uint st = 4u * j + sg;
        const bool mine = ok && st < stages; // uniform over the subgroup
        const uint b0 = st * KB;
        if (mine) {
            for (uint i = lane; i < BM * KB * 17u; i += SGS) {
                const uint r = i / (KB * 17u), h = i % (KB * 17u), k = h / 17u, hw = h % 17u, gr = r0 + r;
                const bool inb = gr < pc.rows && b0 + k < nb;
                const uint q = inb ? uint(w[(gr * nb + b0) * 17u + h]) : 0u;
                if (hw == 0u) {
                    dwsh[db + r * KB + k] = inb ? halfToFloat(q) : 0.0;
                } else {
                    const uint o = ab + r * SK + k * 32u + 2u * (hw - 1u);
                    ash[o] = int8_t(int(q << 24) >> 24);
                    ash[o + 1u] = int8_t(int(q << 16) >> 24);
                }
            }
            for (uint i = lane; i < BN * KB * 8u; i += SGS) {
                const uint v = i / (KB * 8u), t = i % (KB * 8u), gv = v0 + v;
                const uint q = gv < pc.n && b0 + t / 8u < nb ? xq[pc.xoff + gv * (pc.cols / 4u) + b0 * 8u + t] : 0u;
                const uint o = bb + v * SK + 4u * t;
                for (uint u = 0u; u < 4u; u++) bsh[o + u] = int8_t(int(q << (24u - 8u * u)) >> 24);
            }
            for (uint i = lane; i < BN * KB; i += SGS) {
                const uint v = i / KB, k = i % KB, gv = v0 + v;
                dxsh[xb + i] = gv < pc.n && b0 + k < nb ? xd[pc.soff + gv * nb + b0 + k] : 0.0;
            }
        }
        subgroupSync();
        for (uint k = 0u; k < KB; k++) {
            const bool blk = mine && b0 + k < nb; // uniform over the subgroup
            if (blk) {
                coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
                for (uint i = 0u; i < CM; i++)
                    for (uint t = 0u; t < CN; t++) c[i][t] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
                for (uint d = 0u; d < 32u; d += TK) {
                    coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                    coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm[CN];
                    for (uint i = 0u; i < CM; i++)
                        coopMatLoad(a[i], ash, ab + i * TM * SK + k * 32u + d, SK, gl_CooperativeMatrixLayoutRowMajor);
                    for (uint t = 0u; t < CN; t++)
                        coopMatLoad(bm[t], bsh, bb + t * TN * SK + k * 32u + d, SK, gl_CooperativeMatrixLayoutColumnMajor);
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
                    acc[e] += (dwsh[db + r * KB + k] * dxsh[xb + v * KB + k]) * float(csh[cb + i]);
                }
            }
            subgroupSync(); // before the next block's sums or the next stage overwrite the shared arrays
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
            if (gl_SubgroupSize != SGS) o = uintBitsToFloat(0x7fc00000u);
            y[pc.doff + v * pc.rows + r] = o;
        }
    }
}
