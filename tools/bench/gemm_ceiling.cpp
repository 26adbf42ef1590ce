// gpt2_gemm_ceiling: how close the prefill GEMMs (kernels.h gemm, gemm_q8) run to what this CPU can do at all
// with the operations each wasm build has: the bound on how much faster prefill can get.
//
// In SIMD128 every fp32 multiply-add of a GEMM costs two vector operations, a multiply and an add, whatever the
// tiling; an int8 GEMM costs at least one i32x4.dot_i16x8_s (pmaddwd) and one add per 8 multiply-adds. The
// relaxed-SIMD build has f32x4.relaxed_madd (vfmadd where the CPU has FMA) and the 8-bit dot product
// i32x4.relaxed_dot_i8x16_i7x16_add_s, 16 multiply-adds an instruction, which V8 lowers to one vpdpbusd where the
// CPU has AVX-VNNI and else to pmaddubsw + pmaddwd + paddd. So the native peak of each of those operations (8
// independent chains on operands already in registers: no loads at all) bounds any GEMM built from it, in wasm or
// natively. This tool prints the peaks (natively only: they need an empty asm statement to keep the compiler from
// hoisting the products out of the loop; the FMA and VNNI ones where the CPU has them), then the engine's gemm and
// gemm_q8 on GPT-2 124M's four prefill shapes (a 64-token block, kMaxBatch in forward.cpp) in GMAC/s, natively or
// in wasm. Each figure is the least time over many runs taken in turns (the machine is shared: the least is the
// least disturbed).
//
//   native: cmake --build build/native --target gpt2_gemm_ceiling && build/native/gpt2_gemm_ceiling
//   wasm:   NODE_PATH=/usr/share/nodejs em++ -O3 -msimd128 -ffp-contract=off -std=c++17 -Iengine
//             tools/bench/gemm_ceiling.cpp engine/kernels/kernels.cpp -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node
//             -sWASM_ASYNC_COMPILATION=0 -o build/gemm_ceiling.cjs
//           && node build/gemm_ceiling.cjs
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/kernels.h"

namespace {

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The least seconds of `runs` calls of f.
template <typename F>
double least_seconds(int runs, F f) {
    double least = 1e30;
    for (int r = 0; r < runs; r++) {
        const double start = seconds_now();
        f();
        least = std::min(least, seconds_now() - start);
    }
    return least;
}

#if defined(__x86_64__)
typedef float f32x4 __attribute__((vector_size(16)));
typedef int16_t i16x8 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));

// Hides a register's value from the optimizer at no cost, so that products of loop-invariant operands stay in the
// loop.
#define OPAQUE(v) asm volatile("" : "+x"(v))

constexpr long kPeakIterations = 50'000'000;

typedef char i8x16 __attribute__((vector_size(16)));

// The body of a peak function: a loop whose iterations advance 8 independent accumulator chains by STEP(acc, p, q),
// one instruction (or pair) each, on operands in registers; sets `iterations_per_second`. A macro, not a function
// taking a lambda: the FMA and VNNI peaks need their function's target attribute, which a lambda would not inherit.
#define PEAK_LOOP(Accumulator, Operand, x, y, STEP)                                                     \
    Accumulator a0 = {}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;                 \
    double least = 1e30;                                                                                \
    for (int run = 0; run < 5; run++) {                                                                 \
        const double start = seconds_now();                                                             \
        for (long i = 0; i < kPeakIterations; i++) {                                                    \
            Operand x0 = x, x1 = x, x2 = x, x3 = x, y0 = y;                                             \
            OPAQUE(x0);                                                                                 \
            OPAQUE(x1);                                                                                 \
            OPAQUE(x2);                                                                                 \
            OPAQUE(x3);                                                                                 \
            OPAQUE(y0);                                                                                 \
            a0 = STEP(a0, x0, y0), a1 = STEP(a1, x1, y0), a2 = STEP(a2, x2, y0), a3 = STEP(a3, x3, y0); \
            a4 = STEP(a4, x0, x1), a5 = STEP(a5, x1, x2), a6 = STEP(a6, x2, x3), a7 = STEP(a7, x3, x0); \
        }                                                                                               \
        least = std::min(least, seconds_now() - start);                                                 \
    }                                                                                                   \
    volatile auto sink = (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7)[0];                                    \
    (void)sink;                                                                                         \
    const double iterations_per_second = kPeakIterations / least;

