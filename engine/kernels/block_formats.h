// The ggml block formats of GGUF files as the storage of a Linear (linear.h), run in their quantized form:
// F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32 values) and Q4_K, Q5_K, Q6_K (super-blocks of 256), with the
// block layouts of ggml's ggml-common.h. A matrix (n_out, n_in) arrives as the file stores it, row-major rows of
// blocks, and each format may rearrange it into its own storage (e.g. panels of kPanelRows rows, scales
// widened to fp32) of about the file's size.
//
// Products: the input rows are quantized per block of kActivationBlock = 32 values to integers in -127..127
// (quantize_activation_blocks, as ggml's Q8_0), so every block of a row is an exact integer dot product of the
// weights' integers and the input's; each format then combines its blocks' integer sums with their scales in
// one fixed order per output. So a gemm row equals the gemv of the same token, any split of the outputs or
// tokens between threads gives the same bits, and native equals wasm, bit for bit. F16 multiplies the fp32
// input by the widened fp16 weights, summed in the order of kernels.h's fp32 contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpt2.h"
#include "kernels/linear.h"

namespace gpt2 {

constexpr int kActivationBlock = 32;

// What one block format provides; block_format(format) finds it. Shapes are (n_out, n_in) with n_in a
// multiple of values_per_block.
struct BlockFormat {
    const char* name;           // ggml's name, e.g. "Q4_K"
    uint32_t values_per_block;  // 1 (F16), 32, or 256
    uint32_t bytes_per_block;   // as the file stores a block
    // Bytes of the engine's storage of a (n_out, n_in) matrix (about the file's n_out * n_in / values_per_block
    // * bytes_per_block).
    uint64_t (*storage_bytes)(int n_out, int n_in);
    // Writes rows [row0, row0 + n_rows) of the matrix, given as the file stores them (n_rows rows of
    // n_in / values_per_block blocks, back to back), into its storage (storage_bytes). Called with consecutive
    // row ranges from row 0 on; every range but the last is a multiple of kPanelRows rows.
    void (*store_rows)(void* storage, int n_out, int n_in, int row0, int n_rows, const uint8_t* file_rows);
    // store_rows's exact inverse: rows [row0, row0 + n_rows) of the storage written back into file_rows in the
    // file's own ggml block layout (n_rows rows of n_in / values_per_block blocks of bytes_per_block, back to back),
    // bit for bit the bytes store_rows took. Any row range; a GPU host uploads the blocks as the file had them.
    void (*file_rows)(uint8_t* file_rows, const void* storage, int n_out, int n_in, int row0, int n_rows);
    // Row `row` dequantized to fp32 (n_in values), bit for bit as ggml's dequantize_row_* (the embedding lookup).
    void (*dequantize_row)(float* out, const void* storage, int n_out, int n_in, int row);
    // multiply_linear (linear.h) for this format: out[t][o] for the tokens [t0, t0 + n_tok) and the outputs
    // [o0, o0 + n_rows); the input prepared by quantize_activation_blocks (F16: in.x as it is).
    void (*multiply)(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows);
};

// The block format of a WeightFormat, or nullptr for fp32 and int8.
const BlockFormat* block_format(WeightFormat format);

// Per token row t < n_tok and block b < n_in / kActivationBlock of x (n_tok, n_in): d = max|x| / 127 over the
// block, q = round(x / d) (ties away from zero, as ggml), sum = the block's sum of q. A block holding NaN or Inf
// gets d = NaN (its outputs become NaN, as in fp32); an all-zero block d = 0 and q = 0. Writes in.xq
// (n_tok, n_in), in.xq_scale and in.xq_sum (n_tok, n_in / kActivationBlock).
void quantize_activation_blocks(const LinearInput& in, int n_tok, int n_in);

// The input of a product with `format`'s weights: quantize_activation_blocks, and in the relaxed-SIMD build, for
// the formats whose kernels take bytes (Q4_0, Q4_1: in regroup_nibbles's order, block_formats_legacy.cpp; Q5_0, Q5_1,
// Q4_K, Q5_K: in order), each token row of xq rewritten in place as its n_in values' bytes; for Q8_0, whose signed
// quants need unsigned 7-bit activations, each block of xq as its values' low 7 bits and then their signs; for Q6_K,
// when n_tok > 1 (its batched kernel's form; one token keeps int16), each row as its bytes in order followed by,
// per block, the int32 sum of its first 16 values. So a product split over threads must give every part more than
// one token when it has more than one in all (forward.cpp's split does). In the other builds (SIMD128, native), for
// Q4_0 and Q4_1, each block of xq scaled in place for nibbles taken out by masks (values 0..7 and 24..31 times 256,
// 8..15 times 16: block_formats_legacy.cpp's dot_nibbles); xq_scale and xq_sum stay those of the unscaled values.
void prepare_block_activations(WeightFormat format, const LinearInput& in, int n_tok, int n_in);

}  // namespace gpt2
