// gen_repack.c: goldens of llama.cpp's repacked matrix products for
// edgellmd's engine/tensor tests (kquant_golden_test.go,
// TestKQuantRepackedGolden).
//
// On an x86 CPU with AVX2, llama.cpp's CPU backend keeps Q4_0, IQ4_NL and
// Q4_K matrices whose row count is a multiple of 8 in its repack buffer
// (ggml-cpu/repack.cpp: eight rows interleaved) and multiplies them with
// its gemv (fewer than 4 vectors, and the n % 4 left over) and gemm (the
// vectors by fours) kernels, the activations quantized by
// ggml_quantize_mat_q8_*_4x8 (by fours) or the type's from_float. This
// program puts random weights in that buffer (ggml_backend_cpu_repack_buffer_type,
// looked up by its C++ name in the library given on the command line: the
// AVX2 "haswell" variant) and computes ggml_mul_mat with 1 to 5 vectors
// through the CPU backend, one thread.
//
// Output, little endian: "KQR1", u32 count, then per case:
// u32 type, u32 cols, u32 rows, u32 nvec, weights (rows*row_size bytes, the
// file layout, before repacking), activations (nvec*cols f32), products
// (nvec*rows f32, vector-major). See README.md for the command.
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t next32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 11); }
static float unif(void) { return (next32() & 0xFFFFFF) / 16777216.0f; }
static float gauss(void) { float u = unif() + 1e-7f, v = unif(); return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v); }
// An ordinary positive F16 scale, about 2^-10 .. 2^1.
static uint16_t half(void) { return (uint16_t)(((5 + next32() % 12) << 10) | (next32() & 0x3FF)); }

typedef ggml_backend_buffer_type_t (*buft_fn)(void);

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: gen_repack path/to/libggml-cpu-haswell.so out.bin\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    buft_fn repack = lib ? (buft_fn)dlsym(lib, "_Z35ggml_backend_cpu_repack_buffer_typev") : NULL;
    if (!repack) { fprintf(stderr, "dlopen/dlsym: %s\n", dlerror()); return 1; }
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 1);
    FILE *out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 1; }

    struct { enum ggml_type t; int cols, rows, maxn; } cases[] = {
        // Q4_K's gemm sums otherwise than its gemv: only 1 to 3 vectors
        // (gemv alone) are the engine's arithmetic.
        {GGML_TYPE_Q4_K, 512, 16, 3}, {GGML_TYPE_Q4_K, 768, 24, 3},
        {GGML_TYPE_Q4_0, 160, 16, 5}, {GGML_TYPE_Q4_0, 96, 40, 5},
        {GGML_TYPE_IQ4_NL, 160, 16, 5}, {GGML_TYPE_IQ4_NL, 96, 40, 5},
    };
    int ncase = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) ncase += cases[c].maxn;
    fwrite("KQR1", 1, 4, out);
    uint32_t u = ncase;
    fwrite(&u, 4, 1, out);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        enum ggml_type t = cases[c].t;
        int cols = cases[c].cols, rows = cases[c].rows;
        size_t bb = ggml_type_size(t), nblk = (size_t)rows * cols / ggml_blck_size(t);
        uint8_t *w = malloc(bb * nblk);
        for (size_t i = 0; i < bb * nblk; i++) w[i] = (uint8_t)next32();
        for (size_t b = 0; b < nblk; b++) {
            uint16_t d = half();
            memcpy(w + b * bb, &d, 2);
            if (t == GGML_TYPE_Q4_K) { uint16_t m = half(); memcpy(w + b * bb + 2, &m, 2); }
        }
        for (int n = 1; n <= cases[c].maxn; n++) {
            float *x = malloc(sizeof(float) * n * cols);
            for (int v = 0; v < n; v++) {
                float sc = powf(2.0f, -4.0f + 8.0f * unif());
                for (int i = 0; i < cols; i++) x[v * cols + i] = gauss() * sc;
            }
            struct ggml_init_params wp = {ggml_tensor_overhead() * 2, NULL, true};
            struct ggml_context *wctx = ggml_init(wp);
            struct ggml_tensor *W = ggml_new_tensor_2d(wctx, t, cols, rows);
            ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, repack());
            if (!buf || !W->extra) { fprintf(stderr, "%s %dx%d: not repacked\n", ggml_type_name(t), rows, cols); return 1; }
            ggml_backend_tensor_set(W, w, 0, bb * nblk);
            struct ggml_init_params cp = {16 << 20, NULL, false};
            struct ggml_context *ctx = ggml_init(cp);
            struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, n);
            memcpy(X->data, x, sizeof(float) * n * cols);
            struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
            struct ggml_cgraph *gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, Y);
            if (ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) { fprintf(stderr, "compute failed\n"); return 1; }
            uint32_t hdr[4] = {(uint32_t)t, (uint32_t)cols, (uint32_t)rows, (uint32_t)n};
            fwrite(hdr, 4, 4, out);
            fwrite(w, 1, bb * nblk, out);
            fwrite(x, sizeof(float), (size_t)n * cols, out);
            fwrite(Y->data, sizeof(float), (size_t)n * rows, out);
            ggml_free(ctx);
            ggml_backend_buffer_free(buf);
            ggml_free(wctx);
            free(x);
        }
        free(w);
    }
    fclose(out);
    ggml_backend_free(be);
    return 0;
}
