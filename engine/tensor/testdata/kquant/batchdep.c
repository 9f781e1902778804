// batchdep.c: where llama.cpp's own matrix products depend on the batch.
// For a few types it multiplies one random matrix (ggml_quantize_chunk of
// Gaussian weights, in ggml's ordinary CPU buffer: nothing repacked) by n
// = 1..9 vectors with ggml_mul_mat through the CPU library given at link
// time (the AVX2 "haswell" variant, one thread), and prints, for each n,
// how many of the first vector's outputs differ in their bits from the
// n = 1 product. A tool for docs/performance/kquants.md ("Exactness"), not
// a golden: no test reads its output. See README.md for the command.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-cpu.h"
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t next32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 11); }
static float unif(void) { return (next32() & 0xFFFFFF) / 16777216.0f; }
static float gauss(void) { float u = unif() + 1e-7f, v = unif(); return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v); }
static void run(enum ggml_type t, int cols, int rows, int n, float *w, float *x, float *y) {
    struct ggml_init_params ip = {64 << 20, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t, cols, rows);
    ggml_quantize_chunk(t, w, W->data, 0, rows, cols, NULL);
    struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, n);
    memcpy(X->data, x, sizeof(float) * n * cols);
    struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, Y);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    memcpy(y, Y->data, sizeof(float) * rows);
    ggml_free(ctx);
}
int main(void) {
    struct { enum ggml_type t; int cols, rows; } cs[] = {{GGML_TYPE_IQ4_XS, 512, 64}, {GGML_TYPE_IQ4_NL, 160, 60}, {GGML_TYPE_Q6_K, 512, 64}, {GGML_TYPE_Q4_K, 512, 60}};
    for (int c = 0; c < 4; c++) {
        int cols = cs[c].cols, rows = cs[c].rows;
        float *w = malloc(4 * rows * cols), *x = malloc(4 * 16 * cols), *y1 = malloc(4 * rows), *yn = malloc(4 * rows);
        for (int i = 0; i < rows * cols; i++) w[i] = gauss() * 0.05f;
        for (int i = 0; i < 16 * cols; i++) x[i] = gauss();
        run(cs[c].t, cols, rows, 1, w, x, y1);
        printf("%s %dx%d:", ggml_type_name(cs[c].t), rows, cols);
        for (int n = 2; n <= 9; n++) {
            run(cs[c].t, cols, rows, n, w, x, yn);
            int d = 0; for (int r = 0; r < rows; r++) d += memcmp(&y1[r], &yn[r], 4) != 0;
            printf(" n=%d:%d", n, d);
        }
        printf("\n");
    }
}
