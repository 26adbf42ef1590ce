#include "formats/safetensors_weights.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/ops.h"
#include "model/allocation.h"

namespace gpt2 {

namespace {

const size_t kBlockRows = 16;

// malloc that cannot wrap a 64-bit size into a small 32-bit one (wasm).
void* allocate(uint64_t bytes) { return bytes > uint64_t(SIZE_MAX) ? nullptr : std::malloc(size_t(bytes)); }

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

// "h.{i}.attn.bias" / "h.{i}.attn.masked_bias" with i < n_layer: the causal-mask buffers some exports
// include; the engine builds its own mask, so they are ignored.
bool is_mask_buffer(const std::string& name, int n_layer) {
    if (name.compare(0, 2, "h.") != 0) return false;
    size_t pos = 2;
    int64_t layer = 0;
    size_t digits = 0;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && digits < 9) {
        layer = layer * 10 + (name[pos] - '0');
        pos++;
        digits++;
    }
    if (digits == 0 || layer >= n_layer) return false;
    std::string rest = name.substr(pos);
    return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

// Optional prefix of every tensor name (checkpoints saved from GPT2LMHeadModel). A char array, not a static
// std::string: that would allocate on first use, which heap-leak checks would count against a failed load.
constexpr char kTransformerPrefix[] = "transformer.";

}  // namespace

bool match_tensors(const Config& config, const std::vector<TensorInfo>& tensors, const WeightsLayout& layout,
                   std::vector<TensorRole>* roles, std::string* error) {
    const int64_t C = config.n_embd, V = config.n_vocab;
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < layout.slots.size(); i++) index[layout.slots[i].name] = i;
    std::vector<const TensorInfo*> found(layout.slots.size(), nullptr);
    roles->assign(tensors.size(), TensorRole());

    for (size_t t = 0; t < tensors.size(); t++) {
        const TensorInfo& tensor = tensors[t];
        const size_t prefix_len = sizeof kTransformerPrefix - 1;
        std::string name = tensor.name.compare(0, prefix_len, kTransformerPrefix) == 0 ? tensor.name.substr(prefix_len)
                                                                                       : tensor.name;
        auto it = index.find(name);
        if (it != index.end()) {
            const ParameterSlot& slot = layout.slots[it->second];
            if (found[it->second])
                return weights_file_error(error, "tensors '" + found[it->second]->name + "' and '" + tensor.name +
                                                     "' are the same parameter");
            if (tensor.shape != slot.shape)
                return weights_file_error(error, "tensor '" + tensor.name + "' has shape " +
                                                     shape_string(tensor.shape) + ", expected " +
                                                     shape_string(slot.shape));
            found[it->second] = &tensor;
            (*roles)[t] = {TensorRole::Kind::parameter, it->second};
        } else if (is_mask_buffer(name, config.n_layer)) {
            continue;
        } else if (name == "lm_head.weight") {
            if (tensor.shape != std::vector<int64_t>{V, C})
                return weights_file_error(error, "tensor '" + tensor.name + "' has shape " +
                                                     shape_string(tensor.shape) + ", expected " + shape_string({V, C}));
            (*roles)[t].kind = TensorRole::Kind::lm_head;
        } else {
            return weights_file_error(error, "unexpected tensor '" + tensor.name + "'");
        }
    }
    for (size_t i = 0; i < layout.slots.size(); i++)
        if (!found[i]) return weights_file_error(error, "missing tensor '" + layout.slots[i].name + "'");
    return true;
}

