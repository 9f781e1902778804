#version 450
// Gated DeltaNet, stage 2: the recurrence (engine/model/deltanet.go runDelta
// and step, tensor.DeltaStep). Per value head hv, S is D rows of D (row j is
// column j of the paper's S: s[j*D + i] = S[i][j]); rows are independent, so
// each invocation owns one row in registers and runs the tokens in order:
//
//	S_j *= e^g;  delta = (v_j - S_j.k) * beta;  S_j = fma(k, delta, S_j);  o_j = (S_j.q) * scale
//
// with the dot products in ggml_vec_dot_f32's order (32 fused lanes over
// blocks of 32, GGML_F32x8_REDUCE, then the leftovers). q and k come from key
// head hv % key heads. A workgroup holds WG rows of one head; the q and k of
// T tokens at a time are staged in shared memory.
//
// Chain: the committed S advances in place. Tree: every node continues from
// its parent's state (a root from the committed state, which is not
// written). Invocation 0 plans an order: depth first, the largest child
// subtree last; a node with several children saves its state to a slot that
// its later children reload, and the last child frees it, so at most
// bit_length(n) slots are live at once (each slot holder's other children
// have less than half its subtree).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint D = 128; // head size
layout(constant_id = 1) const uint WG = 64; // rows per workgroup; divides D
const uint T = 8;                           // tokens staged per round
const uint MAXN = 256;                      // tree nodes

layout(push_constant) uniform PC {
    uint n;        // tokens
    uint flags;    // 1: tree, 2: write outputs
    uint Hk, Hv;   // key and value heads
    uint C;        // conv channels (q | k | v per token)
    uint cOff;     // conv output rows
    uint gOff, gStride; // g (Hv) then beta (Hv) per token
    uint sOff;     // committed S
    uint nOff;     // tree slots, Hv*D*D each
    uint pOff;     // parents
    uint oOff, oStride; // outputs
    float scale;
} pc;

layout(std430, binding = 0) readonly buffer CO { float co[]; };
layout(std430, binding = 1) readonly buffer G { float gb[]; };
layout(std430, binding = 2) buffer S { float st[]; };
layout(std430, binding = 3) buffer NS { float ns[]; };
layout(std430, binding = 4) readonly buffer P { int par[]; };
layout(std430, binding = 5) writeonly buffer O { float outp[]; };

shared float sq[T * D], sk[T * D];
// the tree plan: step k runs node order[k] after loading its state from
// lds[k] (-2: the registers, -1: the committed S, s >= 0: slot s), then
// saves it to slot svs[k] (-1: none)
shared int order[MAXN], lds[MAXN], svs[MAXN];
shared int spar[MAXN], ssize[MAXN], sfirst[MAXN], snext[MAXN], tnode[MAXN], tcode[MAXN];

const int KEEP = -2, COMMITTED = -1, FREE = 1 << 16;

void plan(uint n) {
    for (uint i = 0u; i < n; i++) {
        int p = par[pc.pOff + i];
        spar[i] = (p >= -1 && p < int(i)) ? p : -1;
        ssize[i] = 1;
        sfirst[i] = -1;
        snext[i] = -1;
    }
    int roots = -1;
    for (int i = int(n) - 1; i >= 0; i--) {
        const int p = spar[i];
        if (p >= 0) {
            ssize[p] += ssize[i];
            snext[i] = sfirst[p];
            sfirst[p] = i;
        } else {
            snext[i] = roots;
            roots = i;
        }
    }
    int sp = 0;
    for (int r = roots; r >= 0; r = snext[r]) {
        tnode[sp] = r;
        tcode[sp] = COMMITTED;
        sp++;
    }
    int steps = 0, top = 0;
    while (sp > 0) {
        sp--;
        const int c = tnode[sp];
        int code = tcode[sp];
        if (code >= FREE) {
            code -= FREE;
            top--;
        }
        order[steps] = c;
        lds[steps] = code;
        svs[steps] = -1;
        int m = 0, big = -1;
        for (int x = sfirst[c]; x >= 0; x = snext[x]) {
            m++;
            if (big < 0 || ssize[x] > ssize[big]) big = x;
        }
        if (m == 1) {
            tnode[sp] = big;
            tcode[sp] = KEEP;
            sp++;
        } else if (m > 1) {
            const int s = top++;
            svs[steps] = s;
            tnode[sp] = big;
            tcode[sp] = s + FREE;
            sp++;
            int last = -1;
            for (int x = sfirst[c]; x >= 0; x = snext[x]) {
                if (x == big) continue;
                if (last >= 0) {
                    tnode[sp] = last;
                    tcode[sp] = s;
                    sp++;
                }
                last = x;
            }
            tnode[sp] = last;
            tcode[sp] = KEEP;
            sp++;
        }
        steps++;
    }
}

