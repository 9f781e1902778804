#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for F16 weights and
// activations rounded to F16 by quant_half, on cooperative matrices, for
// skinny passes (see matmul_cms_q8_0.comp: a workgroup takes BM weight rows
// × BN vectors over the whole depth, its four subgroups splitting the depth
// in stages of KB·32 columns, each staging its own, zeros past the ends; the
// partial sums added in subgroup order at the end). f16·f16 products, exact
// in F32, summed in F32 accumulator tiles, as matmul_cm_half.comp.
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
layout(constant_id = 4) const uint CM = 2; // row tiles
layout(constant_id = 5) const uint CN = 2; // vector tiles
layout(constant_id = 6) const uint KB = 2; // 32-column slices per stage
layout(local_size_x_id = 0) in;

const uint SGS = WG / 4u;
const uint BM = CM * TM, BN = CN * TN, SK = KB * 32u;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff; // floats: the F16-rounded activations
    uint unused;
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // F16 bits, row major
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared float16_t ash[4u * BM * SK];
shared float16_t bsh[4u * BN * SK];
shared float csh[4u * BM * BN];

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
    const uint stages = (pc.cols + SK - 1u) / SK;
    const uint ab = sg * BM * SK, bb = sg * BN * SK, cb = sg * BM * BN;

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
    for (uint i = 0u; i < CM; i++)
        for (uint t = 0u; t < CN; t++) c[i][t] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    const uint rounds = (stages + 3u) / 4u;
    for (uint j = 0u; j < rounds; j++) {
        const uint st = 4u * j + sg;
        const bool mine = ok && st < stages; // uniform over the subgroup
        const uint c0 = st * SK;
        if (mine) {
            for (uint i = lane; i < BM * SK; i += SGS) {
                const uint r = r0 + i / SK, k = c0 + i % SK;
                ash[ab + i] = r < pc.rows && k < pc.cols ? uint16BitsToHalf(w[r * pc.cols + k]) : float16_t(0.0);
            }
            for (uint i = lane; i < BN * SK; i += SGS) {
                const uint v = v0 + i / SK, k = c0 + i % SK;
                bsh[bb + i] = v < pc.n && k < pc.cols ? float16_t(x[pc.xoff + v * pc.cols + k]) : float16_t(0.0);
            }
        }
        subgroupSync();
        if (mine) {
            for (uint d = 0u; d < SK && c0 + d < pc.cols; d += TK) {
                coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b[CN];
                for (uint i = 0u; i < CM; i++)
                    coopMatLoad(a[i], ash, ab + i * TM * SK + d, SK, gl_CooperativeMatrixLayoutRowMajor);
                for (uint t = 0u; t < CN; t++)
                    coopMatLoad(b[t], bsh, bb + t * TN * SK + d, SK, gl_CooperativeMatrixLayoutColumnMajor);
                for (uint i = 0u; i < CM; i++)
                    for (uint t = 0u; t < CN; t++) c[i][t] = coopMatMulAdd(a[i], b[t], c[i][t]);
            }
        }
        subgroupSync(); // before the next stage's staging overwrites the shared arrays
    }
    if (ok) {
        for (uint i = 0u; i < CM; i++)
            for (uint t = 0u; t < CN; t++)
                coopMatStore(c[i][t], csh, cb + i * TM * BN + t * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();
    for (uint i = tid; i < BM * BN; i += WG) {
        const uint r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) {
            float o = csh[i];
            for (uint s = 1u; s < 4u; s++) o += csh[s * BM * BN + i];
            if (gl_SubgroupSize != SGS) o = uintBitsToFloat(0x7fc00000u);
            y[pc.doff + v * pc.rows + r] = o;
        }
    }
}
