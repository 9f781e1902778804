#version 450
// qwen35's gated query projection holds per head [query (hd) | gate (hd)]:
// q and gate get the halves (engine/model attention.forward), bits copied.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, hd, qOff, gOff, fOff; } pc; // n = tokens*heads*hd
layout(std430, binding = 0) writeonly buffer Q { uint q[]; };
layout(std430, binding = 1) writeonly buffer G { uint gate[]; };
layout(std430, binding = 2) readonly buffer F { uint qf[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    const uint r = i / pc.hd, d = i - r * pc.hd;
    const uint src = pc.fOff + 2u * r * pc.hd + d;
    q[pc.qOff + i] = qf[src];
    gate[pc.gOff + i] = qf[src + pc.hd];
}
