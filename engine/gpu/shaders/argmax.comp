#version 450
// dst[row] = the index of the largest value of each row of logits, the
// lowest index on ties, as engine/sample's Argmax: it scans upwards and
// keeps a value only when it is greater, so a NaN never wins and a NaN in
// column 0 wins everything (nothing compares greater than it). Values are
// compared by their bits mapped to an unsigned order (-0 as +0, NaN
// below -Inf), so that denormals are never flushed. One workgroup a row.
layout(local_size_x = 256) in;
layout(push_constant) uniform PC { uint rows, vocab, dOff, lOff; } pc;
layout(std430, binding = 0) writeonly buffer D { uint dst[]; };
layout(std430, binding = 1) readonly buffer L { uint logits[]; };

shared uint keyS[256], idxS[256];

uint orderKey(uint b) {
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0u; // NaN
    if (b == 0x80000000u) b = 0u;                  // -0 ties with +0
    return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

void main() {
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= pc.rows) return;
    const uint t = gl_LocalInvocationID.x;
    const uint base = pc.lOff + row * pc.vocab;
    uint bk = 0u, bi = 0xffffffffu;
    if (t < pc.vocab) {
        bk = orderKey(logits[base + t]);
        bi = t;
    }
    for (uint i = t + 256u; i < pc.vocab; i += 256u) {
        const uint k = orderKey(logits[base + i]);
        if (k > bk) {
            bk = k;
            bi = i;
        }
    }
    keyS[t] = bk;
    idxS[t] = bi;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s) {
            const uint k2 = keyS[t + s], i2 = idxS[t + s];
            if (k2 > keyS[t] || (k2 == keyS[t] && i2 < idxS[t])) {
                keyS[t] = k2;
                idxS[t] = i2;
            }
        }
        barrier();
    }
    if (t == 0u) {
        const uint b0 = logits[base];
        dst[pc.dOff + row] = (b0 & 0x7fffffffu) > 0x7f800000u ? 0u : idxS[0];
    }
}
