#include "kernels/linear.h"

#include <cstddef>

#include "kernels/block_formats.h"
#include "kernels/kernels.h"

namespace gpt2 {

void prepare_linear_input(const Linear& linear, const LinearInput& in, int n_tok) {
    switch (linear.format) {
        case WeightFormat::fp32:
        case WeightFormat::f16: break;
        case WeightFormat::int8: quantize_linear_activations(in.xq, in.xq_scale, in.x, n_tok, linear.n_in); break;
        default: prepare_block_activations(linear.format, in, n_tok, linear.n_in); break;  // the block formats
    }
}

void multiply_linear(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows) {
    if (const BlockFormat* format = block_format(linear.format)) {
        format->multiply(out, linear, in, t0, n_tok, o0, n_rows);
        return;
    }
    const size_t n_in = size_t(linear.n_in);
    out += size_t(t0) * size_t(linear.n_out) + size_t(o0);
    const float* bias = linear.bias ? linear.bias + o0 : nullptr;
    // o0 is a multiple of kPanelRows (or 0), so the rows from o0 on are whole panels starting at row o0 * n_in
    switch (linear.format) {
        case WeightFormat::fp32: {
            const float* w = static_cast<const float*>(linear.weight) + size_t(o0) * n_in;
            const float* x = in.x + size_t(t0) * n_in;
            if (n_tok == 1) gemv(out, x, w, bias, linear.n_in, n_rows);
            else gemm(out, x, w, bias, n_tok, linear.n_in, n_rows);
            break;
        }
        case WeightFormat::int8: {
            const int8_t* w = static_cast<const int8_t*>(linear.weight) + size_t(o0) * n_in;
            const float* w_scale = linear.scale + o0;
            const int16_t* xq = in.xq + size_t(t0) * n_in;
            const int32_t* w_sums = linear.sums ? linear.sums + o0 : nullptr;
            if (n_tok == 1) gemv_q8(out, xq, in.xq_scale[t0], w, w_scale, w_sums, bias, linear.n_in, n_rows);
            else gemm_q8(out, xq, in.xq_scale + t0, w, w_scale, w_sums, bias, n_tok, linear.n_in, n_rows);
            break;
        }
        default: break;  // the block formats, above
    }
}

void linear_weight_row(float* out, const Linear& linear, int row, int8_t* scratch) {
    if (const BlockFormat* format = block_format(linear.format)) {
        format->dequantize_row(out, linear.weight, linear.n_out, linear.n_in, row);
        return;
    }
    switch (linear.format) {
        case WeightFormat::fp32:
            unpack_row(out, static_cast<const float*>(linear.weight), linear.n_out, linear.n_in, row);
            break;
        case WeightFormat::int8: {
            unpack_row(scratch, static_cast<const int8_t*>(linear.weight), linear.n_out, linear.n_in, row);
            const float scale = linear.scale[row];
            for (int i = 0; i < linear.n_in; i++) out[i] = float(scratch[i]) * scale;
            break;
        }
        default: break;  // the block formats, above
    }
}

}  // namespace gpt2
