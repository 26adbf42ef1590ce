#include "model/weights.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "model/allocation.h"

namespace gpt2 {

Weights::~Weights() { std::free(memory); }

bool weights_file_error(std::string* error, const std::string& message) {
    if (error) *error = "model.safetensors: " + message;
    return false;
}

WeightsLayout weights_layout(const Config& config, WeightFormat format, Weights* w, bool with_matrices) {
    const int64_t C = config.n_embd, L = config.n_layer, V = config.n_vocab, T = config.n_ctx;
    const bool int8 = format == WeightFormat::int8;
    // Each parameter is one contiguous (n_layer, ...) array inside a single allocation: the slots go parameter
    // by parameter, layer by layer.
    WeightsLayout layout;
    std::vector<ParameterSlot>& slots = layout.slots;
    uint64_t& total = layout.n_floats;
    uint64_t& total_q = layout.n_int8;
    w->layers.assign(size_t(L), Layer());
    auto elements = [](const std::vector<int64_t>& shape) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        return n;
    };
    auto add_vector = [&](std::string name, std::vector<int64_t> shape, float** vector) {
        const uint64_t n = elements(shape);
        ParameterSlot slot{std::move(name), std::move(shape), total, false};
        slot.vector = vector;
        slots.push_back(std::move(slot));
        total += n;
    };
    // A weight matrix: the file's shape is (n_in, n_out) for a Conv1D (transpose), else (n_out, n_in).
    auto add_matrix = [&](std::string name, std::vector<int64_t> shape, bool transpose, Linear* linear, int64_t layer,
                          const char* matrix_name) {
        const uint64_t n = elements(shape);
        linear->format = format;
        linear->n_out = int(transpose ? shape[1] : shape[0]);
        linear->n_in = int(transpose ? shape[0] : shape[1]);
        ParameterSlot slot{std::move(name), std::move(shape), total, transpose};
        slot.matrix = linear;
        slot.quantized = int8;
        slot.stored = with_matrices;
        slot.layer = int(layer);
        slot.matrix_name = matrix_name;
        if (!with_matrices) {
            slot.offset = 0;
        } else if (int8) {
            slot.q_offset = total_q;
            total += uint64_t(linear->n_out) * (kInt8RowSums ? 2 : 1);  // the scales (and the rows' sums: int32)
            total_q += n;
        } else {
            total += n;
        }
        slots.push_back(std::move(slot));
    };
    auto layer_name = [](int64_t l, const char* suffix) { return "h." + std::to_string(l) + "." + suffix; };

    add_matrix("wte.weight", {V, C}, false, &w->wte, -1, kEmbeddingName);
    add_vector(std::string(kPositionsName) + ".weight", {T, C}, &w->wpe);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "ln_1.weight"), {C}, &w->layers[l].ln_1.weight);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "ln_1.bias"), {C}, &w->layers[l].ln_1.bias);
    for (int64_t l = 0; l < L; l++)
        add_matrix(layer_name(l, "attn.c_attn.weight"), {C, 3 * C}, true, &w->layers[l].attn_qkv, l,
                   kMatrixNames[int(Matrix::attn_qkv)]);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "attn.c_attn.bias"), {3 * C}, &w->layers[l].attn_qkv.bias);
    for (int64_t l = 0; l < L; l++)
        add_matrix(layer_name(l, "attn.c_proj.weight"), {C, C}, true, &w->layers[l].attn_proj, l,
                   kMatrixNames[int(Matrix::attn_proj)]);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "attn.c_proj.bias"), {C}, &w->layers[l].attn_proj.bias);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "ln_2.weight"), {C}, &w->layers[l].ln_2.weight);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "ln_2.bias"), {C}, &w->layers[l].ln_2.bias);
    for (int64_t l = 0; l < L; l++)
        add_matrix(layer_name(l, "mlp.c_fc.weight"), {C, 4 * C}, true, &w->layers[l].mlp_fc, l,
                   kMatrixNames[int(Matrix::mlp_fc)]);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "mlp.c_fc.bias"), {4 * C}, &w->layers[l].mlp_fc.bias);
    for (int64_t l = 0; l < L; l++)
        add_matrix(layer_name(l, "mlp.c_proj.weight"), {4 * C, C}, true, &w->layers[l].mlp_proj, l,
                   kMatrixNames[int(Matrix::mlp_proj)]);
    for (int64_t l = 0; l < L; l++) add_vector(layer_name(l, "mlp.c_proj.bias"), {C}, &w->layers[l].mlp_proj.bias);
    add_vector("ln_f.weight", {C}, &w->ln_f.weight);
    add_vector("ln_f.bias", {C}, &w->ln_f.bias);
    return layout;
}

