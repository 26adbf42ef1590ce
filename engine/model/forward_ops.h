// The operations the GPT-2 forward pass is written in. forward.cpp's forward_batch is the one function that knows
// the layer order and calls them; the CPU runs each one with the kernels at once (CpuOps), a recording session
// writes each one down as a GpuCommand (CommandRecorder) for a host that runs them elsewhere (web/lib/gpu/ encodes
// them as WebGPU passes). So the GPU runs the same layers in the same order as the CPU, and a change of the layer
// order is a change of both.
#pragma once

#include <cstdint>

namespace gpt2 {

// The activation buffers, each (rows, width) with one row per token of a chunk (forward.h's RunState): x, xb and
// att (n_embd wide), qkv (3 * n_embd), fc (4 * n_embd), logits (n_vocab).
enum class Activation : int32_t { x, xb, qkv, att, fc, logits };
// The matrices of a layer, or the head (layer -1).
enum class Matrix : int32_t { attn_qkv, attn_proj, mlp_fc, mlp_proj, lm_head };
// The layernorms of a layer, or the final one (layer -1).
enum class Norm : int32_t { ln_1, ln_2, ln_f };
// What a linear layer does with its result y = in . weight^T + bias: store it, store gelu(y), or add it to the
// output (the residual add).
enum class Epilogue : int32_t { store, gelu, add };

class ForwardOps {
   public:
    virtual ~ForwardOps() = default;
    // x rows [0, n) = wte[tokens[t]] + wpe[pos0 + t]
    virtual void embed(const int32_t* tokens, int n, int pos0) = 0;
    // xb rows [row0, row0 + n) = norm(x rows [row0, row0 + n)); layer -1 with Norm::ln_f
    virtual void layernorm(int layer, Norm norm, int row0, int n) = 0;
    // out rows [row0, row0 + n) (epilogue) in rows [row0, row0 + n) . matrix^T + bias; layer -1 with Matrix::lm_head
    virtual void linear(int layer, Matrix matrix, Activation out, Activation in, Epilogue epilogue, int row0,
                        int n) = 0;
    // the keys and values of qkv rows [0, n) into layer's cache at positions pos0..pos0 + n - 1
    virtual void store_kv(int layer, int n, int pos0) = 0;
    // att rows [0, n) = causal self-attention of qkv rows [0, n) at positions pos0.. over layer's cache
    virtual void attention(int layer, int n, int pos0) = 0;
};

enum class GpuOp : int32_t { embed, layernorm, linear, store_kv, attention };

// One recorded operation, all fields int32 so that the host reads the list as one Int32Array (kGpuCommandInts per
// command, in this order). Fields an operation does not use are 0.
struct GpuCommand {
    GpuOp op;
    int32_t layer;         // -1: the final layernorm and the head
    int32_t which;         // layernorm: Norm; linear: Matrix
    Activation out;        // linear
    Activation in;         // linear
    Epilogue epilogue;     // linear
    int32_t row0;          // first row of a layernorm or linear
    int32_t n;             // rows (tokens)
    int32_t pos0;          // embed, store_kv, attention: position of row 0
    int32_t token_offset;  // embed: where tokens[0] is in the session's window (Session::window())
    int32_t logits_row;    // linear into logits: the row of the pass's logits that row row0 is (forward's all_logits
                           // row), or -1 when it is the session's last-token logits (Session::logits())
};
constexpr int kGpuCommandInts = int(sizeof(GpuCommand) / sizeof(int32_t));
static_assert(sizeof(GpuCommand) == 11 * sizeof(int32_t), "GpuCommand is read as int32 fields");

// The names of the enums' values, in value order: the GPU host (web/lib/gpu/) reads a command's fields by them, and
// the weights by name (weights.h) are these matrices and layernorms.
inline constexpr const char* kGpuOpNames[] = {"embed", "layernorm", "linear", "store_kv", "attention"};
inline constexpr const char* kActivationNames[] = {"x", "xb", "qkv", "att", "fc", "logits"};
inline constexpr const char* kMatrixNames[] = {"attn_qkv", "attn_proj", "mlp_fc", "mlp_proj", "lm_head"};
inline constexpr const char* kNormNames[] = {"ln_1", "ln_2", "ln_f"};
inline constexpr const char* kEpilogueNames[] = {"store", "gelu", "add"};
static_assert(sizeof(kGpuOpNames) / sizeof(char*) == int(GpuOp::attention) + 1 &&
                  sizeof(kActivationNames) / sizeof(char*) == int(Activation::logits) + 1 &&
                  sizeof(kMatrixNames) / sizeof(char*) == int(Matrix::lm_head) + 1 &&
                  sizeof(kNormNames) / sizeof(char*) == int(Norm::ln_f) + 1 &&
                  sizeof(kEpilogueNames) / sizeof(char*) == int(Epilogue::add) + 1,
              "a name for every value");

}  // namespace gpt2