bool SafetensorsWeightsSink::init(const Config& config, WeightFormat format, const SafetensorsHeader& header,
                                  const std::vector<TensorRole>& roles, const WeightsLayout& layout, Weights* w,
                                  MatrixReceiver* receiver, std::string* error) {
    header_ = &header;
    roles_ = &roles;
    layout_ = &layout;
    weights_ = w;
    receiver_ = receiver;
    for (size_t i = 0; i < header.tensors.size(); i++) {
        const TensorInfo& tensor = header.tensors[i];
        if (tensor.begin != tensor.end) order_.push_back(i);
        const bool is_wte = roles[i].kind == TensorRole::Kind::parameter && roles[i].slot == 0;  // layout: wte first
        if (is_wte || roles[i].kind == TensorRole::Kind::lm_head) (tied_first_ ? tied_second_ : tied_first_) = &tensor;
    }
    std::sort(order_.begin(), order_.end(),
              [&](size_t a, size_t b) { return header.tensors[a].begin < header.tensors[b].begin; });
    if (!tied_second_) tied_first_ = nullptr;  // wte alone: nothing to compare
    if (tied_first_ && tied_first_->begin > tied_second_->begin) std::swap(tied_first_, tied_second_);

    const uint64_t block_elements = kBlockRows * 4 * uint64_t(config.n_embd);
    raw_block_.reset(static_cast<uint8_t*>(allocate(block_elements * 4)));
    decoded_.reset(static_cast<float*>(allocate(block_elements * sizeof(float))));
    if (!raw_block_ || !decoded_) return out_of_memory(block_elements * 8, "the weight conversion", error);
    const uint64_t conv1d_elements = 4 * uint64_t(config.n_embd) * uint64_t(config.n_embd);
    if (format == WeightFormat::int8 || receiver) {
        const uint64_t bytes = conv1d_elements * sizeof(float);
        conv1d_matrix_.reset(static_cast<float*>(allocate(bytes)));
        if (!conv1d_matrix_) return out_of_memory(bytes, "the weight conversion", error);
    }
    if (format == WeightFormat::int8 && receiver) {
        // a Conv1D matrix's 4 * n_embd rows of n_embd, or one of wte's blocks of kBlockRows rows
        const uint64_t rows = std::max<uint64_t>(4 * uint64_t(config.n_embd), kBlockRows);
        const uint64_t q_bytes = rows * uint64_t(config.n_embd);
        received_q_.reset(static_cast<uint8_t*>(allocate(q_bytes)));
        received_scale_.reset(static_cast<float*>(allocate(rows * sizeof(float))));
        if (!received_q_ || !received_scale_)
            return out_of_memory(q_bytes + rows * sizeof(float), "the quantized rows handed over", error);
    }
    if (tied_first_) {
        const uint64_t bytes = tied_first_->end - tied_first_->begin;
        tied_raw_.reset(static_cast<uint8_t*>(allocate(bytes)));
        reference_.reset(static_cast<float*>(allocate(block_elements * sizeof(float))));
        if (!tied_raw_ || !reference_)
            return out_of_memory(bytes + block_elements * sizeof(float),
                                 "comparing '" + tied_second_->name + "' with '" + tied_first_->name + "'", error);
    }
    start_tensor();
    return true;
}

void SafetensorsWeightsSink::start_tensor() {
    block_fill_ = 0;
    rows_done_ = 0;
    if (next_ == order_.size()) {
        tensor_ = nullptr;
        role_ = nullptr;
        return;
    }
    tensor_ = &header_->tensors[order_[next_]];
    role_ = &(*roles_)[order_[next_]];
    // parameters and lm_head are 1-D or 2-D (match_tensors checked their shapes); ignored tensors are skipped
    // whole, as one row
    row_length_ = role_->kind == TensorRole::Kind::ignored ? tensor_->n_elements : size_t(tensor_->shape.back());
    n_rows_ = tensor_->n_elements / row_length_;
}

bool SafetensorsWeightsSink::consume(const uint8_t* data, size_t n, std::string* error) {
    while (n > 0) {
        if (!tensor_) {
            trailing_ += n;
            received_ += n;
            return true;
        }
        size_t taken;
        if (role_->kind == TensorRole::Kind::ignored) {
            taken = size_t(std::min<uint64_t>(n, tensor_->end - received_));
        } else {
            const size_t rows = std::min(kBlockRows, n_rows_ - rows_done_);
            const size_t block_bytes = rows * row_length_ * dtype_size(tensor_->dtype);
            if (block_fill_ == 0 && n >= block_bytes) {  // a whole block in the chunk: no copy
                if (!convert_rows(data, rows, error)) return false;
                taken = block_bytes;
            } else {
                taken = std::min(n, block_bytes - block_fill_);
                std::memcpy(raw_block_.get() + block_fill_, data, taken);
                block_fill_ += taken;
                if (block_fill_ == block_bytes) {
                    if (!convert_rows(raw_block_.get(), rows, error)) return false;
                    block_fill_ = 0;
                }
            }
        }
        data += taken;
        n -= taken;
        received_ += taken;
        if (received_ == tensor_->end) {
            next_++;
            start_tensor();
        }
    }
    return true;
}