void main() {
    const uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint per = D / WG;
    if (wg >= pc.Hv * per) return;
    const uint hv = wg / per, lid = gl_LocalInvocationID.x;
    const uint j = (wg % per) * WG + lid;
    const uint kh = hv % pc.Hk, keyDim = pc.Hk * D;
    const bool tree = (pc.flags & 1u) != 0u;
    const uint n = tree ? min(pc.n, MAXN) : pc.n;
    const uint row = (hv * D + j) * D; // this row in S and in every slot
    const uint slot = pc.Hv * D * D;

    if (tree) {
        if (lid == 0u) plan(n);
        barrier();
    }

    float s[D];
    if (!tree) {
        [[unroll]] for (uint i = 0u; i < D; i++) s[i] = st[pc.sOff + row + i];
    }

    for (uint k0 = 0u; k0 < n; k0 += T) {
        const uint m = min(T, n - k0);
        barrier(); // the previous round's q and k are read
        for (uint e = lid; e < m * D; e += WG) {
            const uint tt = e / D, i = e % D;
            const uint tok = tree ? uint(order[k0 + tt]) : k0 + tt;
            sq[e] = co[pc.cOff + tok * pc.C + kh * D + i];
            sk[e] = co[pc.cOff + tok * pc.C + keyDim + kh * D + i];
        }
        barrier();
        for (uint tt = 0u; tt < m; tt++) {
            const uint k = k0 + tt;
            const uint tok = tree ? uint(order[k]) : k;
            if (tree) {
                const int ld = lds[k];
                if (ld == COMMITTED) {
                    [[unroll]] for (uint i = 0u; i < D; i++) s[i] = st[pc.sOff + row + i];
                } else if (ld >= 0) {
                    [[unroll]] for (uint i = 0u; i < D; i++) s[i] = ns[pc.nOff + uint(ld) * slot + row + i];
                }
            }
            const float eg = exp(gb[pc.gOff + tok * pc.gStride + hv]);
            const float beta = gb[pc.gOff + tok * pc.gStride + pc.Hv + hv];
            const float v = co[pc.cOff + tok * pc.C + 2u * keyDim + hv * D + j];
            const uint b = tt * D;
            const uint np = D & ~31u, tail = D - (D - np) % 4u;

            // S_j.k after the decay, in ggml_vec_dot_f32's order
            float acc[32];
            [[unroll]] for (uint l = 0u; l < 32u; l++) acc[l] = 0.0;
            [[unroll]] for (uint i = 0u; i < D; i++) s[i] *= eg;
            [[unroll]] for (uint i = 0u; i < np; i++) acc[i % 32u] = fma(s[i], sk[b + i], acc[i % 32u]);
            precise float dot = 0.0;
            if (np > 0u) {
                float x0[8];
                [[unroll]] for (uint l = 0u; l < 8u; l++) x0[l] = (acc[l] + acc[16u + l]) + (acc[8u + l] + acc[24u + l]);
                dot = ((x0[0] + x0[4]) + (x0[1] + x0[5])) + ((x0[2] + x0[6]) + (x0[3] + x0[7]));
            }
            [[unroll]] for (uint i = np; i < tail; i++) {
                precise float p = s[i] * sk[b + i];
                dot = dot + p;
            }
            [[unroll]] for (uint i = tail; i < D; i++) dot = fma(s[i], sk[b + i], dot);

            const float delta = (v - dot) * beta;
            [[unroll]] for (uint i = 0u; i < D; i++) s[i] = fma(sk[b + i], delta, s[i]);

            // S_j.q
            [[unroll]] for (uint l = 0u; l < 32u; l++) acc[l] = 0.0;
            [[unroll]] for (uint i = 0u; i < np; i++) acc[i % 32u] = fma(s[i], sq[b + i], acc[i % 32u]);
            precise float o = 0.0;
            if (np > 0u) {
                float x0[8];
                [[unroll]] for (uint l = 0u; l < 8u; l++) x0[l] = (acc[l] + acc[16u + l]) + (acc[8u + l] + acc[24u + l]);
                o = ((x0[0] + x0[4]) + (x0[1] + x0[5])) + ((x0[2] + x0[6]) + (x0[3] + x0[7]));
            }
            [[unroll]] for (uint i = np; i < tail; i++) {
                precise float p = s[i] * sq[b + i];
                o = o + p;
            }
            [[unroll]] for (uint i = tail; i < D; i++) o = fma(s[i], sq[b + i], o);

            if ((pc.flags & 2u) != 0u) outp[pc.oOff + tok * pc.oStride + hv * D + j] = o * pc.scale;
            if (tree && svs[k] >= 0) {
                [[unroll]] for (uint i = 0u; i < D; i++) ns[pc.nOff + uint(svs[k]) * slot + row + i] = s[i];
            }
        }
    }

    if (!tree) {
        [[unroll]] for (uint i = 0u; i < D; i++) st[pc.sOff + row + i] = s[i];
    }
}
