// The model parameters in the engine's layout, converted from the Hugging Face GPT-2 safetensors tensors.
// Linear weights are stored transposed to [out][in] (Conv1D stores [in][out]) so that every output is one dot
// product, then packed into panels of 4 rows (see kernels.h) so that the GEMV and the GEMM read each matrix as
// one sequential stream. The shapes below are the logical [out][in] shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpt2.h"
#include "safetensors.h"

namespace gpt2 {

struct Weights {
    float* wte = nullptr;          // (n_vocab, n_embd) token embeddings; also the tied LM head [out][in]
    float* wpe = nullptr;          // (n_ctx, n_embd) position embeddings
    float* ln_1_weight = nullptr;  // (n_layer, n_embd)
    float* ln_1_bias = nullptr;    // (n_layer, n_embd)
    float* qkv_weight = nullptr;   // (n_layer, 3 * n_embd, n_embd) attn.c_attn transposed; rows q | k | v
    float* qkv_bias = nullptr;     // (n_layer, 3 * n_embd)
    float* attn_proj_weight = nullptr;  // (n_layer, n_embd, n_embd) attn.c_proj transposed
    float* attn_proj_bias = nullptr;    // (n_layer, n_embd)
    float* ln_2_weight = nullptr;  // (n_layer, n_embd)
    float* ln_2_bias = nullptr;    // (n_layer, n_embd)
    float* fc_weight = nullptr;    // (n_layer, 4 * n_embd, n_embd) mlp.c_fc transposed
    float* fc_bias = nullptr;      // (n_layer, 4 * n_embd)
    float* mlp_proj_weight = nullptr;  // (n_layer, n_embd, 4 * n_embd) mlp.c_proj transposed
    float* mlp_proj_bias = nullptr;    // (n_layer, n_embd)
    float* ln_f_weight = nullptr;  // (n_embd)
    float* ln_f_bias = nullptr;    // (n_embd)

    // WeightFormat::int8: the five matrices above (wte, qkv, attn_proj, fc, mlp_proj) are null and stored here
    // instead, same shapes and layout, each row o as int8 q[o][i] with w ~= q[o][i] * scale[o].
    WeightFormat format = WeightFormat::fp32;
    int8_t* wte_q = nullptr;        // (n_vocab, n_embd); the embedding lookup dequantizes a row
    float* wte_scale = nullptr;     // (n_vocab)
    int8_t* qkv_q = nullptr;        // (n_layer, 3 * n_embd, n_embd)
    float* qkv_scale = nullptr;     // (n_layer, 3 * n_embd)
    int8_t* attn_proj_q = nullptr;  // (n_layer, n_embd, n_embd)
    float* attn_proj_scale = nullptr;  // (n_layer, n_embd)
    int8_t* fc_q = nullptr;         // (n_layer, 4 * n_embd, n_embd)
    float* fc_scale = nullptr;      // (n_layer, 4 * n_embd)
    int8_t* mlp_proj_q = nullptr;   // (n_layer, n_embd, 4 * n_embd)
    float* mlp_proj_scale = nullptr;   // (n_layer, n_embd)

    float* memory = nullptr;  // one block holding all of the above (the int8 arrays after the floats)
    size_t bytes = 0;

    Weights() = default;
    Weights(const Weights&) = delete;
    Weights& operator=(const Weights&) = delete;
    ~Weights();
};

// Checks every tensor name and shape against config (missing, extra and mis-shaped tensors are errors that
// name the tensor), allocates, and converts; a NaN or infinite weight is an error naming the tensor and the
// element. Errors start with "model.safetensors: " or "out of memory: ". int8 quantizes as described at
// WeightFormat (gpt2.h).
bool load_weights(const Config& config, const SafetensorsFile& file, WeightFormat format, Weights* out,
                  std::string* error);

// Reorders the five weight matrices of w (row-major after load_weights) into the kernels' panel layout, in
// place. "out of memory: ..." on failure.
bool pack_weight_panels(const Config& config, Weights* w, std::string* error);

}  // namespace gpt2
