#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for Q8_0 weights and
// activations quantized to Q8_0 by quant_q8_0 (W8A8), on cooperative
// matrices (tensor cores): the int8·int8→int32 products of each 32-deep
// block are tile products, exact; then, as on the CPU and in
// matmul_q8_0.comp, acc += (d_w*d_x) * float(sum) in F32, block after
// block. A block's integer sum is the CPU's (integer sums are exact);
// only the order of the float additions differs (the CPU adds per four
// quants, in eight lanes).
//
// The tile TM×TN×TK is one the driver lists for s8·s8→s32 (8×8×8 on
// lavapipe, 16×16×32 or 16×8×32 on NVIDIA; a flexible-dimension shape
// through VK_NV_cooperative_matrix2). The workgroup is four subgroups
// (WG = 4 × the subgroup size) in 2×2, each holding CM×CN accumulator
// tiles, so that it covers BM = 2·CM·TM weight rows × BN = 2·CN·TN vectors.
// Per block, the quants and scales of its rows and vectors are staged in
// shared memory, rows or vectors past the end as zeros (ragged edges);
// the tiles' integer sums go to shared memory, where every invocation
// scales and adds its own BM·BN/WG outputs, which it writes at the end
// (masked at the edges).
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
layout(local_size_x_id = 0) in;

const uint CM = 2, CN = 2;
const uint BM = 2 * CM * TM, BN = 2 * CN * TN, BK = 32;
const uint PER = BM * BN / WG; // outputs per invocation

layout(push_constant) uniform PC {
    uint rows, cols, n, rgroups, groups;
    uint xoff; // words: the activation quants, four to a word
    uint soff; // floats: the activation block scales
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // 34-byte blocks: 17 halfwords
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XD { float xd[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared int8_t ash[BM * BK]; // weight quants, row major
shared int8_t bsh[BN * BK]; // activation quants, one vector per BK
shared float dwsh[BM];
shared float dxsh[BN];
shared int csh[BM * BN]; // the block's integer sums, row major

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

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint r0 = (g % pc.rgroups) * BM, v0 = (g / pc.rgroups) * BN;
    // Where a driver runs the shader with smaller subgroups than it reports
    // (more than four), the extra ones only stage and scale.
    const uint sg = gl_SubgroupID;
    const bool tiles = sg < 4u; // uniform over the subgroup
    const uint sr = (sg / 2u) * CM * TM, sc = (sg % 2u) * CN * TN; // this subgroup's corner in the block
    const uint nb = pc.cols / 32u;

    float acc[PER];
    for (uint e = 0u; e < PER; e++) acc[e] = 0.0;

    for (uint b = 0u; b < nb; b++) {
        for (uint i = tid; i < BM * 16u; i += WG) {
            const uint r = i / 16u, h = i % 16u, gr = r0 + r;
            const uint q = gr < pc.rows ? uint(w[(gr * nb + b) * 17u + 1u + h]) : 0u;
            ash[r * BK + 2u * h] = int8_t(int(q << 24) >> 24);
            ash[r * BK + 2u * h + 1u] = int8_t(int(q << 16) >> 24);
        }
        for (uint r = tid; r < BM; r += WG) {
            const uint gr = r0 + r;
            dwsh[r] = gr < pc.rows ? halfToFloat(uint(w[(gr * nb + b) * 17u])) : 0.0;
        }
        for (uint i = tid; i < BN * 8u; i += WG) {
            const uint v = i / 8u, k = i % 8u, gv = v0 + v;
            const uint q = gv < pc.n ? xq[pc.xoff + gv * (pc.cols / 4u) + b * 8u + k] : 0u;
            for (uint j = 0u; j < 4u; j++) bsh[v * BK + 4u * k + j] = int8_t(int(q << (24u - 8u * j)) >> 24);
        }
        for (uint v = tid; v < BN; v += WG) {
            const uint gv = v0 + v;
            dxsh[v] = gv < pc.n ? xd[pc.soff + gv * nb + b] : 0.0;
        }
        barrier();

        if (tiles) {
            coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
            for (uint i = 0u; i < CM; i++)
                for (uint j = 0u; j < CN; j++) c[i][j] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
            for (uint k = 0u; k < BK; k += TK) {
                coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm[CN];
                for (uint i = 0u; i < CM; i++)
                    coopMatLoad(a[i], ash, (sr + i * TM) * BK + k, BK, gl_CooperativeMatrixLayoutRowMajor);
                for (uint j = 0u; j < CN; j++)
                    coopMatLoad(bm[j], bsh, (sc + j * TN) * BK + k, BK, gl_CooperativeMatrixLayoutColumnMajor);
                for (uint i = 0u; i < CM; i++)
                    for (uint j = 0u; j < CN; j++) c[i][j] = coopMatMulAdd(a[i], bm[j], c[i][j]);
            }
            for (uint i = 0u; i < CM; i++)
                for (uint j = 0u; j < CN; j++)
                    coopMatStore(c[i][j], csh, (sr + i * TM) * BN + sc + j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
        }
        barrier();
        for (uint e = 0u; e < PER; e++) {
            const uint i = tid + e * WG, r = i / BN, v = i % BN;
            acc[e] += (dwsh[r] * dxsh[v]) * float(csh[i]);
        }
        barrier(); // before the next block's staging overwrites the shared arrays
    }
    for (uint e = 0u; e < PER; e++) {
        const uint i = tid + e * WG, r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) y[pc.doff + v * pc.rows + r] = acc[e];
    }
}
