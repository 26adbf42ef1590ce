// Hand-written SIMD hot loops, written with GCC/clang vector extensions (plus the one integer multiply-add that
// has no portable spelling) so the same source compiles to SSE2 natively and to wasm simd128 (-msimd128).
//
// Weight layout ("panels"): a matrix [n_out][n_in] is first row-major, then pack_panels() interleaves each
// group of kPanelRows = 4 consecutive rows in place: for each chunk of K columns (K = 8 for fp32, 16 for int8)
// the 4 rows' K values follow each other, then each row's n_in % K tail values. Rows past the last full panel
// (n_out % 4) stay row-major. A GEMV then reads one sequential stream per matrix instead of 4 short row
// streams, which the hardware prefetcher follows much better (measured: 1.4x in wasm, 1.5x natively).
//
// fp32 bit-exactness contract: every output element of gemv() and gemm() (and every dot()) is reduced in
// exactly the same order: two f32x4 accumulators over chunks of 8 (acc0 takes elements 8k..8k+3, acc1 takes
// 8k+4..8k+7), then acc0 + acc1, then ((l0 + l1) + (l2 + l3)), then the scalar tail n8..n-1 in order, then
// + bias. So one token through gemv() equals the same token's row of a batched gemm(), bit for bit, which
// makes cached decoding identical to uncached recomputation. (Build with -ffp-contract=off so the compiler
// cannot fuse some of the multiply-adds and not others.) The relaxed-SIMD wasm build accumulates the chunks with
// f32x4.relaxed_madd (simd::mul_add), fused where the CPU has FMA: the same order, and the same instruction in
// gemv(), gemm() and dot(), so the identity holds within that build; its results differ from the others' by
// rounding.
//
// int8: weights are int8 with a per-row scale; the activations are quantized per token row to int16
// (quantize_activations) and the dot products are summed exactly in int32, so any summation order gives the
// same result: gemm_q8 rows equal gemv_q8, and native equals wasm, bit for bit.
#pragma once

#include <cstdint>

