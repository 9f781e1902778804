#version 450
// dst[i] = v for i < n: the smallest shader, which the binding's own tests run.
layout(local_size_x = 64) in;
layout(push_constant) uniform PC { uint n; float v; } pc;
layout(std430, binding = 0) writeonly buffer D { float dst[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
    if (i < pc.n) dst[i] = pc.v;
}
