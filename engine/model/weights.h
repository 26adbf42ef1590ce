// The model parameters in the engine's layout, converted from the Hugging Face GPT-2 safetensors tensors.
// Linear weights are stored transposed to [out][in] (Conv1D stores [in][out]) so that every output is one dot
// product, then packed into panels of 4 rows (see kernels.h) so that the GEMV and the GEMM read each matrix as
// one sequential stream. The shapes below are the logical [out][in] shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpt2.h"
#include "kernels/linear.h"
#include "model/forward_ops.h"

namespace gpt2 {

struct LayerNorm {
    float* weight = nullptr;  // (n_embd)
    float* bias = nullptr;    // (n_embd)
};

// One transformer block; the shapes are (n_out, n_in) for the linear layers, whose weights are the Conv1D
// matrices transposed.
struct Layer {
    LayerNorm ln_1;
    Linear attn_qkv;   // (3 * n_embd, n_embd) attn.c_attn; rows q | k | v
    Linear attn_proj;  // (n_embd, n_embd) attn.c_proj
    LayerNorm ln_2;
    Linear mlp_fc;    // (4 * n_embd, n_embd) mlp.c_fc
    Linear mlp_proj;  // (n_embd, 4 * n_embd) mlp.c_proj
};

// Every parameter lives in one block, memory. A GGUF model's matrices keep the types of the file
// (gguf_weights.h). WeightFormat::int8 stores the five weight matrices (wte and each
// layer's four Linears) as int8 + scales; everything else (wpe, layernorms, biases) stays fp32.
struct Weights {
    Linear wte;                 // (n_vocab, n_embd) token embeddings, also the tied LM head (no bias); the
                                // embedding lookup unpacks a row (int8: dequantized)
    float* wpe = nullptr;       // (n_ctx, n_embd) position embeddings
    std::vector<Layer> layers;  // (n_layer) sized with the layout, before the block is allocated
    LayerNorm ln_f;             // the final layernorm
    Linear output;              // (n_vocab, n_embd) a head of its own (a GGUF file's output.weight, which
                                // llama.cpp's converter writes as a copy of token_embd, possibly in another
                                // type); n_out 0: the head is wte

    const Linear& lm_head() const { return output.n_out ? output : wte; }

    float* memory = nullptr;  // one block holding all of the above (the int8 values after the floats); null once
                              // released (Model::release_weights), when the pointers above point nowhere
    size_t bytes = 0;
    // The matrices went to a MatrixReceiver as they loaded (LoadOptions::matrix_receiver): memory holds the
    // vectors alone, and every Linear's weight and scale are null.
    bool matrices_received = false;

