#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for F16 weights and
// activations rounded to F16 by quant_half, on cooperative matrices
// (tensor cores): f16·f16 products, exact in F32, summed in F32 as the
// CPU's F16 product does (engine/tensor), in another order.
//
// The tile TM×TN×TK is one the driver lists for f16·f16→f32 (8×8×8 on
// lavapipe, 16×16×16 on NVIDIA; 16×16×16 on lavapipe through
// VK_NV_cooperative_matrix2's flexible dimensions). The workgroup is four
// subgroups (WG = 4 × the subgroup size) in 2×2, each holding CM×CN
// accumulator tiles: it covers BM = 2·CM·TM weight rows × BN = 2·CN·TN
// vectors. Each BK-deep slice of its rows and vectors is staged in shared
// memory as F16, zeros past the ends of rows, columns and depth (ragged
// edges); at the end the accumulators go through shared memory to dst,
// masked at the edges.
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
layout(local_size_x_id = 0) in;

const uint CM = 2, CN = 2;
const uint BM = 2 * CM * TM, BN = 2 * CN * TN, BK = 32;

layout(push_constant) uniform PC {
    uint rows, cols, n, rgroups, groups;
    uint xoff; // floats: the F16-rounded activations
    uint unused;
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint16_t w[]; }; // F16 bits, row major
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared float16_t ash[BM * BK]; // weights, row major
shared float16_t bsh[BN * BK]; // activations, one vector per BK
shared float csh[BM * BN];

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint r0 = (g % pc.rgroups) * BM, v0 = (g / pc.rgroups) * BN;
    // Where a driver runs the shader with smaller subgroups than it reports
    // (more than four), the extra ones only stage and scale.
    const uint sg = gl_SubgroupID;
    const bool tiles = sg < 4u; // uniform over the subgroup
    const uint sr = (sg / 2u) * CM * TM, sc = (sg % 2u) * CN * TN;

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
    for (uint i = 0u; i < CM; i++)
        for (uint j = 0u; j < CN; j++) c[i][j] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);

    for (uint k0 = 0u; k0 < pc.cols; k0 += BK) {
        for (uint i = tid; i < BM * BK; i += WG) {
            const uint r = r0 + i / BK, k = k0 + i % BK;
            ash[i] = r < pc.rows && k < pc.cols ? uint16BitsToHalf(w[r * pc.cols + k]) : float16_t(0.0);
        }
        for (uint i = tid; i < BN * BK; i += WG) {
            const uint v = v0 + i / BK, k = k0 + i % BK;
            bsh[i] = v < pc.n && k < pc.cols ? float16_t(x[pc.xoff + v * pc.cols + k]) : float16_t(0.0);
        }
        barrier();
        if (tiles) {
            for (uint k = 0u; k < BK; k += TK) {
                coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b[CN];
                for (uint i = 0u; i < CM; i++)
                    coopMatLoad(a[i], ash, (sr + i * TM) * BK + k, BK, gl_CooperativeMatrixLayoutRowMajor);
                for (uint j = 0u; j < CN; j++)
                    coopMatLoad(b[j], bsh, (sc + j * TN) * BK + k, BK, gl_CooperativeMatrixLayoutColumnMajor);
                for (uint i = 0u; i < CM; i++)
                    for (uint j = 0u; j < CN; j++) c[i][j] = coopMatMulAdd(a[i], b[j], c[i][j]);
            }
        }
        barrier(); // before the next slice's staging overwrites the shared arrays
    }
    if (tiles) {
        for (uint i = 0u; i < CM; i++)
            for (uint j = 0u; j < CN; j++)
                coopMatStore(c[i][j], csh, (sr + i * TM) * BN + sc + j * TN, BN, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();
    for (uint i = tid; i < BM * BN; i += WG) {
        const uint r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) y[pc.doff + v * pc.rows + r] = csh[i];
    }
}