bool SafetensorsWeightsSink::convert_rows(const uint8_t* raw, size_t rows, std::string* error) {
    const size_t first = rows_done_ * row_length_, count = rows * row_length_;
    const bool parameter = role_->kind == TensorRole::Kind::parameter;
    const ParameterSlot* slot = parameter ? &layout_->slots[role_->slot] : nullptr;
    const bool handed = slot && !slot->stored;  // a matrix whose rows go to receiver_
    // A plain fp32 parameter kept here is decoded straight into its place.
    float* values = slot && !slot->quantized && !slot->transpose && !handed ? weights_->memory + slot->offset + first
                                                                            : decoded_.get();
    decode_elements(tensor_->dtype, raw, count, values);
    if (parameter) {  // lm_head is not checked: only its equality with wte matters
        const size_t bad = first_non_finite(values, count);
        if (bad != count) return non_finite_weight(tensor_->name, first + bad, values[bad], error);
    }
    if (tied_first_ && (tensor_ == tied_first_ || tensor_ == tied_second_)) check_tied_head(raw, values, first, count);
    if (slot && slot->transpose) {
        // Conv1D [in][out] -> [out][in]: these rows are inputs rows_done_.., every output gets a run of them
        const size_t n_in = n_rows_, n_out = row_length_;
        float* dst = slot->quantized || handed ? conv1d_matrix_.get() : weights_->memory + slot->offset;
        for (size_t o = 0; o < n_out; o++)
            for (size_t r = 0; r < rows; r++) dst[o * n_in + rows_done_ + r] = values[r * n_out + o];
    }
    // the transposed matrix is complete: its rows are the file's columns
    const bool transposed_whole = slot && slot->transpose && rows_done_ + rows == n_rows_;
    if (slot && slot->quantized) {
        int8_t* const q = handed ? reinterpret_cast<int8_t*>(received_q_.get())
                                 : reinterpret_cast<int8_t*>(weights_->memory + layout_->n_floats) + slot->q_offset;
        float* const scale = handed ? received_scale_.get() : weights_->memory + slot->offset;
        if (!slot->transpose) {
            const size_t at = handed ? 0 : rows_done_;  // handed rows start at the buffers' start
            quantize_rows(values, rows, row_length_, q + at * row_length_, scale + at);
            if (handed && !hand_over(*slot, rows_done_, rows, q, scale, error)) return false;
        } else if (transposed_whole) {
            quantize_rows(conv1d_matrix_.get(), row_length_, n_rows_, q, scale);
            if (handed && !hand_over(*slot, 0, row_length_, q, scale, error)) return false;
        }
    } else if (handed) {
        if (!slot->transpose && !hand_over(*slot, rows_done_, rows, values, nullptr, error)) return false;
        if (transposed_whole && !hand_over(*slot, 0, row_length_, conv1d_matrix_.get(), nullptr, error)) return false;
    }
    rows_done_ += rows;
    return true;
}

bool SafetensorsWeightsSink::hand_over(const ParameterSlot& slot, size_t row0, size_t n_rows, const void* rows,
                                       const float* scale, std::string* error) const {
    const Linear& m = *slot.matrix;
    return receiver_->receive(
        {slot.layer, slot.matrix_name, m.format, m.n_out, m.n_in, int(row0), int(n_rows), rows, scale}, error);
}

void SafetensorsWeightsSink::check_tied_head(const uint8_t* raw, const float* values, size_t first, size_t count) {
    const size_t first_size = dtype_size(tied_first_->dtype);
    if (tensor_ == tied_first_) {
        std::memcpy(tied_raw_.get() + first * first_size, raw, count * first_size);
        return;
    }
    decode_elements(tied_first_->dtype, tied_raw_.get() + first * first_size, count, reference_.get());
    if (std::memcmp(values, reference_.get(), count * sizeof(float)) != 0) tied_differs_ = true;
    if (first + count == tensor_->n_elements) tied_raw_.reset();  // compared: the copy is no longer needed
}

bool SafetensorsWeightsSink::finish(std::string* error) const {
    if (tensor_)
        return weights_file_error(error, "the file is truncated: it ends " + std::to_string(received_) +
                                             " bytes into the data section, inside tensor '" + tensor_->name +
                                             "' (bytes [" + std::to_string(tensor_->begin) + ", " +
                                             std::to_string(tensor_->end) + "))");
    if (trailing_) return safetensors_trailing_bytes(received_, trailing_, error);
    if (tied_differs_) {
        const TensorInfo* lm_head =
            (*roles_)[size_t(tied_first_ - header_->tensors.data())].kind == TensorRole::Kind::lm_head ? tied_first_
                                                                                                       : tied_second_;
        return weights_file_error(error, "tensor '" + lm_head->name +
                                             "' differs from 'wte.weight' (only a tied LM head is supported)");
    }
    return true;
}

}  // namespace gpt2
