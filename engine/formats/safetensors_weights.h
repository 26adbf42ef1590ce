// Converts the data section of model.safetensors into the engine's Weights while it arrives, in file order and
// in chunks of any size, so that the file is never held whole: each tensor is decoded, checked (NaN/Inf) and
// written to its final fp32 or int8 storage block by block. Only an int8 Conv1D matrix is gathered whole
// (decoded), because its quantization is per output row, i.e. per column of the file's [in][out] layout. With a
// MatrixReceiver, the matrices' rows go to it as they are converted (a Conv1D matrix once it is whole, transposed),
// and only the vectors are written to Weights. Before that, match_tensors gives each tensor of the header its role.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "model/weights.h"

namespace gpt2 {

// What the loader does with one tensor of the file.
struct TensorRole {
    enum class Kind {
        ignored,    // a causal-mask buffer ("h.{i}.attn.bias" / "masked_bias"): the engine builds its own mask
        parameter,  // converted into layout.slots[slot]
        lm_head,    // compared with wte: the engine's LM head is always wte, so only a tied head is accepted
    };
    Kind kind = Kind::ignored;
    size_t slot = 0;  // parameter: index into WeightsLayout::slots
};

// Matches the file's tensors to the layout by name and shape: missing, extra, duplicated and mis-shaped
// tensors are errors naming the tensor. roles: one per header tensor, same order.
bool match_tensors(const Config& config, const std::vector<TensorInfo>& tensors, const WeightsLayout& layout,
                   std::vector<TensorRole>* roles, std::string* error);

class SafetensorsWeightsSink {
   public:
    // header, roles (match_tensors), layout and w must outlive the sink, and w must be allocated
    // (allocate_weights) before the first consume(). Allocates the conversion buffers; false + "out of memory:
    // ..." if they do not fit.
    // receiver: where the matrices go when the layout has no room for them (weights_layout's with_matrices), or
    // null.
    bool init(const Config& config, WeightFormat format, const SafetensorsHeader& header,
              const std::vector<TensorRole>& roles, const WeightsLayout& layout, Weights* w, MatrixReceiver* receiver,
              std::string* error);

    // The next n bytes of the data section. Bytes after the last tensor are only counted (see finish).
    bool consume(const uint8_t* data, size_t n, std::string* error);

    // After the last byte: the file must have held every tensor's bytes and nothing more, and an lm_head
    // must equal wte.
    bool finish(std::string* error) const;

   private:
    using Buffer = std::unique_ptr<uint8_t, decltype(&std::free)>;
    using FloatBuffer = std::unique_ptr<float, decltype(&std::free)>;

    // Sets up the conversion of order_[next_].
    void start_tensor();
    // Converts the next `rows` rows of the current tensor from raw (its bytes in the file's dtype).
    bool convert_rows(const uint8_t* raw, size_t rows, std::string* error);
    // The tied-head check of the current tensor's rows [first, first + count) elements, decoded in values.
    void check_tied_head(const uint8_t* raw, const float* values, size_t first, size_t count);
    // Rows [row0, row0 + n_rows) of slot's matrix to receiver_.
    bool hand_over(const ParameterSlot& slot, size_t row0, size_t n_rows, const void* rows, const float* scale,
                   std::string* error) const;

    const SafetensorsHeader* header_ = nullptr;
    const std::vector<TensorRole>* roles_ = nullptr;
    const WeightsLayout* layout_ = nullptr;
    Weights* weights_ = nullptr;
    MatrixReceiver* receiver_ = nullptr;

    std::vector<size_t> order_;  // (non-empty tensors) indices into header_->tensors, by data offset
    size_t next_ = 0;            // position in order_ of the tensor being received
    uint64_t received_ = 0;      // bytes of the data section consumed, trailing bytes included
    uint64_t trailing_ = 0;      // bytes received after the last tensor

    // The tensor being received (order_[next_]).
    const TensorInfo* tensor_ = nullptr;
    const TensorRole* role_ = nullptr;
    size_t row_length_ = 0;  // elements per row: the last dimension (a 1-D tensor is one row)
    size_t n_rows_ = 0;      // rows of the tensor
    size_t rows_done_ = 0;   // rows converted so far
    size_t block_fill_ = 0;  // bytes of the next block gathered in raw_block_

    // Rows are converted kBlockRows at a time: a transpose then writes runs of kBlockRows floats instead of
    // single floats n_in apart. Every buffer is sized for the longest row of any tensor, 4 * n_embd.
    Buffer raw_block_{nullptr, &std::free};     // (kBlockRows, 4 * n_embd) elements in the file's dtype, 4 bytes max
    FloatBuffer decoded_{nullptr, &std::free};  // (kBlockRows, 4 * n_embd) decoded rows
    // (kBlockRows, 4 * n_embd) decoded rows of tied_first_; tied pair only
    FloatBuffer reference_{nullptr, &std::free};
    // int8 or a receiver: (4 * n_embd, n_embd) the Conv1D matrix being transposed
    FloatBuffer conv1d_matrix_{nullptr, &std::free};
    // int8 with a receiver: (max(4 * n_embd, kBlockRows), n_embd) the quantized rows handed over, and their scales
    Buffer received_q_{nullptr, &std::free};
    FloatBuffer received_scale_{nullptr, &std::free};

    // wte and lm_head, when both are in the file: the first of them (by offset) is kept raw until the second
    // has been compared with it, element by element, decoded.
    const TensorInfo* tied_first_ = nullptr;  // null when the file has no lm_head
    const TensorInfo* tied_second_ = nullptr;
    Buffer tied_raw_{nullptr, &std::free};  // (tied_first_ bytes) its raw bytes, as they arrived
    bool tied_differs_ = false;             // a compared element differed
};

}  // namespace gpt2
