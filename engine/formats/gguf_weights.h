// A GGUF file's tensors -> Weights, as GgufReader delivers them: once the front is read, the hyper-parameters
// become a Config, every tensor is matched by llama.cpp's gpt2 names (token_embd, position_embd,
// blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down}.{weight, bias}, output_norm, optional
// output) and shape, and the weights are allocated once; then each tensor is stored as its bytes arrive. The
// matrices keep the file's type (block_formats.h; F32 ones become the fp32 panels of kernels.h), so the
// resident weights are about the file's size; the vectors (biases, layernorms, position_embd) become fp32.
// GGUF stores a matrix as ne = [n_in, n_out], rows of n_in values: already the engine's [out][in]. With a
// MatrixReceiver, the matrices' rows go to it as they arrive, as the file stores them, and only the vectors are
// kept.
//
// Errors are one line starting with "model.gguf: " ("out of memory: ..." when an allocation fails).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"
#include "gpt2.h"
#include "model/weights.h"

namespace gpt2 {

class GgufWeightsSink : public GgufSink {
   public:
    // w must outlive the sink; it is sized and allocated by on_header. receiver: where the matrices go, or null
    // (they are stored in w).
    GgufWeightsSink(Weights* w, MatrixReceiver* receiver) : weights_(w), receiver_(receiver) {}

    bool on_header(const GgufModelInfo& info, std::string* error) override;
    bool on_tensor_bytes(size_t tensor, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                         std::string* error) override;
    ErrorKind error_kind() const override { return error_kind_; }

    // After the reader's finish(): packs the fp32 matrices into panels. "out of memory: ..." on failure.
    bool finish(std::string* error);

    // The model's hyper-parameters (valid after on_header).
    const Config& config() const { return config_; }

   private:
    // Where one tensor of the file goes.
    struct Destination {
        Linear* matrix = nullptr;  // a weight matrix: the Linear it fills (format set from the file's type)
        float** vector = nullptr;  // otherwise the fp32 vector field it fills (n_values floats)
        uint64_t n_values = 0;     // elements
        uint64_t offset = 0;       // bytes from the start of Weights::memory
        GgmlType type = GgmlType::F32;
        uint64_t row_bytes = 0;  // a matrix's row as the file stores it
        int layer = -1;          // a matrix: its layer (-1: wte, lm_head) and its name as MatrixRows gives it
        const char* matrix_name = nullptr;
    };

    bool match_tensors(const GgufModelInfo& info, std::string* error);
    bool place(const GgufModelInfo& info, size_t tensor, Destination* d, std::string* error);
    bool allocate(std::string* error);
    bool no_memory(uint64_t bytes, const char* what, std::string* error);  // out_of_memory, kind memory; false
    // The current tensor's bytes (destinations_[tensor]), in order.
    bool vector_bytes(const Destination& d, std::string_view name, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                      uint64_t tensor_bytes, std::string* error);
    bool matrix_bytes(const Destination& d, std::string_view name, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                      uint64_t tensor_bytes, std::string* error);
    // Rows [row0, row0 + n_rows) of a matrix, as the file stores them: stored in its Linear, or (F32 checked for
    // NaN and Inf) handed to receiver_.
    bool take_rows(const Destination& d, std::string_view name, int row0, int n_rows, const uint8_t* rows,
                   std::string* error);

    Weights* weights_;
    MatrixReceiver* receiver_;
    ErrorKind error_kind_ = ErrorKind::file;  // of the last refusal
    Config config_{};
    const GgufModelInfo* info_ = nullptr;    // the reader's, valid while the reader lives
    std::vector<Destination> destinations_;  // (info.tensors) in file order

    // A block-format matrix (with a receiver: any matrix) is taken kPanelRows rows at a time: its rows are
    // gathered here first.
    std::unique_ptr<uint8_t, decltype(&std::free)> rows_{nullptr, &std::free};  // (kPanelRows, widest file row)
    uint64_t rows_capacity_ = 0;
    uint64_t rows_fill_ = 0;  // bytes gathered of the current group of rows
    int next_row_ = 0;        // first row of that group
};

}  // namespace gpt2
