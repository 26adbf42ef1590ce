#include "formats/gguf_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "formats/json.h"
#include "formats/safetensors.h"
#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/allocation.h"

namespace gpt2 {

namespace {

// Bounds of the hyper-parameters, as for config.json (engine/formats/config.cpp).
constexpr uint64_t kMaxEmbd = 1 << 16;
constexpr uint64_t kMaxHeads = 1 << 12;
constexpr uint64_t kMaxLayers = 1 << 12;
constexpr uint64_t kMaxContext = 1 << 20;
// Each tensor starts on a cache line of Weights::memory.
constexpr uint64_t kTensorAlignment = 64;

bool fail(std::string* error, const std::string& message) {
    *error = "model.gguf: " + message;
    return false;
}

// A tensor name in a message: escaped and shortened like every name the reader quotes (a file's names may hold
// any bytes, a message is one line).
std::string quoted(std::string_view name) { return "'" + printable(std::string(name)) + "'"; }

bool check_count(const char* key, uint64_t value, uint64_t max, std::string* error) {
    if (value >= 1 && value <= max) return true;
    return fail(error, std::string(key) + " is " + std::to_string(value) + ", expected 1.." + std::to_string(max));
}

// The storage format of a matrix of the given file type.
WeightFormat matrix_format(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return WeightFormat::fp32;
        case GgmlType::F16: return WeightFormat::f16;
        case GgmlType::Q8_0: return WeightFormat::q8_0;
        case GgmlType::Q4_0: return WeightFormat::q4_0;
        case GgmlType::Q4_1: return WeightFormat::q4_1;
        case GgmlType::Q5_0: return WeightFormat::q5_0;
        case GgmlType::Q5_1: return WeightFormat::q5_1;
        case GgmlType::Q4_K: return WeightFormat::q4_k;
        case GgmlType::Q5_K: return WeightFormat::q5_k;
        case GgmlType::Q6_K: return WeightFormat::q6_k;
    }
    return WeightFormat::fp32;
}

// One tensor a gpt2 GGUF file holds: its name, its ggml shape ne = [n_in, n_out] (a vector: [n]), and what it
// fills.
struct ExpectedTensor {
    std::string name;
    uint64_t ne0 = 0, ne1 = 0;  // ne1 = 0: a 1-D tensor
    Linear* matrix = nullptr;   // a weight matrix ([n_out][n_in] rows of n_in values)
    float** vector = nullptr;   // or a fp32 vector
    bool optional = false;      // output.weight
    int layer = -1;             // a matrix: its layer (-1: wte, lm_head) and its name as MatrixRows gives it
    const char* matrix_name = nullptr;
};

std::vector<ExpectedTensor> expected_tensors(const Config& c, Weights* w) {
    const uint64_t C = uint64_t(c.n_embd);
    std::vector<ExpectedTensor> out;
    out.push_back({"token_embd.weight", C, uint64_t(c.n_vocab), &w->wte, nullptr, false, -1, kEmbeddingName});
    out.push_back({"position_embd.weight", C, uint64_t(c.n_ctx), nullptr, &w->wpe, false});
    for (int i = 0; i < c.n_layer; i++) {
        Layer& l = w->layers[size_t(i)];
        const std::string blk = "blk." + std::to_string(i) + ".";
        auto linear = [&](const char* name, Linear* m, uint64_t n_in, uint64_t n_out, const char* matrix_name) {
            out.push_back({blk + name + ".weight", n_in, n_out, m, nullptr, false, i, matrix_name});
            out.push_back({blk + name + ".bias", n_out, 0, nullptr, &m->bias, false});
        };
        auto norm = [&](const char* name, LayerNorm* n) {
            out.push_back({blk + name + ".weight", C, 0, nullptr, &n->weight, false});
            out.push_back({blk + name + ".bias", C, 0, nullptr, &n->bias, false});
        };
        norm("attn_norm", &l.ln_1);
        linear("attn_qkv", &l.attn_qkv, C, 3 * C, kMatrixNames[int(Matrix::attn_qkv)]);
        linear("attn_output", &l.attn_proj, C, C, kMatrixNames[int(Matrix::attn_proj)]);
        norm("ffn_norm", &l.ln_2);
        linear("ffn_up", &l.mlp_fc, C, 4 * C, kMatrixNames[int(Matrix::mlp_fc)]);
        linear("ffn_down", &l.mlp_proj, 4 * C, C, kMatrixNames[int(Matrix::mlp_proj)]);
    }
    out.push_back({"output_norm.weight", C, 0, nullptr, &w->ln_f.weight, false});
    out.push_back({"output_norm.bias", C, 0, nullptr, &w->ln_f.bias, false});
    out.push_back(
        {"output.weight", C, uint64_t(c.n_vocab), &w->output, nullptr, true, -1, kMatrixNames[int(Matrix::lm_head)]});
    return out;
}

std::string shape_string(const GgufTensor& t) {
    std::string s = "[";
    for (uint32_t i = 0; i < t.n_dims; i++) s += (i ? ", " : "") + std::to_string(t.ne[i]);
    return s + "]";
}

std::string expected_shape(const ExpectedTensor& e) {
    return "[" + std::to_string(e.ne0) + (e.ne1 ? ", " + std::to_string(e.ne1) : "") + "]";
}

uint64_t align_tensor(uint64_t bytes) { return (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment; }

// Whether v (n values, the tensor's from element `first` on) holds a NaN or Inf, which *error then names.
bool non_finite(std::string_view name, const float* v, size_t n, std::string* error, uint64_t first = 0) {
    const size_t i = first_non_finite(v, n);
    if (i == n) return false;
    fail(error,
         "tensor " + quoted(name) + " contains " + non_finite_name(v[i]) + " at element " + std::to_string(first + i));
    return true;
}

}  // namespace

bool GgufWeightsSink::on_header(const GgufModelInfo& info, std::string* error) {
    info_ = &info;
    if (!check_count("gpt2.embedding_length", info.embedding_length, kMaxEmbd, error) ||
        !check_count("gpt2.attention.head_count", info.head_count, kMaxHeads, error) ||
        !check_count("gpt2.block_count", info.block_count, kMaxLayers, error) ||
        !check_count("gpt2.context_length", info.context_length, kMaxContext, error))
        return false;
    if (info.embedding_length % info.head_count != 0)
        return fail(error, "gpt2.embedding_length " + std::to_string(info.embedding_length) +
                               " is not divisible by gpt2.attention.head_count " + std::to_string(info.head_count));
    if (uint64_t(info.feed_forward_length) != 4 * uint64_t(info.embedding_length))
        return fail(error, "gpt2.feed_forward_length " + std::to_string(info.feed_forward_length) +
                               " is not supported (only 4 * embedding_length = " +
                               std::to_string(4 * uint64_t(info.embedding_length)) + ")");
    if (!(info.layer_norm_epsilon > 0.0f) || !std::isfinite(info.layer_norm_epsilon))
        return fail(error, "gpt2.attention.layer_norm_epsilon must be a positive number");
    // the reader caps the tokens at kGgufMaxTokens, well within an int
    config_ = Config{int(info.tokens.size()), int(info.context_length), int(info.embedding_length),
                     int(info.head_count),    int(info.block_count),    info.layer_norm_epsilon};
    weights_->layers.resize(size_t(config_.n_layer));
    return match_tensors(info, error) && allocate(error);
}

// Every tensor of the file is one the model needs, with its shape; every needed one is there.
bool GgufWeightsSink::match_tensors(const GgufModelInfo& info, std::string* error) {
    std::vector<ExpectedTensor> expected = expected_tensors(config_, weights_);
    std::unordered_map<std::string_view, size_t> by_name;
    for (size_t i = 0; i < expected.size(); i++) by_name.emplace(expected[i].name, i);
    std::vector<bool> seen(expected.size(), false);
    destinations_.assign(info.tensors.size(), Destination{});
    for (size_t t = 0; t < info.tensors.size(); t++) {
        const std::string_view name = info.tensor_name(t);
        const auto found = by_name.find(name);
        if (found == by_name.end())
            return fail(error, "unexpected tensor " + quoted(name) + " (not one of a gpt2 model with " +
                                   std::to_string(config_.n_layer) + " layers)");
        const ExpectedTensor& e = expected[found->second];
        const GgufTensor& tensor = info.tensors[t];
        const bool shape_ok = e.ne1 ? tensor.n_dims == 2 && tensor.ne[0] == e.ne0 && tensor.ne[1] == e.ne1
                                    : tensor.n_dims == 1 && tensor.ne[0] == e.ne0;
        if (!shape_ok)
            return fail(error, "tensor " + quoted(name) + " has shape " + shape_string(tensor) + ", expected " +
                                   expected_shape(e));
        if (!e.matrix && tensor.type != GgmlType::F32 && tensor.type != GgmlType::F16)
            return fail(error, "tensor " + quoted(name) + " has type " + ggml_type_name(uint32_t(tensor.type)) +
                                   "; vectors and position_embd must be F32 or F16");
        seen[found->second] = true;
        Destination& d = destinations_[t];
        d.matrix = e.matrix;
        d.vector = e.vector;
        d.n_values = tensor.n_elements;
        d.type = tensor.type;
        d.row_bytes = e.matrix ? tensor.bytes / tensor.ne[1] : 0;
        d.layer = e.layer;
        d.matrix_name = e.matrix_name;
        if (e.matrix) {
            e.matrix->format = matrix_format(tensor.type);
            e.matrix->n_in = int(e.ne0);
            e.matrix->n_out = int(e.ne1);
        }
    }
    for (size_t i = 0; i < expected.size(); i++)
        if (!seen[i] && !expected[i].optional) return fail(error, "missing tensor " + quoted(expected[i].name));
    return true;
}

bool GgufWeightsSink::no_memory(uint64_t bytes, const char* what, std::string* error) {
    error_kind_ = ErrorKind::memory;
    return out_of_memory(bytes, what, error);
}

// One block holds every tensor (each on a cache line); then the fields of Weights point into it.
bool GgufWeightsSink::allocate(std::string* error) {
    uint64_t total = 0;
    uint64_t widest_row = 0;  // of the block-format matrices, as the file stores it
    for (Destination& d : destinations_) {
        uint64_t bytes = d.n_values * sizeof(float);  // a vector, or a F32 matrix
        if (d.matrix && receiver_) {
            bytes = 0;  // handed over as it arrives
            widest_row = std::max(widest_row, d.row_bytes);
        } else if (d.matrix && d.matrix->format != WeightFormat::fp32) {
            bytes = block_format(d.matrix->format)->storage_bytes(d.matrix->n_out, d.matrix->n_in);
            widest_row = std::max(widest_row, d.row_bytes);
        }
        d.offset = total;
        total += align_tensor(bytes);  // each at most 2^50 bytes, at most 2^16 tensors: no overflow
    }
    if (total > kMaxWeightsBytes) return no_memory(total, "the weights", error);
    rows_capacity_ = widest_row * kPanelRows;
    rows_.reset(static_cast<uint8_t*>(std::malloc(size_t(std::max<uint64_t>(rows_capacity_, 1)))));
    if (!rows_) return no_memory(rows_capacity_, "the GGUF rows being stored", error);
    weights_->memory = static_cast<float*>(std::aligned_alloc(kTensorAlignment, size_t(std::max<uint64_t>(total, 64))));
    if (!weights_->memory) return no_memory(total, "the weights", error);
    weights_->bytes = size_t(total);
    char* base = reinterpret_cast<char*>(weights_->memory);
    for (const Destination& d : destinations_) {
        if (!d.matrix) *d.vector = reinterpret_cast<float*>(base + d.offset);
        else if (!receiver_) d.matrix->weight = base + d.offset;
    }
    return true;
}

bool GgufWeightsSink::on_tensor_bytes(size_t tensor, uint64_t byte_offset, const uint8_t* bytes, size_t n,
                                      std::string* error) {
    const Destination& d = destinations_[tensor];
    const GgufTensor& info = info_->tensors[tensor];
    const std::string_view name = info_->tensor_name(tensor);
    return d.matrix ? matrix_bytes(d, name, byte_offset, bytes, n, info.bytes, error)
                    : vector_bytes(d, name, byte_offset, bytes, n, info.bytes, error);
}

// A vector's bytes go straight to its place; F16 ones to the back half of it, widened in place at the end (the
// write of element i, bytes [4i, 4i + 4), never reaches an unread half at 2n + 2j for j > i).
bool GgufWeightsSink::vector_bytes(const Destination& d, std::string_view name, uint64_t byte_offset,
                                   const uint8_t* bytes, size_t n, uint64_t tensor_bytes, std::string* error) {
    char* place = reinterpret_cast<char*>(weights_->memory) + d.offset;
    float* values = reinterpret_cast<float*>(place);
    const bool half = d.type == GgmlType::F16;
    std::memcpy(place + (half ? d.n_values * 2 : 0) + byte_offset, bytes, n);
    if (byte_offset + n < tensor_bytes) return true;
    if (half) decode_elements(DType::F16, reinterpret_cast<const uint8_t*>(place) + d.n_values * 2, d.n_values, values);
    return !non_finite(name, values, size_t(d.n_values), error);
}

// A F32 matrix is copied as it is (packed into panels by finish()); a block-format one is stored kPanelRows
// rows at a time, straight from the arriving bytes when whole groups of rows are there.
bool GgufWeightsSink::matrix_bytes(const Destination& d, std::string_view name, uint64_t byte_offset,
                                   const uint8_t* bytes, size_t n, uint64_t tensor_bytes, std::string* error) {
    Linear& m = *d.matrix;
    if (m.format == WeightFormat::fp32 && !receiver_) {
        char* place = static_cast<char*>(m.weight);
        std::memcpy(place + byte_offset, bytes, n);
        if (byte_offset + n < tensor_bytes) return true;
        return !non_finite(name, reinterpret_cast<float*>(place), size_t(d.n_values), error);
    }
    if (byte_offset == 0) {
        rows_fill_ = 0;
        next_row_ = 0;
    }
    // F32 rows are read as floats: they are always gathered, for alignment
    const bool straight = m.format != WeightFormat::fp32;
    while (n > 0) {
        const int group = std::min(kPanelRows, m.n_out - next_row_);
        const uint64_t group_bytes = uint64_t(group) * d.row_bytes;
        if (straight && rows_fill_ == 0 && n >= group_bytes) {  // whole groups straight from the file's bytes
            const int whole_rows = std::min<uint64_t>(n / d.row_bytes, uint64_t(m.n_out - next_row_));
            const int rows = whole_rows == m.n_out - next_row_ ? whole_rows : whole_rows / kPanelRows * kPanelRows;
            if (!take_rows(d, name, next_row_, rows, bytes, error)) return false;
            next_row_ += rows;
            bytes += uint64_t(rows) * d.row_bytes;
            n -= size_t(uint64_t(rows) * d.row_bytes);
            continue;
        }
        const size_t take = size_t(std::min<uint64_t>(n, group_bytes - rows_fill_));
        std::memcpy(rows_.get() + rows_fill_, bytes, take);
        rows_fill_ += take;
        bytes += take;
        n -= take;
        if (rows_fill_ == group_bytes) {
            if (!take_rows(d, name, next_row_, group, rows_.get(), error)) return false;
            next_row_ += group;
            rows_fill_ = 0;
        }
    }
    return true;
}

bool GgufWeightsSink::take_rows(const Destination& d, std::string_view name, int row0, int n_rows, const uint8_t* rows,
                                std::string* error) {
    Linear& m = *d.matrix;
    if (!receiver_) {
        block_format(m.format)->store_rows(m.weight, m.n_out, m.n_in, row0, n_rows, rows);
        return true;
    }
    if (m.format == WeightFormat::fp32 &&
        non_finite(name, reinterpret_cast<const float*>(rows), size_t(n_rows) * size_t(m.n_in), error,
                   uint64_t(row0) * uint64_t(m.n_in)))
        return false;
    return receiver_->receive({d.layer, d.matrix_name, m.format, m.n_out, m.n_in, row0, n_rows, rows, nullptr}, error);
}

bool GgufWeightsSink::finish(std::string* error) {
    rows_.reset();
    return pack_weight_panels(config_, weights_, error);
}

}  // namespace gpt2
