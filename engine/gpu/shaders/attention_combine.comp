#version 450
// Merges the S partial results of attention.comp's splits of the slots:
// per query row, M = max of the splits' maxima, L = sum l*exp(m - M),
// out = sum acc*exp(m - M) * (vScale / L). One workgroup a row.
layout(local_size_x = 64) in;
layout(push_constant) uniform PC { uint rows, hd, S, oOff, sOff; float vScale; } pc;
layout(std430, binding = 0) writeonly buffer O { float outv[]; };
layout(std430, binding = 1) readonly buffer P { float part[]; };
void main() {
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= pc.rows) return;
    float M = -3.402823466e38;
    for (uint s = 0u; s < pc.S; s++) M = max(M, part[pc.sOff + 2u * (s * pc.rows + row)]);
    float L = 0.0;
    for (uint s = 0u; s < pc.S; s++) {
        const uint pr = pc.sOff + 2u * (s * pc.rows + row);
        L += part[pr + 1u] * exp(part[pr] - M);
    }
    const float inv = L > 0.0 ? pc.vScale / L : 0.0;
    const uint accBase = pc.sOff + 2u * pc.S * pc.rows;
    for (uint d = gl_LocalInvocationID.x; d < pc.hd; d += 64u) {
        float o = 0.0;
        for (uint s = 0u; s < pc.S; s++) {
            const uint pr = s * pc.rows + row;
            o += part[accBase + pr * pc.hd + d] * exp(part[pc.sOff + 2u * pr] - M);
        }
        outv[pc.oOff + row * pc.hd + d] = o * inv;
    }
}