// fp32 multiply + add: 8 x 4 multiply-adds per iteration.
double peak_fp32_mul_add() {
    const f32x4 x = {1, 2, 3, 4}, y = {1e-9f, 1e-9f, 1e-9f, 1e-9f};
#define MUL_ADD_STEP(acc, p, q) (acc + p * q)
    PEAK_LOOP(f32x4, f32x4, x, y, MUL_ADD_STEP)
    return 32 * iterations_per_second;
}

// pmaddwd + paddd (i32x4.dot_i16x8_s + i32x4.add in wasm): 8 x 8 int16 multiply-adds per iteration.
double peak_int16_madd_add() {
    const i16x8 x = {1, 2, 3, 4, 5, 6, 7, 8};
#define MADD_STEP(acc, p, q) (acc + (i32x4)__builtin_ia32_pmaddwd128(p, q))
    PEAK_LOOP(i32x4, i16x8, x, x, MADD_STEP)
    return 64 * iterations_per_second;
}

// The relaxed-SIMD build's 8-bit dot product as V8 lowers it without AVX-VNNI: pmaddubsw, pmaddwd by ones, paddd
// (16 multiply-adds): 8 x 16 per iteration.
__attribute__((target("ssse3"))) double peak_int8_maddubs() {
    const i16x8 ones = {1, 1, 1, 1, 1, 1, 1, 1};
    const i8x16 x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
#define MADDUBS_STEP(acc, p, q) (acc + (i32x4)__builtin_ia32_pmaddwd128(__builtin_ia32_pmaddubsw128(p, q), ones))
    PEAK_LOOP(i32x4, i8x16, x, x, MADDUBS_STEP)
    return 128 * iterations_per_second;
}

// vfmadd (f32x4.relaxed_madd where the CPU has FMA): 8 x 4 multiply-adds per iteration.
__attribute__((target("fma"))) double peak_fp32_fma() {
    const f32x4 x = {1, 2, 3, 4}, y = {1e-9f, 1e-9f, 1e-9f, 1e-9f};
#define FMA_STEP(acc, p, q) __builtin_ia32_vfmaddps(p, q, acc)
    PEAK_LOOP(f32x4, f32x4, x, y, FMA_STEP)
    return 32 * iterations_per_second;
}

// vpdpbusd on xmm registers (the 8-bit dot product where the CPU has AVX-VNNI): 8 x 16 multiply-adds per iteration.
__attribute__((target("avxvnni"))) double peak_int8_vnni() {
    const i32x4 x = {1, 2, 3, 4}, y = {5, 6, 7, 8};
#define VNNI_STEP(acc, p, q) (i32x4) __builtin_ia32_vpdpbusd_v4si(acc, p, q)
    PEAK_LOOP(i32x4, i32x4, x, y, VNNI_STEP)
    return 128 * iterations_per_second;
}
#endif

struct Shape {
    const char* name;
    int n_in, n_out;
};
// GPT-2 124M's matmuls of one layer: c_attn, attn c_proj, c_fc, mlp c_proj.
constexpr Shape kShapes[] = {
    {"c_attn", 768, 2304}, {"attn.c_proj", 768, 768}, {"c_fc", 768, 3072}, {"mlp.c_proj", 3072, 768}};
constexpr int kTokens = 64;
constexpr int kRuns = 30;
// wasm engines compile a function with a baseline compiler first and optimize it only after it has run a while,
// and a running call keeps its code: each kernel runs this many times on every shape before it is timed.
constexpr int kWarmUpRuns = 10;

}  // namespace

