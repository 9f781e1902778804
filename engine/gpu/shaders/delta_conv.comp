#version 450
// Gated DeltaNet, stage 1 (engine/model/deltanet.go convToken and the
// activations of forward): per token, the causal depthwise convolution of the
// raw q|k|v projection over the conv window, SiLU, the L2 norms of the q and k
// heads; and g = softplus(alpha + dt_bias) * A, beta = sigmoid(beta).
//
// One workgroup per (token, head of D channels): heads 0..qk-1 are the q and k
// heads (L2-normed), the rest the v heads. The taps of token t are its own
// input and those of its ancestors, oldest first: walking parents (the
// previous token in a chain), then the rows of the window (the committed
// conv inputs, oldest first) once past a root. The sum runs in tap order from
// +0: the first K - K%4 products rounded, the last K%4 fused, as ggml's x86
// ssm_conv (tensor.ConvTaps).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(constant_id = 0) const int K = 4; // conv taps

layout(push_constant) uniform PC {
    uint n;       // tokens
    uint flags;   // 1: tree (parents in P), 2: write g and beta, 4: copy the input to SV
    uint C;       // conv channels
    uint D;       // head size
    uint qk;      // q and k heads (2 * key heads)
    uint heads;   // qk + value heads
    uint Hv;      // value heads
    uint mOff, mStride; // input rows
    uint wOff;    // window
    uint pOff;    // parents
    uint tapOff, dtOff, aOff; // in the layer's parameters
    uint bOff, alOff;         // raw beta and alpha, Hv per token
    uint cOff;                // output rows, C per token
    uint gOff, gStride;       // g (Hv) then beta (Hv) per token
    uint sOff, sStride;       // input copy
    float eps;
} pc;

layout(std430, binding = 0) readonly buffer M { float mix[]; };
layout(std430, binding = 1) readonly buffer W { float win[]; };
layout(std430, binding = 2) readonly buffer P { int par[]; };
layout(std430, binding = 3) readonly buffer L { float lp[]; };
layout(std430, binding = 4) readonly buffer B { float braw[]; };
layout(std430, binding = 5) readonly buffer A { float araw[]; };
layout(std430, binding = 6) buffer CO { float co[]; };
layout(std430, binding = 7) writeonly buffer G { float gb[]; };
layout(std430, binding = 8) writeonly buffer SV { float sv[]; };

shared float red[64];

void main() {
    const uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= pc.n * pc.heads) return;
    const uint t = wg / pc.heads, h = wg % pc.heads, lid = gl_LocalInvocationID.x;
    const bool tree = (pc.flags & 1u) != 0u;
    const int unfused = K - K % 4;

    precise float ss = 0.0;
    for (uint c = lid; c < pc.D; c += 64u) {
        const uint ch = h * pc.D + c;
        float u[K];
        int a = int(t), wr = K - 2;
        [[unroll]] for (int j = K - 1; j >= 0; j--) {
            if (a >= 0) {
                u[j] = mix[pc.mOff + uint(a) * pc.mStride + ch];
                int p = tree ? par[pc.pOff + uint(a)] : a - 1;
                a = p < a ? p : -1; // a parent comes before its child; anything else is a root
            } else {
                u[j] = win[pc.wOff + uint(wr) * pc.C + ch];
                wr--;
            }
        }
        precise float sum = 0.0;
        [[unroll]] for (int j = 0; j < K; j++) {
            const float w = lp[pc.tapOff + ch * uint(K) + uint(j)];
            if (j < unfused) {
                precise float prod = u[j] * w;
                sum = sum + prod;
            } else {
                sum = fma(u[j], w, sum);
            }
        }
        const float y = sum / (1.0 + exp(-sum));
        co[pc.cOff + t * pc.C + ch] = y;
        if ((pc.flags & 4u) != 0u) sv[pc.sOff + t * pc.sStride + ch] = u[K - 1];
        precise float y2 = y * y;
        ss = ss + y2;
    }

    if (h < pc.qk) {
        // l2Norm: x / sqrt(mean(x^2) + eps/n) / sqrt(n) (llama.cpp build_gdn_l2_norm)
        red[lid] = ss;
        barrier();
        [[unroll]] for (uint s = 32u; s > 0u; s >>= 1) {
            if (lid < s) red[lid] += red[lid + s];
            barrier();
        }
        const float fn = float(pc.D);
        const float scale = 1.0 / sqrt(red[0] / fn + pc.eps / fn);
        const float inv = 1.0 / sqrt(fn);
        for (uint c = lid; c < pc.D; c += 64u) {
            const uint i = pc.cOff + t * pc.C + h * pc.D + c;
            co[i] = (co[i] * scale) * inv;
        }
    }

    if (h == 0u && (pc.flags & 2u) != 0u) {
        for (uint e = lid; e < pc.Hv; e += 64u) {
            const float x = araw[pc.alOff + t * pc.Hv + e] + lp[pc.dtOff + e];
            const float sp = x > 20.0 ? x : log(1.0 + exp(x)); // ggml's softplus
            gb[pc.gOff + t * pc.gStride + e] = sp * lp[pc.aOff + e];
            const float b = braw[pc.bOff + t * pc.Hv + e];
            gb[pc.gOff + t * pc.gStride + pc.Hv + e] = 1.0 / (1.0 + exp(-b));
        }
    }
}
