#version 450
// Gated DeltaNet replay: gathers the saved rows (conv input, g, beta) of the
// accepted path, root first, into consecutive rows: dst[t] = saved[path[t]].
// A path entry outside the saved rows gives a row of zeros.
layout(local_size_x = 64) in;

layout(push_constant) uniform PC {
    uint n;      // path length
    uint row;    // floats per row
    uint rows;   // saved rows
    uint dOff, sOff, pOff;
} pc;

layout(std430, binding = 0) writeonly buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer SV { float sv[]; };
layout(std430, binding = 2) readonly buffer P { int path[]; };

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
    if (i >= pc.n * pc.row) return;
    const uint t = i / pc.row, e = i % pc.row;
    const int p = path[pc.pOff + t];
    dst[pc.dOff + i] = (p >= 0 && uint(p) < pc.rows) ? sv[pc.sOff + uint(p) * pc.row + e] : 0.0;
}
