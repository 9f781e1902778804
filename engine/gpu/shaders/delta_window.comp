#version 450
// Gated DeltaNet, conv window update after a chain (engine/model/deltanet.go
// shift): the window (K-1 rows of C, oldest first) becomes the last K-1 rows
// of [window; the n inputs]. One invocation per channel, rows in ascending
// order: row r takes row r+n of that sequence, which is not yet overwritten.
layout(local_size_x = 64) in;
layout(constant_id = 0) const int K = 4; // conv taps

layout(push_constant) uniform PC {
    uint n;   // tokens
    uint C;   // conv channels
    uint wOff;
    uint mOff, mStride;
} pc;

layout(std430, binding = 0) buffer W { float win[]; };
layout(std430, binding = 1) readonly buffer M { float mix[]; };

void main() {
    const uint ch = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
    if (ch >= pc.C) return;
    const uint rows = uint(K - 1);
    for (uint r = 0u; r < rows; r++) {
        const uint src = r + pc.n;
        float v;
        if (src < rows) v = win[pc.wOff + src * pc.C + ch];
        else v = mix[pc.mOff + (src - rows) * pc.mStride + ch];
        win[pc.wOff + r * pc.C + ch] = v;
    }
}