namespace gpt2 {

constexpr int kPanelRows = 4;

// The panel a product visits i-th of n_panels when it reads them alternately from the first and the second half
// of its rows: two sequential streams keep more reads from memory in flight than one while the kernel works
// (measured in wasm, a GPT-2 124M decode step's matmuls: Q4_0 0.8x the time of one stream, Q8_0 0.9x). The order
// of the panels changes no output.
inline int two_stream_panel(int i, int n_panels) { return i % 2 == 0 ? i / 2 : (n_panels + 1) / 2 + i / 2; }

// Reorders the row-major matrix w (n_out, n_in) into the panel layout in place; scratch holds kPanelRows * n_in
// elements.
void pack_panels(float* w, int n_out, int n_in, float* scratch);
void pack_panels(int8_t* w, int n_out, int n_in, int8_t* scratch);

// Copies row `row` of a packed matrix out in plain order (n_in values): the embedding lookup of the tied wte.
void unpack_row(float* out, const float* w, int n_out, int n_in, int row);
void unpack_row(int8_t* out, const int8_t* w, int n_out, int n_in, int row);

// sum_i x[i] * w[i]
float dot(const float* x, const float* w, int n);

// out[o] = dot(x, row o of w) + bias[o] for o < n_out; w is packed (n_out, n_in); bias may be null.
void gemv(float* out, const float* x, const float* w, const float* bias, int n_in, int n_out);

// Batched gemv: out[t][o] for t < n_tok, x is (n_tok, n_in), out is (n_tok, n_out). Cache-blocked over tokens
// (a panel is reused from L1 for every token of a block); each element bit-identical to gemv().
void gemm(float* out, const float* x, const float* w, const float* bias, int n_tok, int n_in, int n_out);

// The int16 range used for activations of a matmul with n_in inputs: the largest q with n_in * 127 * q below
// 2^31, so an int32 dot product of int8 weights and these activations cannot overflow (at most 32767).
int activation_range(int n_in);

// Per token row t < n_tok: scale[t] = max|x[t]| / activation_range(n_in), q[t][i] = round(x[t][i] / scale[t]).
// A row holding NaN or Inf gets scale NaN (its outputs become NaN, as in fp32); an all-zero row scale 0.
void quantize_activations(int16_t* q, float* scale, const float* x, int n_tok, int n_in);

// The activations of an int8 matrix product (gemv_q8, gemm_q8): quantize_activations with the range
// linear_activation_range(n_in). That is activation_range natively and in SIMD128. The relaxed-SIMD build's
// gemv_q8 and gemm_q8 feed the 8-bit dot product, whose second operand is 7-bit: the range is at most
// kSplitActivationRange (so u = q + 8192 is 1..16383), and each whole chunk of 16 values is stored, in the 32 bytes
// of its 16 int16, as the 16 bytes u % 128, then the 16 bytes u / 128 (the n_in % 16 values of the tail stay int16
// q); both then sum 128 * sum(w * hi) + sum(w * lo) - 8192 * sum(w), exact in wrapping int32 arithmetic, so they
// sum the same integers and gemm_q8 rows equal gemv_q8 in every build.
constexpr int kSplitActivationRange = 8191;
int linear_activation_range(int n_in);
void quantize_linear_activations(int16_t* q, float* scale, const float* x, int n_tok, int n_in);

// Whether gemv_q8 and gemm_q8 take the rows' sums of the int8 weights (w_sums; Linear::sums): in the relaxed-SIMD
// build, for the - 8192 * sum(w) above.
#if defined(__wasm_relaxed_simd__)
constexpr bool kInt8RowSums = true;
#else
constexpr bool kInt8RowSums = false;
#endif
// Those sums of the row-major int8 matrix q (n_out, n_in): each row's sum over its whole chunks of 16 values.
void int8_row_sums(int32_t* sums, const int8_t* q, int n_out, int n_in);

// int8 weights w (packed, n_out, n_in) with per-row scales w_scale, one token's activations from
// quantize_linear_activations: out[o] = float(sum_i xq[i] * w[o][i]) * (x_scale * w_scale[o]) + bias[o]; bias may
// be null; w_sums (n_out) the weights' int8_row_sums where kInt8RowSums (elsewhere it may be null).
void gemv_q8(float* out, const int16_t* xq, float x_scale, const int8_t* w, const float* w_scale, const int32_t* w_sums,
             const float* bias, int n_in, int n_out);
// Batched: xq (n_tok, n_in) from quantize_linear_activations with x_scale (n_tok); out (n_tok, n_out).
void gemm_q8(float* out, const int16_t* xq, const float* x_scale, const int8_t* w, const float* w_scale,
             const int32_t* w_sums, const float* bias, int n_tok, int n_in, int n_out);

// Attention over one head's cache, whose rows (one per position) are contiguous, n floats each:
// scores[j] = dot(q, keys + j * n, n) * scale for j < n_keys...
void attention_scores(float* scores, const float* q, const float* keys, int n_keys, int n, float scale);
// ...and out[i] = sum over j < n_keys of p[j] * values[j * n + i], added in order of j.
void attention_values(float* out, const float* p, const float* values, int n_keys, int n);

// The int8 KV cache (KvCacheFormat::int8). A cached key or value row x of n values (one head, one position) is
// stored as q[i * stride] = round(x[i] / scale) (half away from zero) with scale = max|x| / 127, so
// |x - q * scale| <= scale / 2; a row holding NaN or Inf gets scale NaN (q = 0: its scores or outputs become NaN,
// as in fp32), an all-zero row scale 0. Keys are rows (stride 1); values are stored in position pairs (stride 2,
// see attention_values_q8).
void quantize_cache_row(int8_t* q, float* scale, const float* x, int n, int stride = 1);
// scores[j] = float(sum_i qq[i] * keys[j * n + i]) * (q_scale * key_scale[j]) for j < n_keys: the query quantized
// (quantize_activations, whose range keeps the int32 sums exact, so their order does not matter).
void attention_scores_q8(float* scores, const int16_t* qq, float q_scale, const int8_t* keys, const float* key_scale,
                         int n_keys, int n);
// The values of positions 2m and 2m + 1 are interleaved value by value (values[(m * n + i) * 2 + (j % 2)] is value
// i of position j = 2m + j % 2), so that one int16 multiply-add takes a pair of positions. a[j] (the attention
// weight times the value row's scale) is quantized over the positions to aq (quantize_activations with n_keys:
// the int32 sums stay exact) with one scale A, and
//   out[i] = float(sum over j < n_keys of aq[j] * values[j][i]) * A.
// aq is scratch of n_keys + 1 (the partner of an odd last position gets 0, whatever its cache bytes hold).
void attention_values_q8(float* out, const float* a, const int8_t* values, int n_keys, int n, int16_t* aq);

}  // namespace gpt2
