#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for NVFP4 weights (ggml's
// block_nvfp4: 36-byte blocks of 64 values, four UE4M3 sub-block scales then
// 32 bytes of E2M1 codes) on cooperative matrices (tensor cores), with the
// activations of MODE as in matmul_nvfp4.comp:
//   0 W4A8: Q8_0 quants; per sub-block of 16 values the exact int32 sum of
//     ggml's doubled E2M1 integers (0..±12, exact in int8) times the
//     quants, times (scale/2)*d_x;
//   1 W4A4: NVFP4 codes from quant_nvfp4 as doubled integers; the exact
//     sum times scale*(SF/4), and the row's total times 1/G.
// The integer sums are int8·int8→int32 tile products, each sub-block's the
// CPU's bits; the float steps are the scalar shader's, in another order of
// the sub-blocks.
//
// Tiles and workgroup as in matmul_cm_q8_0.comp (four subgroups, 2×2, each
// CM×CN accumulator tiles of the driver's TM×TN×TK). A sub-block is 16 deep;
// it is staged KT = max(TK, 16) deep with zeros after its 16 values, so that
// a 32-deep int8 tile (NVIDIA's) still gives per-16 sums.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(constant_id = 0) const uint WG = 32; // 4 subgroups
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 8;
layout(constant_id = 3) const uint TK = 8;
layout(constant_id = 4) const uint MODE = 0;
layout(local_size_x_id = 0) in;

const uint CM = 2, CN = 2;
const uint BM = 2 * CM * TM, BN = 2 * CN * TN;
const uint KT = TK > 16u ? TK : 16u;
const uint PER = BM * BN / WG; // outputs per invocation

layout(push_constant) uniform PC {
    uint rows, cols, n, rgroups, groups;
    uint xoff; // words: the activation quants or codes, four to a word
    uint soff; // floats: the activation scales (d per 32 values, or SF/4 per 16)
    uint ioff; // floats: W4A4's 1/G per vector
    uint doff; // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { uint w[]; }; // 9 words a block
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 1) readonly buffer XF { float xf[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

shared int8_t ash[BM * KT]; // weight values (doubled E2M1), row major
shared int8_t bsh[BN * KT]; // activation quants or codes, one vector per KT
shared float dwsh[BM];
shared float dxsh[BN];
shared int csh[BM * BN];

// nvScale is the UE4M3 value of a scale byte's low 7 bits; the NaN code reads as 0.
float nvScale(uint c) {
    c &= 0x7fu;
    if (c == 0x7fu) return 0.0;
    const uint e = c >> 3, m = c & 7u;
    if (e == 0u) return float(m) * (1.0 / 512.0);
    return uintBitsToFloat(((e + 120u) << 23) | (m << 20));
}

// e2m1x2 is ggml's kvalues_fp4 for the 4-bit code in the low bits of c.
int e2m1x2(uint c) {
    const int m = int(c & 7u);
    const int mag = m < 2 ? m : ((m & 1) | 2) << ((m >> 1) - 1);
    return (c & 8u) != 0u ? -mag : mag;
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
    const uint sr = (sg / 2u) * CM * TM, sc = (sg % 2u) * CN * TN;
    const uint nb = pc.cols / 64u, units = nb * 4u;

    float acc[PER];
    for (uint e = 0u; e < PER; e++) acc[e] = 0.0;
    for (uint i = tid; i < BM * KT; i += WG) ash[i] = int8_t(0); // the zero tails stay zero
    for (uint i = tid; i < BN * KT; i += WG) bsh[i] = int8_t(0);
    barrier(); // before the staging writes over the zeros

    for (uint u = 0u; u < units; u++) {
        const uint b = u >> 2, s = u & 3u;
        for (uint i = tid; i < BM * 8u; i += WG) {
            // byte j of the sub-block's eight: value j in the low nibble, j+8 in the high
            const uint r = i / 8u, j = i % 8u, gr = r0 + r;
            uint c = 0u;
            if (gr < pc.rows) c = (w[(gr * nb + b) * 9u + 1u + 2u * s + j / 4u] >> (8u * (j % 4u))) & 0xffu;
            ash[r * KT + j] = int8_t(e2m1x2(c));
            ash[r * KT + j + 8u] = int8_t(e2m1x2(c >> 4));
        }
        for (uint r = tid; r < BM; r += WG) {
            const uint gr = r0 + r;
            dwsh[r] = gr < pc.rows ? nvScale((w[(gr * nb + b) * 9u] >> (8u * s)) & 0xffu) : 0.0;
        }
        for (uint i = tid; i < BN * 4u; i += WG) {
            const uint v = i / 4u, k = i % 4u, gv = v0 + v;
            const uint q = gv < pc.n ? xq[pc.xoff + gv * (pc.cols / 4u) + 4u * u + k] : 0u;
            for (uint j = 0u; j < 4u; j++) bsh[v * KT + 4u * k + j] = int8_t(int(q << (24u - 8u * j)) >> 24);
        }
        for (uint v = tid; v < BN; v += WG) {
            const uint gv = v0 + v;
            float d = 0.0;
            if (gv < pc.n) d = MODE == 0u ? xf[pc.soff + gv * (pc.cols / 32u) + u / 2u] : xf[pc.soff + gv * (pc.cols / 16u) + u];
            dxsh[v] = d;
        }
        barrier();

        if (tiles) {
            coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> c[CM][CN];
            for (uint i = 0u; i < CM; i++)
                for (uint j = 0u; j < CN; j++) c[i][j] = coopmat<int, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
            for (uint k = 0u; k < KT; k += TK) {
                coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[CM];
                coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> bm[CN];
                for (uint i = 0u; i < CM; i++)
                    coopMatLoad(a[i], ash, (sr + i * TM) * KT + k, KT, gl_CooperativeMatrixLayoutRowMajor);
                for (uint j = 0u; j < CN; j++)
                    coopMatLoad(bm[j], bsh, (sc + j * TN) * KT + k, KT, gl_CooperativeMatrixLayoutColumnMajor);
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
            const float d = MODE == 0u ? (dwsh[r] * 0.5) * dxsh[v] : dwsh[r] * dxsh[v];
            acc[e] += d * float(csh[i]);
        }
        barrier(); // before the next sub-block's staging overwrites the shared arrays
    }
    for (uint e = 0u; e < PER; e++) {
        const uint i = tid + e * WG, r = r0 + i / BN, v = v0 + i % BN;
        if (r < pc.rows && v < pc.n) {
            float o = acc[e];
            if (MODE == 1u) o *= xf[pc.ioff + v];
            y[pc.doff + v * pc.rows + r] = o;
        }
    }
}
