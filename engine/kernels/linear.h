// A Linear, and the one place that knows how each of its storage formats multiplies: fp32 and int8 run the kernels of
// kernels.cpp, the ggml block formats their BlockFormat (block_formats.h), so that the forward pass, its threading and
// the weights' structs (engine/model/weights.h) need not know the formats.
#pragma once

#include <cstdint>

#include "gpt2.h"

namespace gpt2 {

// One weight matrix (n_out, n_in), [out][in] in panels (kernels.h), in one storage format, and its bias: a
// linear layer out = x . weight^T + bias. The format decides how the matrix multiplies, in one place
// (engine/kernels/linear.cpp): a new storage format is a new WeightFormat and a kernel there, not new fields.
struct Linear {
    WeightFormat format = WeightFormat::fp32;
    int n_out = 0;
    int n_in = 0;
    void* weight = nullptr;   // (n_out, n_in) fp32: float; int8: int8_t q with w[o][i] ~= q[o][i] * scale[o]
    float* scale = nullptr;   // (n_out) int8: the per-row scales; fp32: null
    int32_t* sums = nullptr;  // (n_out) int8 where the kernels take them (kernels.h kInt8RowSums): int8_row_sums of q
    float* bias = nullptr;    // (n_out), or null (the LM head)
};

// The input rows of a linear layer, in every form a format multiplies.
struct LinearInput {
    const float* x;   // (n_tok, n_in)
    int16_t* xq;      // (n_tok, n_in) int8 and block formats: x quantized by prepare_linear_input
    float* xq_scale;  // int8: (n_tok) the scales of xq's rows; block formats: (n_tok, n_in / 32) per block
    int32_t* xq_sum;  // block formats: (n_tok, n_in / 32) the sum of each block's xq (block_formats.h)
};

// Brings the rows x (n_tok, linear.n_in) into the form linear's format multiplies, once for all the parts of a
// split product: int8 quantizes them per row into xq and xq_scale, the block formats per block of 32 into xq,
// xq_scale and xq_sum (quantize_activation_blocks); fp32 and F16 read x as it is.
void prepare_linear_input(const Linear& linear, const LinearInput& in, int n_tok);

// out[t][o] = row t of the input . row o of linear's weight + bias[o], for the input's token rows
// [t0, t0 + n_tok) and the outputs [o0, o0 + n_rows); out is (all tokens, linear.n_out) and only those elements
// are written. One token runs the GEMV; several run the batched GEMM, which writes whole rows (n_rows must be
// n_out). The kernels' contracts (kernels.h) make every element independent of the split.
void multiply_linear(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows);

// Row `row` of linear's weight in plain order as fp32 (n_in values; int8: dequantized): the embedding lookup of
// the tied wte. scratch holds n_in bytes.
void linear_weight_row(float* out, const Linear& linear, int row, int8_t* scratch);

}  // namespace gpt2
