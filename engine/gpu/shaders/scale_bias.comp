#version 450
// x = x*scale (when scale is not 0), then + bias[col] (when hasBias): the
// Scale and Bias of a model.Linear (tensor.Scale, then tensor.Add per row),
// each one correctly rounded operation, never fused, so the CPU's bits.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint n, cols, xOff, bOff, hasBias; float scale; } pc;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    precise float v = x[pc.xOff + i];
    if (pc.scale != 0.0) v = v * pc.scale;
    if (pc.hasBias != 0u) v = v + b[pc.bOff + i % pc.cols];
    x[pc.xOff + i] = v;
}
