// gen.c writes the golden files of this folder by running llama.cpp's own CPU
// code (libggml-base + the libggml-cpu-haswell variant, one thread): the
// AVX2+FMA+F16C kernels llama.cpp picks on an x86 machine without AVX-512.
// See README.md for how to build and run it. All inputs come from a fixed
// xorshift generator, so the output is the same on every run.
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-cpu.h"

static uint64_t s = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (uint32_t)(s >> 11); }
static float unif(void) { return (rnd() & 0xffffff) / 16777216.0f; }
static float gauss(void) { float u = unif() + 1e-7f, v = unif(); return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v); }
static void wr(const char *name, const void *p, size_t n) {
    FILE *f = fopen(name, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(name); exit(1); }
    fclose(f);
}

// Internal ggml-cpu functions, not in the public headers; looked up by name.
typedef void (*quant_fn)(const float *, void *, int64_t);
typedef double (*softmax_fn)(int, float *, const float *, float);
typedef void (*silu_fn)(int, float *, const float *);

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: gen path/to/libggml-cpu-haswell.so\n"); return 2; }
    ggml_cpu_init();
    void *cpu = dlopen(argv[1], RTLD_NOW);
    quant_fn qcpu = cpu ? (quant_fn)dlsym(cpu, "quantize_row_q8_0") : NULL;
    softmax_fn smax = cpu ? (softmax_fn)dlsym(cpu, "ggml_vec_soft_max_f32") : NULL;
    silu_fn silu = cpu ? (silu_fn)dlsym(cpu, "ggml_vec_silu_f32") : NULL;
    if (!qcpu || !smax || !silu) { fprintf(stderr, "dlopen/dlsym: %s\n", dlerror()); return 1; }

    // 1. mul_mat: W (ROWS x COLS) of each type times N vectors, through
    //    ggml's graph: n = 1 takes ggml_vec_dot_*, n = N llamafile's sgemm.
    enum { ROWS = 16, COLS = 512, N = 8 };
    float *w = malloc(ROWS * COLS * 4), *x = malloc(N * COLS * 4);
    for (int i = 0; i < ROWS * COLS; i++) w[i] = gauss() * 0.05f;
    for (int i = 0; i < N * COLS; i++) x[i] = gauss() * (1 + i / COLS);
    wr("w_f32.bin", w, ROWS * COLS * 4);
    wr("x_f32.bin", x, N * COLS * 4);
    enum ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0};
    const char *names[] = {"f32", "f16", "bf16", "q8_0"};
    for (int t = 0; t < 4; t++) {
        struct ggml_init_params ip = {64 << 20, NULL, false};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *W = ggml_new_tensor_2d(ctx, types[t], COLS, ROWS);
        ggml_quantize_chunk(types[t], w, W->data, 0, ROWS, COLS, NULL);
        char fn[64];
        if (t > 0) {
            snprintf(fn, sizeof fn, "w_%s.bin", names[t]);
            wr(fn, W->data, ggml_nbytes(W));
        }
        for (int n = 1; n <= N; n += N - 1) {
            struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, COLS, n);
            memcpy(X->data, x, (size_t)n * COLS * 4);
            struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
            struct ggml_cgraph *gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, Y);
            ggml_graph_compute_with_ctx(ctx, gf, 1);
            snprintf(fn, sizeof fn, "y_%s_n%d.bin", names[t], n);
            wr(fn, Y->data, (size_t)n * ROWS * 4);
        }
        ggml_free(ctx);
    }

    // 2. Q8_0 activation quantizer (x86 path) and the reference quantizer,
    //    on blocks of varied scale, a third of them with planted halves.
    enum { NB = 256 };
    float *xa = malloc(NB * 32 * 4);
    for (int b = 0; b < NB; b++) {
        float sc = powf(10.0f, -4.0f + 8.0f * unif());
        for (int j = 0; j < 32; j++) xa[b * 32 + j] = gauss() * sc;
        if (b % 3 == 0) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xa[b * 32 + j]));
            for (int j = 1; j < 8; j++) xa[b * 32 + j] = amax * ((int)(rnd() % 120) - 60 + 0.5f) / 127.0f;
        }
    }
    uint8_t *qa = malloc(NB * 34), *qr = malloc(NB * 34);
    qcpu(xa, qa, NB * 32);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, xa, qr, 0, 1, NB * 32, NULL);
    wr("q8_in.bin", xa, NB * 32 * 4);
    wr("q8_act.bin", qa, NB * 34);
    wr("q8_ref.bin", qr, NB * 34);

    // 3. expf (through the softmax kernel with max = 0) and SiLU, on sweeps
    //    that end with special values; lengths are multiples of 8 so every
    //    value takes the vectorised path.
    enum { NE = 2048 };
    float *xe = malloc(NE * 4), *ye = malloc(NE * 4), *xs = malloc(NE * 4), *ys = malloc(NE * 4);
    for (int i = 0; i < NE; i++) {
        xe[i] = -104.0f + 194.0f * i / NE;
        xs[i] = -95.0f + 190.0f * i / NE;
    }
    float sp[8] = {-INFINITY, INFINITY, 0.0f, -0.0f, 88.7f, -103.9f, 1e-30f, -1e30f};
    memcpy(xe + NE - 8, sp, sizeof sp);
    memcpy(xs + NE - 8, sp, sizeof sp);
    smax(NE, ye, xe, 0.0f);
    silu(NE, ys, xs);
    wr("expf_in.bin", xe, NE * 4);
    wr("expf_out.bin", ye, NE * 4);
    wr("silu_in.bin", xs, NE * 4);
    wr("silu_out.bin", ys, NE * 4);

    // 4. The soft_max and rms_norm (times a weight) operators on rows of 1024,
    //    some softmax entries masked with -Inf.
    enum { NR = 1024 };
    float *xr = malloc(NR * 4), *wn = malloc(NR * 4);
    for (int i = 0; i < NR; i++) {
        xr[i] = gauss() * 3;
        wn[i] = 1 + gauss() * 0.1f;
    }
    for (int i = 5; i < NR; i += 97) xr[i] = -INFINITY;
    {
        struct ggml_init_params ip = {16 << 20, NULL, false};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *X = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, NR);
        struct ggml_tensor *Wn = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, NR);
        memcpy(X->data, xr, NR * 4);
        memcpy(Wn->data, wn, NR * 4);
        struct ggml_tensor *S = ggml_soft_max(ctx, X);
        struct ggml_tensor *R = ggml_mul(ctx, ggml_rms_norm(ctx, X, 1e-6f), Wn);
        struct ggml_cgraph *gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, S);
        ggml_graph_compute_with_ctx(ctx, gf, 1);
        wr("softmax_in.bin", xr, NR * 4);
        wr("softmax_out.bin", S->data, NR * 4);
        // rms_norm of a row without -Inf
        for (int i = 0; i < NR; i++) ((float *)X->data)[i] = gauss() * 2;
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, R);
        ggml_graph_compute_with_ctx(ctx, gf, 1);
        wr("rmsnorm_in.bin", X->data, NR * 4);
        wr("rmsnorm_w.bin", wn, NR * 4);
        wr("rmsnorm_out.bin", R->data, NR * 4);
        ggml_free(ctx);
    }

    // 5. mul_mat of an F16 matrix whose rows are not a multiple of 8 values
    //    (llama-quantize's F16 fallback for an unusual shape: stories260K's
    //    172-wide ffn_down): tinyBLAS refuses k % 8, so one vector and
    //    several alike take ggml_vec_dot_f16.
    enum { OR = 24, OC = 172, ON = 3 };
    float *wo = malloc(OR * OC * 4), *xo = malloc(ON * OC * 4);
    for (int i = 0; i < OR * OC; i++) wo[i] = gauss() * 0.05f;
    for (int i = 0; i < ON * OC; i++) xo[i] = gauss() * (1 + i / OC);
    wr("w_f32_172.bin", wo, OR * OC * 4);
    wr("x_f32_172.bin", xo, ON * OC * 4);
    for (int n = 1; n <= ON; n += ON - 1) {
        struct ggml_init_params ip = {16 << 20, NULL, false};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *W = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, OC, OR);
        ggml_quantize_chunk(GGML_TYPE_F16, wo, W->data, 0, OR, OC, NULL);
        struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, OC, n);
        memcpy(X->data, xo, (size_t)n * OC * 4);
        struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
        struct ggml_cgraph *gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, Y);
        ggml_graph_compute_with_ctx(ctx, gf, 1);
        char fn[64];
        snprintf(fn, sizeof fn, "y_f16_172_n%d.bin", n);
        wr(fn, Y->data, (size_t)n * OR * 4);
        ggml_free(ctx);
    }
    return 0;
}