    Weights() = default;
    Weights(const Weights&) = delete;
    Weights& operator=(const Weights&) = delete;
    ~Weights();
};

// Where one parameter the engine expects goes inside Weights::memory, how the file lays it out, and which part
// of Weights it is: a weight matrix fills its Linear's weight (int8: and scale), any other tensor is a fp32
// vector (a bias, a layernorm parameter, wpe).
struct ParameterSlot {
    std::string name;            // without the optional "transformer." prefix, e.g. "h.3.mlp.c_fc.weight"
    std::vector<int64_t> shape;  // as stored in the file: (rows, row length) or (length)
    uint64_t offset;             // floats from the start of Weights::memory to this tensor (int8: to its scales)
    bool transpose;              // Conv1D [in][out] -> [out][in]
    Linear* matrix = nullptr;    // a weight matrix: the Linear it is the weight of
    float** vector = nullptr;    // a fp32 vector: the field that points at it
    bool quantized = false;      // int8 rows [out][in] with one float scale per row
    uint64_t q_offset = 0;       // int8: bytes from the start of the int8 block to this tensor
    bool stored = true;          // false: a matrix handed to a MatrixReceiver, with no room in Weights::memory
    int layer = -1;              // a matrix: its layer (-1: wte), and its name as MatrixRows gives it
    const char* matrix_name = nullptr;
};

// Every parameter of a config in one format and its place in the single allocation; depends on nothing else,
// so the size is known before any byte of the file has arrived.
struct WeightsLayout {
    std::vector<ParameterSlot> slots;  // wte first, then wpe, the layers, ln_f
    uint64_t n_floats = 0;             // float elements at the start of Weights::memory
    uint64_t n_int8 = 0;               // int8 elements after the floats
    uint64_t bytes() const { return n_floats * sizeof(float) + n_int8; }
};

// The layout of the parameters of config. Sizes w->layers and gives every Linear of *w its format and shape;
// the slots name the parts of *w they fill. with_matrices false: the matrices get no room (they go to a
// MatrixReceiver), only the vectors do.
WeightsLayout weights_layout(const Config& config, WeightFormat format, Weights* w, bool with_matrices = true);

// The largest Weights::memory: one array, so at most PTRDIFF_MAX bytes (pointer differences inside it must be
// defined); in wasm32 that is 2 GB, which is also the largest block its malloc can get from the heap.
constexpr uint64_t kMaxWeightsBytes = uint64_t(PTRDIFF_MAX);

// Allocates Weights::memory for layout (checked, non-throwing: over kMaxWeightsBytes is out of memory) and
// points the parts of w that the slots name into it. Errors start with "out of memory: ".
bool allocate_weights(const WeightsLayout& layout, Weights* w, std::string* error);

// The weights by name, as a host asks for them (MatrixRows::name, the lookups below, web/lib/gpu/'s upload through the
// binding's lists): the model's (layer -1) matrices "wte" (the embedding) and "lm_head", a layer's the other Matrix
// names of forward_ops.h; the fp32 vectors the model's "wpe" and a layernorm's name with ".weight" or ".bias".
inline constexpr const char* kEmbeddingName = "wte";
inline constexpr const char* kPositionsName = "wpe";
struct WeightNames {
    std::vector<std::string> model_matrices, layer_matrices, model_vectors, layer_vectors;
};
WeightNames weight_names();
// The matrix of layer (-1: the model's) called name, or null; *tied (if not null): it is the head, and the head is wte.
const Linear* find_matrix(const Weights& w, int layer, const std::string& name, bool* tied = nullptr);
// The fp32 vector of layer (-1: the model's) called name and its length in *n (n_embd; wpe: n_ctx x n_embd), or null.
const float* find_vector(const Weights& w, const Config& config, int layer, const std::string& name, size_t* n);

// Bytes of one row of n_in values in format as MatrixRows hands it over: fp32 floats, int8 bytes, or a block format's
// file blocks; 0 for a format with none of these.
size_t host_row_bytes(WeightFormat format, int n_in);
// Rows [row0, row0 + n_rows) of m as MatrixRows hands them over (n_rows, host_row_bytes), fp32 and int8 unpacked from
// the panels to plain row-major, a block format as the file's blocks, into *staging (*staging_bytes), which grows
// to fit and is kept for the next call. -> their bytes, or 0 for rows outside m or no memory for them.
size_t copy_host_rows(const Linear& m, int row0, int n_rows, std::unique_ptr<uint8_t[]>* staging,
                      size_t* staging_bytes);

// Conversion steps shared by the safetensors converter (engine/formats/safetensors_weights.cpp) and the loader
// (engine/formats/model_loader.cpp).

// *error = "model.safetensors: " + message (if error is not null). Returns false.
bool weights_file_error(std::string* error, const std::string& message);

// How an error names a non-finite value: "NaN", "Inf" or "-Inf".
const char* non_finite_name(float value);
// The error for value, the element'th of the tensor (in file order). Returns false.
bool non_finite_weight(const std::string& tensor, uint64_t element, float value, std::string* error);
// Symmetric per-row quantization of src (rows, cols): scale[r] = max|w| / 127, q = round(w / scale[r]).
void quantize_rows(const float* src, size_t rows, size_t cols, int8_t* q, float* scale);

// Reorders the weight matrices of w (row-major once converted) into the kernels' panel layout, in place; a
// matrix handed to a MatrixReceiver (weight null) is skipped. "out of memory: ..." on failure.
bool pack_weight_panels(const Config& config, Weights* w, std::string* error);

}  // namespace gpt2