bool allocate_weights(const WeightsLayout& layout, Weights* w, std::string* error) {
    const uint64_t bytes = layout.bytes();
    if (bytes > kMaxWeightsBytes || !(w->memory = static_cast<float*>(std::malloc(size_t(bytes)))))
        return out_of_memory(bytes, "the weights", error);
    w->bytes = size_t(bytes);
    int8_t* const q_base = reinterpret_cast<int8_t*>(w->memory + layout.n_floats);
    for (const ParameterSlot& slot : layout.slots) {
        if (!slot.stored) continue;  // its weight stays null
        if (slot.vector) {
            *slot.vector = w->memory + slot.offset;
        } else if (slot.quantized) {
            slot.matrix->weight = q_base + slot.q_offset;
            slot.matrix->scale = w->memory + slot.offset;
            if (kInt8RowSums) slot.matrix->sums = reinterpret_cast<int32_t*>(slot.matrix->scale + slot.matrix->n_out);
        } else {
            slot.matrix->weight = w->memory + slot.offset;
        }
    }
    return true;
}

namespace {

// Packs one weight matrix in place; scratch holds kPanelRows rows of the widest matrix.
void pack_linear(Linear* linear, void* scratch) {
    if (!linear->weight) return;  // handed to a MatrixReceiver
    switch (linear->format) {
        case WeightFormat::fp32:
            pack_panels(static_cast<float*>(linear->weight), linear->n_out, linear->n_in, static_cast<float*>(scratch));
            break;
        case WeightFormat::int8:
            if (linear->sums)
                int8_row_sums(linear->sums, static_cast<const int8_t*>(linear->weight), linear->n_out, linear->n_in);
            pack_panels(static_cast<int8_t*>(linear->weight), linear->n_out, linear->n_in,
                        static_cast<int8_t*>(scratch));
            break;
        default: break;  // the block formats are stored in their layout as their rows arrive (block_formats.h)
    }
}

}  // namespace

bool pack_weight_panels(const Config& c, Weights* w, std::string* error) {
    // the widest rows: 4 * n_embd
    const uint64_t scratch_bytes = uint64_t(kPanelRows) * 4 * uint64_t(c.n_embd) * sizeof(float);
    std::unique_ptr<float, decltype(&std::free)> scratch(static_cast<float*>(std::malloc(size_t(scratch_bytes))),
                                                         &std::free);
    if (!scratch) return out_of_memory(scratch_bytes, "the weight packing", error);
    pack_linear(&w->wte, scratch.get());
    for (Layer& layer : w->layers) {
        pack_linear(&layer.attn_qkv, scratch.get());
        pack_linear(&layer.attn_proj, scratch.get());
        pack_linear(&layer.mlp_fc, scratch.get());
        pack_linear(&layer.mlp_proj, scratch.get());
    }
    if (w->output.weight) pack_linear(&w->output, scratch.get());
    return true;
}

namespace {

constexpr int kLayerMatrices = int(Matrix::lm_head), kLayerNorms = int(Norm::ln_f);
constexpr const char* kNormParts[] = {".weight", ".bias"};

// The index of name in names, or -1.
int index_of(const std::vector<std::string>& names, const std::string& name) {
    for (size_t i = 0; i < names.size(); i++)
        if (names[i] == name) return int(i);
    return -1;
}

}  // namespace

// The lookups below list the weights in this order.
WeightNames weight_names() {
    WeightNames names;
    names.model_matrices = {kEmbeddingName, kMatrixNames[int(Matrix::lm_head)]};
    names.layer_matrices.assign(kMatrixNames, kMatrixNames + kLayerMatrices);
    names.model_vectors = {kPositionsName};
    for (const char* part : kNormParts) names.model_vectors.push_back(std::string(kNormNames[kLayerNorms]) + part);
    for (int norm = 0; norm < kLayerNorms; norm++)
        for (const char* part : kNormParts) names.layer_vectors.push_back(std::string(kNormNames[norm]) + part);
    return names;
}

