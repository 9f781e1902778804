#version 450
// dst[v*rows + r] = sum_c W[r,c] x[v*cols + c] for F32 weights and F32
// activations, summed in F32 in a fixed order that depends on the columns
// and TPR alone, so that a vector's result is the same bits whatever n and
// NV are. The CPU (engine/tensor/kernels.go) sums in another order: the
// results agree to rounding.
//
// Workgroup g computes R = WG/TPR rows from R*(g/vgroups) for the vectors
// from NV*(g%vgroups) (see matmul_q8_0.comp). TPR invocations share a row,
// invocation t of them taking units t, t+TPR, ...: four values (VEC4, when
// cols is a multiple of 4), else one. XVEC: x's offset is a multiple of 4,
// so vec4 loads reach it. The partial sums are added in shared memory (TPR
// a power of two).
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint NV = 1;   // vectors per workgroup
layout(constant_id = 2) const uint TPR = 32; // invocations per row
layout(constant_id = 3) const bool VEC4 = true;
layout(constant_id = 4) const bool XVEC = true;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint rows, cols, n, vgroups, groups;
    uint xoff;       // floats: x
    uint soff, ioff; // unused
    uint doff;       // floats: dst
} pc;

layout(std430, binding = 0) readonly buffer W { float w[]; };
layout(std430, binding = 0) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

const uint R = WG / TPR;
const uint U = VEC4 ? 4u : 1u; // values per unit
shared float part[NV * WG];

void main() {
    const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (g >= pc.groups) return; // uniform over the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint row = (g / pc.vgroups) * R + tid / TPR, lane = tid % TPR, v0 = (g % pc.vgroups) * NV;
    const uint units = pc.cols / U;
    float acc[NV];
    for (uint v = 0u; v < NV; v++) acc[v] = 0.0;

    for (uint u = lane; row < pc.rows && u < units; u += TPR) {
        const vec4 wv = VEC4 ? w4[row * units + u] : vec4(w[row * pc.cols + u], 0.0, 0.0, 0.0);
        for (uint v = 0u; v < NV; v++) {
            if (v0 + v < pc.n) {
                const uint xi = pc.xoff + (v0 + v) * pc.cols + u * U;
                float s;
                if (!VEC4) {
                    s = wv.x * x[xi];
                } else {
                    const vec4 xv = XVEC ? x4[xi / 4u] : vec4(x[xi], x[xi + 1u], x[xi + 2u], x[xi + 3u]);
                    s = wv.x * xv.x;
                    s += wv.y * xv.y;
                    s += wv.z * xv.z;
                    s += wv.w * xv.w;
                }
                acc[v] += s;
            }
        }
    }

    for (uint v = 0u; v < NV; v++) part[v * WG + tid] = acc[v];
    barrier();
    for (uint h = TPR / 2u; h > 0u; h >>= 1) {
        if (lane < h) {
            for (uint v = 0u; v < NV; v++) part[v * WG + tid] += part[v * WG + tid + h];
        }
        barrier();
    }
    if (lane < NV && row < pc.rows && v0 + lane < pc.n) {
        y[pc.doff + (v0 + lane) * pc.rows + row] = part[lane * WG + tid - lane];
    }
}