int main() {
#if defined(__x86_64__)
    const double fp32_peak = peak_fp32_mul_add(), int16_peak = peak_int16_madd_add();
    std::printf("peak fp32 multiply + add (SIMD128), registers only:     %.1f GMAC/s\n", fp32_peak / 1e9);
    std::printf("peak int16 pmaddwd + add (SIMD128), registers only:     %.1f GMAC/s\n", int16_peak / 1e9);
    if (__builtin_cpu_supports("fma"))
        std::printf("peak fp32 vfmadd (relaxed madd), registers only:        %.1f GMAC/s\n", peak_fp32_fma() / 1e9);
    std::printf("peak int8 pmaddubsw + pmaddwd + add (relaxed dot, no VNNI): %.1f GMAC/s\n", peak_int8_maddubs() / 1e9);
    if (__builtin_cpu_supports("avxvnni"))
        std::printf("peak int8 vpdpbusd (relaxed dot, AVX-VNNI), registers only: %.1f GMAC/s\n",
                    peak_int8_vnni() / 1e9);
#else
    std::printf("peaks: measured natively only (build natively for them)\n");
#endif
    double fp32_seconds = 0, q8_seconds = 0, macs = 0;
    for (const Shape& shape : kShapes) {
        const size_t n_in = size_t(shape.n_in), n_out = size_t(shape.n_out);
        std::vector<float> x(kTokens * n_in), w(n_out * n_in), out(kTokens * n_out), scratch(4 * n_in);
        std::vector<int16_t> xq(kTokens * n_in);
        std::vector<float> x_scale(kTokens, 1e-4f), w_scale(n_out, 1e-2f);
        std::vector<int8_t> wq(n_out * n_in), scratch_q(4 * n_in);
        std::vector<int32_t> w_sums(n_out);
        for (size_t i = 0; i < x.size(); i++) x[i] = float(int(i % 17) - 8) * 0.01f;
        for (size_t i = 0; i < w.size(); i++) w[i] = float(int(i % 13) - 6) * 0.01f, wq[i] = int8_t(i % 251 - 125);
        gpt2::quantize_linear_activations(xq.data(), x_scale.data(), x.data(), kTokens, shape.n_in);
        gpt2::int8_row_sums(w_sums.data(), wq.data(), shape.n_out, shape.n_in);
        gpt2::pack_panels(w.data(), shape.n_out, shape.n_in, scratch.data());
        gpt2::pack_panels(wq.data(), shape.n_out, shape.n_in, scratch_q.data());
        for (int r = 0; r < kWarmUpRuns; r++) {
            gpt2::gemm(out.data(), x.data(), w.data(), nullptr, kTokens, shape.n_in, shape.n_out);
            gpt2::gemm_q8(out.data(), xq.data(), x_scale.data(), wq.data(), w_scale.data(), w_sums.data(), nullptr,
                          kTokens, shape.n_in, shape.n_out);
        }
        double fp32_least = 1e30, q8_least = 1e30;
        for (int r = 0; r < kRuns; r++) {  // in turns, so a disturbance hits both alike
            fp32_least =
                std::min(fp32_least, least_seconds(1, [&] {
                             gpt2::gemm(out.data(), x.data(), w.data(), nullptr, kTokens, shape.n_in, shape.n_out);
                         }));
            q8_least = std::min(q8_least, least_seconds(1, [&] {
                                    gpt2::gemm_q8(out.data(), xq.data(), x_scale.data(), wq.data(), w_scale.data(),
                                                  w_sums.data(), nullptr, kTokens, shape.n_in, shape.n_out);
                                }));
        }
        const double shape_macs = double(kTokens) * n_in * n_out;
        std::printf("%-12s %4zu -> %4zu: gemm %5.1f GMAC/s, gemm_q8 %5.1f GMAC/s\n", shape.name, n_in, n_out,
                    shape_macs / fp32_least / 1e9, shape_macs / q8_least / 1e9);
        fp32_seconds += fp32_least, q8_seconds += q8_least, macs += shape_macs;
    }
    std::printf("one layer's prefill matmuls: gemm %.1f GMAC/s, gemm_q8 %.1f GMAC/s (%.2fx)\n",
                macs / fp32_seconds / 1e9, macs / q8_seconds / 1e9, fp32_seconds / q8_seconds);
#if defined(__x86_64__)
    std::printf("share of the peak: gemm %.0f %%, gemm_q8 %.0f %%\n", 100 * macs / fp32_seconds / fp32_peak,
                100 * macs / q8_seconds / int16_peak);
#endif
    return 0;
}