const Linear* find_matrix(const Weights& w, int layer, const std::string& name, bool* tied) {
    if (layer < -1 || layer >= int(w.layers.size())) return nullptr;
    const WeightNames names = weight_names();
    const int i = index_of(layer < 0 ? names.model_matrices : names.layer_matrices, name);
    if (tied) *tied = layer < 0 && i == 1 && &w.lm_head() == &w.wte;
    if (i < 0 || layer < 0) return i < 0 ? nullptr : i == 0 ? &w.wte : &w.lm_head();
    const Layer& l = w.layers[size_t(layer)];
    const Linear* matrices[] = {&l.attn_qkv, &l.attn_proj, &l.mlp_fc, &l.mlp_proj};
    return matrices[i];
}

const float* find_vector(const Weights& w, const Config& config, int layer, const std::string& name, size_t* n) {
    if (layer < -1 || layer >= int(w.layers.size())) return nullptr;
    const WeightNames names = weight_names();
    const int i = index_of(layer < 0 ? names.model_vectors : names.layer_vectors, name);
    if (i < 0) return nullptr;
    *n = size_t(config.n_embd) * (layer < 0 && i == 0 ? size_t(config.n_ctx) : 1);
    const float* model_vectors[] = {w.wpe, w.ln_f.weight, w.ln_f.bias};
    if (layer < 0) return model_vectors[i];
    const Layer& l = w.layers[size_t(layer)];
    const float* layer_vectors[] = {l.ln_1.weight, l.ln_1.bias, l.ln_2.weight, l.ln_2.bias};
    return layer_vectors[i];
}

size_t host_row_bytes(WeightFormat format, int n_in) {
    if (const BlockFormat* block = block_format(format))
        return size_t(n_in) / block->values_per_block * block->bytes_per_block;
    return size_t(n_in) * (format == WeightFormat::fp32 ? sizeof(float) : 1);
}

size_t copy_host_rows(const Linear& m, int row0, int n_rows, std::unique_ptr<uint8_t[]>* staging,
                      size_t* staging_bytes) {
    if (!m.weight || row0 < 0 || n_rows < 1 || row0 > m.n_out - n_rows) return 0;
    const size_t row_bytes = host_row_bytes(m.format, m.n_in), bytes = size_t(n_rows) * row_bytes;
    if (bytes > *staging_bytes) {
        staging->reset(new (std::nothrow) uint8_t[bytes]);
        *staging_bytes = *staging ? bytes : 0;
        if (!*staging) return 0;
    }
    uint8_t* out = staging->get();
    if (const BlockFormat* block = block_format(m.format)) {
        block->file_rows(out, m.weight, m.n_out, m.n_in, row0, n_rows);
        return bytes;
    }
    for (int r = 0; r < n_rows; r++) {
        uint8_t* row = out + size_t(r) * row_bytes;
        if (m.format == WeightFormat::fp32)
            unpack_row(reinterpret_cast<float*>(row), static_cast<const float*>(m.weight), m.n_out, m.n_in, row0 + r);
        else
            unpack_row(reinterpret_cast<int8_t*>(row), static_cast<const int8_t*>(m.weight), m.n_out, m.n_in, row0 + r);
    }
    return bytes;
}

const char* non_finite_name(float value) { return std::isnan(value) ? "NaN" : value > 0 ? "Inf" : "-Inf"; }

bool non_finite_weight(const std::string& tensor, uint64_t element, float value, std::string* error) {
    return weights_file_error(error, "tensor '" + tensor + "' contains " + non_finite_name(value) + " at element " +
                                         std::to_string(element));
}

void quantize_rows(const float* src, size_t rows, size_t cols, int8_t* q, float* scale) {
    for (size_t r = 0; r < rows; r++) {
        const float* w = src + r * cols;
        float m = 0.0f;
        for (size_t i = 0; i < cols; i++) m = std::fabs(w[i]) > m ? std::fabs(w[i]) : m;
        const float s = m / 127.0f;
        scale[r] = s;
        for (size_t i = 0; i < cols; i++) {
            float v = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[r * cols + i] = int8_t(v);
        }
    }
}

}  // namespace gpt2
