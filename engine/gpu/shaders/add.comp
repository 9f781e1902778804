#version 450
// dst[i] += x[i] (tensor.Add): one correctly rounded add per value, so the
// CPU's bits. Offsets are in floats from the start of each bound buffer.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, dOff, xOff; } pc;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    precise float s = d[pc.dOff + i] + x[pc.xOff + i];
    d[pc.dOff + i] = s;
}
