// gen.c: goldens of llama.cpp's own block decoders and AVX2 dot products
// for edgellmd's engine/tensor tests (kquant_golden_test.go).
//
// For each type it writes random blocks (scales drawn over a wide range,
// subnormal F16 included), random activation vectors, and what ggml
// computes from them: the rows dequantized by ggml_get_type_traits(t)->to_float
// (libggml-base) and each row's dot product with each vector by the CPU
// backend's from_float (the activation quantizer of t's vec_dot_type) and
// vec_dot, from the library given at link time (the AVX2 "haswell" variant
// of node-llama-cpp's prebuilt ggml). See README.md for the command.
//
// Output, little endian: "KQG1", u32 count, then per case:
// u32 type, u32 cols, u32 rows, u32 nvec, weights (rows*row_size bytes),
// activations (nvec*cols f32), dequantized (rows*cols f32),
// dots (nvec*rows f32, vector-major).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "ggml.h"
#include "ggml-cpu.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 11); }
static float unif(void) { return (next32() & 0xFFFFFF) / 16777216.0f; }

// A random F16 scale: mostly ordinary, sometimes tiny (subnormal) or large.
static uint16_t rand_half(int allow_neg) {
    uint32_t k = next32() % 10, sign = allow_neg ? (next32() & 1) << 15 : 0;
    if (k == 0) return sign | (next32() % 0x3FF + 1);             // subnormal
    if (k == 1) return sign | ((20 + next32() % 8) << 10) | (next32() & 0x3FF); // 32 .. 65504/2
    return sign | ((5 + next32() % 12) << 10) | (next32() & 0x3FF);          // ~2^-10 .. 2^1
}

struct hp { int off; int neg; };
// Offsets of each type's F16 scale fields in a block (-1 ends).
static void halves(enum ggml_type t, int *o) {
    int n = 0;
    switch (t) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: case GGML_TYPE_Q8_0: o[n++] = 0; break;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: o[n++] = 0; o[n++] = 2; break;
    case GGML_TYPE_Q2_K: o[n++] = 80; o[n++] = 82; break;
    case GGML_TYPE_Q3_K: o[n++] = 108; break;
    case GGML_TYPE_Q6_K: o[n++] = 208; break;
    default: break;
    }
    o[n] = -1;
}

static void emit(FILE *f, enum ggml_type t, int cols, int rows, int nvec, int extreme) {
    const struct ggml_type_traits *tt = ggml_get_type_traits(t);
    const struct ggml_type_traits_cpu *ct = ggml_get_type_traits_cpu(t);
    const struct ggml_type_traits_cpu *vt = ggml_get_type_traits_cpu(ct->vec_dot_type);
    size_t rs = ggml_row_size(t, cols), as = ggml_row_size(ct->vec_dot_type, cols);
    uint8_t *w = malloc(rs * rows), *aq = malloc(as);
    float *x = malloc(sizeof(float) * cols * nvec), *deq = malloc(sizeof(float) * cols * rows), *dots = malloc(sizeof(float) * rows * nvec);
    int off[4];
    halves(t, off);
    for (size_t i = 0; i < rs * rows; i++) w[i] = next32();
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < cols / tt->blck_size; b++)
            for (int k = 0; off[k] >= 0; k++) {
                uint16_t h = rand_half(off[k] != 0 || t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_1);
                if (!extreme) h = (uint16_t)((h & 0x8000) | ((10 + next32() % 6) << 10) | (next32() & 0x3FF));
                memcpy(w + r * rs + b * tt->type_size + off[k], &h, 2);
            }
    for (int i = 0; i < cols * nvec; i++) {
        float v = unif() * 2 - 1;
        if (extreme && next32() % 8 == 0) v *= powf(2, (int)(next32() % 40) - 20);
        if (i % 97 == 5) v = 0;
        x[i] = v;
    }
    if (extreme) for (int i = 0; i < 32 && i < cols; i++) x[cols - 1 - i] = 0; // an all-zero block
    for (int r = 0; r < rows; r++) tt->to_float(w + r * rs, deq + r * cols, cols);
    for (int v = 0; v < nvec; v++) {
        vt->from_float(x + v * cols, aq, cols);
        for (int r = 0; r < rows; r++) ct->vec_dot(cols, &dots[v * rows + r], 0, w + r * rs, 0, aq, 0, 1);
    }
    uint32_t hdr[4] = {t, cols, rows, nvec};
    fwrite(hdr, 4, 4, f);
    fwrite(w, 1, rs * rows, f);
    fwrite(x, 4, cols * nvec, f);
    fwrite(deq, 4, cols * rows, f);
    fwrite(dots, 4, rows * nvec, f);
    free(w); free(aq); free(x); free(deq); free(dots);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: gen OUT.bin\n"); return 2; }
    ggml_cpu_init();
    enum ggml_type legacy[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL};
    enum ggml_type kq[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS};
    FILE *f = fopen(argv[1], "wb");
    uint32_t n = 3 * (5 + 6);
    fwrite("KQG1", 1, 4, f);
    fwrite(&n, 4, 1, f);
    for (int e = 0; e < 2; e++) {
        // 17 and 3 blocks a row (odd: IQ4_NL's scalar tail), then 16 (even)
        for (int i = 0; i < 5; i++) emit(f, legacy[i], e ? 544 : 96, 4, 3, e);
        for (int i = 0; i < 6; i++) emit(f, kq[i], e ? 512 : 256, 4, 3, e);
    }
    for (int i = 0; i < 5; i++) emit(f, legacy[i], 512, 4, 3, 1);
    for (int i = 0; i < 6; i++) emit(f, kq[i], 1024, 4, 3, 1);
    fclose(f);
    return 0;
}
