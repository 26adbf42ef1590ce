#include "weights.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels.h"

namespace gpt2 {

Weights::~Weights() { std::free(memory); }

namespace {

// One parameter the engine expects, where it goes, and how it is laid out in the file.
struct ExpectedTensor {
    std::string name;            // without the optional "transformer." prefix
    std::vector<int64_t> shape;  // as stored in the file
    float** field;               // Weights field that points at layer 0 of this parameter
    uint64_t offset;             // elements from the start of Weights::memory to this tensor
    bool first_layer;            // the tensor *field points at
    bool transpose;              // Conv1D [in][out] -> [out][in]
    const TensorView* found = nullptr;
    // int8: *field / offset are the per-row scales (floats), *qfield / q_offset the int8 values
    bool quantized = false;
    int8_t** qfield = nullptr;
    uint64_t q_offset = 0;
};

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

bool fail(std::string* error, const std::string& message) {
    if (error) *error = "model.safetensors: " + message;
    return false;
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

// Index of the first NaN or infinity in v[0, n), or n. The scan over all values is branch-free so that it
// vectorizes: checking every weight once at load is cheap next to the conversion itself.
size_t first_non_finite(const float* v, size_t n) {
    const uint32_t kExponentMask = 0x7F800000u;  // all exponent bits set: inf or nan
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        std::memcpy(&bits, v + i, 4);
        any |= uint32_t((bits & kExponentMask) == kExponentMask);
    }
    if (!any) return n;
    size_t i = 0;
    while (std::isfinite(v[i])) i++;
    return i;
}

bool non_finite_weight(const TensorView& tensor, uint64_t element, float value, std::string* error) {
    const char* what = std::isnan(value) ? "NaN" : value > 0 ? "Inf" : "-Inf";
    return fail(error, "tensor '" + tensor.name + "' contains " + what + " at element " + std::to_string(element));
}

// Conv1D [in][out] -> [out][in] goes through kTransposeRows decoded input rows at a time, so that the writes
// are contiguous runs of kTransposeRows floats instead of single floats n_in apart.
const size_t kTransposeRows = 16;

// Decodes the tensor into dst (transposed if asked) and rejects NaN and infinite values, naming the first one
// by its element index in the file's order. scratch: (kTransposeRows, 4 * n_embd), enough for any row of any
// tensor that is transposed.
bool convert(const TensorView& tensor, bool transpose, float* dst, float* scratch, std::string* error) {
    if (!transpose) {
        tensor_elements(tensor, 0, tensor.n_elements, dst);
        const size_t bad = first_non_finite(dst, tensor.n_elements);
        return bad == tensor.n_elements || non_finite_weight(tensor, bad, dst[bad], error);
    }
    const size_t n_in = size_t(tensor.shape[0]), n_out = size_t(tensor.shape[1]);
    for (size_t i0 = 0; i0 < n_in; i0 += kTransposeRows) {
        const size_t rows = n_in - i0 < kTransposeRows ? n_in - i0 : kTransposeRows;
        tensor_elements(tensor, i0 * n_out, rows * n_out, scratch);
        const size_t bad = first_non_finite(scratch, rows * n_out);
        if (bad != rows * n_out) return non_finite_weight(tensor, i0 * n_out + bad, scratch[bad], error);
        for (size_t o = 0; o < n_out; o++)
            for (size_t r = 0; r < rows; r++) dst[o * n_in + i0 + r] = scratch[r * n_out + o];
    }
    return true;
}

// Symmetric per-row quantization of src (rows, cols): scale[r] = max|w| / 127, q = round(w / scale[r]).
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

// Decodes, checks and quantizes one matrix into (rows = out, cols = in) int8 rows and scales. tmp holds
// tmp_floats >= the largest transposed matrix and >= one row.
bool convert_quantized(const TensorView& tensor, bool transpose, int8_t* q, float* scale, float* tmp,
                       size_t tmp_floats, float* scratch, std::string* error) {
    if (transpose) {
        const size_t n_in = size_t(tensor.shape[0]), n_out = size_t(tensor.shape[1]);
        if (!convert(tensor, true, tmp, scratch, error)) return false;
        quantize_rows(tmp, n_out, n_in, q, scale);
        return true;
    }
    const size_t rows = size_t(tensor.shape[0]), cols = size_t(tensor.shape[1]);
    const size_t chunk_rows = tmp_floats / cols;
    for (size_t r0 = 0; r0 < rows; r0 += chunk_rows) {
        const size_t nr = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
        tensor_elements(tensor, r0 * cols, nr * cols, tmp);
        const size_t bad = first_non_finite(tmp, nr * cols);
        if (bad != nr * cols) return non_finite_weight(tensor, r0 * cols + bad, tmp[bad], error);
        quantize_rows(tmp, nr, cols, q + r0 * cols, scale + r0);
    }
    return true;
}

bool out_of_memory(uint64_t bytes, const char* what, std::string* error) {
    if (error) *error = "out of memory: need " + std::to_string(bytes) + " bytes for " + what;
    return false;
}

}  // namespace

bool load_weights(const Config& config, const SafetensorsFile& file, WeightFormat format, Weights* w,
                  std::string* error) {
    const int64_t C = config.n_embd, L = config.n_layer, V = config.n_vocab, T = config.n_ctx;
    const bool int8 = format == WeightFormat::int8;
    w->format = format;

    // Layout: each parameter is one contiguous (n_layer, ...) array inside a single allocation.
    std::vector<ExpectedTensor> expected;
    uint64_t total = 0;    // float elements
    uint64_t total_q = 0;  // int8 elements (after the floats)
    auto add_global = [&](const char* name, std::vector<int64_t> shape, float** field) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        expected.push_back({name, shape, field, total, true, false});
        total += n;
    };
    auto add_layered = [&](const char* suffix, std::vector<int64_t> shape, bool transpose, float** field,
                           int8_t** qfield = nullptr, float** sfield = nullptr) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        if (int8 && qfield) {
            const uint64_t rows = uint64_t(transpose ? shape[1] : shape[0]);
            for (int l = 0; l < L; l++) {
                ExpectedTensor e{"h." + std::to_string(l) + "." + suffix, shape, sfield, total + rows * uint64_t(l),
                                 l == 0, transpose};
                e.quantized = true;
                e.qfield = qfield;
                e.q_offset = total_q + n * uint64_t(l);
                expected.push_back(e);
            }
            total += rows * uint64_t(L);
            total_q += n * uint64_t(L);
            return;
        }
        for (int l = 0; l < L; l++)
            expected.push_back(
                {"h." + std::to_string(l) + "." + suffix, shape, field, total + n * uint64_t(l), l == 0, transpose});
        total += n * uint64_t(L);
    };
    if (int8) {
        ExpectedTensor e{"wte.weight", {V, C}, &w->wte_scale, total, true, false};
        e.quantized = true;
        e.qfield = &w->wte_q;
        e.q_offset = total_q;
        expected.push_back(e);
        total += uint64_t(V);
        total_q += uint64_t(V) * uint64_t(C);
    } else {
        add_global("wte.weight", {V, C}, &w->wte);
    }
    add_global("wpe.weight", {T, C}, &w->wpe);
    add_layered("ln_1.weight", {C}, false, &w->ln_1_weight);
    add_layered("ln_1.bias", {C}, false, &w->ln_1_bias);
    add_layered("attn.c_attn.weight", {C, 3 * C}, true, &w->qkv_weight, &w->qkv_q, &w->qkv_scale);
    add_layered("attn.c_attn.bias", {3 * C}, false, &w->qkv_bias);
    add_layered("attn.c_proj.weight", {C, C}, true, &w->attn_proj_weight, &w->attn_proj_q, &w->attn_proj_scale);
    add_layered("attn.c_proj.bias", {C}, false, &w->attn_proj_bias);
    add_layered("ln_2.weight", {C}, false, &w->ln_2_weight);
    add_layered("ln_2.bias", {C}, false, &w->ln_2_bias);
    add_layered("mlp.c_fc.weight", {C, 4 * C}, true, &w->fc_weight, &w->fc_q, &w->fc_scale);
    add_layered("mlp.c_fc.bias", {4 * C}, false, &w->fc_bias);
    add_layered("mlp.c_proj.weight", {4 * C, C}, true, &w->mlp_proj_weight, &w->mlp_proj_q,
                &w->mlp_proj_scale);
    add_layered("mlp.c_proj.bias", {C}, false, &w->mlp_proj_bias);
    add_global("ln_f.weight", {C}, &w->ln_f_weight);
    add_global("ln_f.bias", {C}, &w->ln_f_bias);

    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < expected.size(); i++) index[expected[i].name] = i;

    // Match the file's tensors by name; check shapes before allocating anything.
    const TensorView* lm_head = nullptr;
    for (const TensorView& tensor : file.tensors) {
        static const std::string kPrefix = "transformer.";
        std::string name = tensor.name.compare(0, kPrefix.size(), kPrefix) == 0 ? tensor.name.substr(kPrefix.size())
                                                                                : tensor.name;
        auto it = index.find(name);
        if (it != index.end()) {
            ExpectedTensor& e = expected[it->second];
            if (e.found)
                return fail(error, "tensors '" + e.found->name + "' and '" + tensor.name + "' are the same parameter");
            if (tensor.shape != e.shape)
                return fail(error, "tensor '" + tensor.name + "' has shape " + shape_string(tensor.shape) +
                                       ", expected " + shape_string(e.shape));
            e.found = &tensor;
        } else if (is_mask_buffer(name, L)) {
            continue;
        } else if (name == "lm_head.weight") {
            if (tensor.shape != std::vector<int64_t>{V, C})
                return fail(error, "tensor '" + tensor.name + "' has shape " + shape_string(tensor.shape) +
                                       ", expected " + shape_string({V, C}));
            lm_head = &tensor;
        } else {
            return fail(error, "unexpected tensor '" + tensor.name + "'");
        }
    }
    for (const ExpectedTensor& e : expected)
        if (!e.found) return fail(error, "missing tensor '" + e.name + "'");

    // Allocate (checked, non-throwing: the size may not fit a 32-bit size_t in wasm).
    const uint64_t bytes = total * sizeof(float) + total_q;
    if (bytes > uint64_t(SIZE_MAX) || !(w->memory = static_cast<float*>(std::malloc(size_t(bytes)))))
        return out_of_memory(bytes, "the weights", error);
    w->bytes = size_t(bytes);
    const uint64_t scratch_bytes = kTransposeRows * 4 * uint64_t(C) * sizeof(float);
    std::unique_ptr<float, decltype(&std::free)> scratch(static_cast<float*>(std::malloc(size_t(scratch_bytes))),
                                                         &std::free);
    if (!scratch) return out_of_memory(scratch_bytes, "the weight conversion", error);
    // int8: one decoded fp32 matrix at a time (the largest transposed one: 4 * n_embd * n_embd)
    const size_t tmp_floats = int8 ? size_t(4 * C * C) : 0;
    std::unique_ptr<float, decltype(&std::free)> tmp(
        int8 ? static_cast<float*>(std::malloc(tmp_floats * sizeof(float))) : nullptr, &std::free);
    if (int8 && !tmp) return out_of_memory(uint64_t(tmp_floats) * sizeof(float), "the weight quantization", error);
    int8_t* const q_base = reinterpret_cast<int8_t*>(w->memory + total);

    for (const ExpectedTensor& e : expected) {
        if (e.first_layer) *e.field = w->memory + e.offset;
        if (e.quantized) {
            if (e.first_layer) *e.qfield = q_base + e.q_offset;
            if (!convert_quantized(*e.found, e.transpose, q_base + e.q_offset, w->memory + e.offset, tmp.get(),
                                   tmp_floats, scratch.get(), error))
                return false;
        } else if (!convert(*e.found, e.transpose, w->memory + e.offset, scratch.get(), error)) {
            return false;
        }
    }

    // The engine always uses wte as the LM head; an explicit lm_head is accepted only when it is the same.
    if (lm_head && int8) {  // compare with the file's wte (the engine keeps only the quantized one)
        const size_t chunk = tmp_floats / 2;
        const TensorView& wte = *expected[0].found;
        for (size_t first = 0; first < lm_head->n_elements; first += chunk) {
            const size_t count = lm_head->n_elements - first < chunk ? lm_head->n_elements - first : chunk;
            tensor_elements(*lm_head, first, count, tmp.get());
            tensor_elements(wte, first, count, tmp.get() + chunk);
            if (std::memcmp(tmp.get(), tmp.get() + chunk, count * sizeof(float)) != 0)
                return fail(error, "tensor '" + lm_head->name +
                                       "' differs from 'wte.weight' (only a tied LM head is supported)");
        }
    } else if (lm_head) {
        const size_t chunk = size_t(scratch_bytes / sizeof(float));
        for (size_t first = 0; first < lm_head->n_elements; first += chunk) {
            const size_t count = lm_head->n_elements - first < chunk ? lm_head->n_elements - first : chunk;
            tensor_elements(*lm_head, first, count, scratch.get());
            if (std::memcmp(scratch.get(), w->wte + first, count * sizeof(float)) != 0)
                return fail(error, "tensor '" + lm_head->name +
                                       "' differs from 'wte.weight' (only a tied LM head is supported)");
        }
    }
    return true;
}

namespace {

// Packs `layers` consecutive (n_out, n_in) matrices starting at w.
template <typename T>
void pack_layers(T* w, int layers, int n_out, int n_in, T* scratch) {
    for (int l = 0; l < layers; l++) pack_panels(w + size_t(l) * n_out * n_in, n_out, n_in, scratch);
}

}  // namespace

bool pack_weight_panels(const Config& c, Weights* w, std::string* error) {
    const int C = c.n_embd, L = c.n_layer;
    const uint64_t scratch_bytes = uint64_t(kPanelRows) * 4 * uint64_t(C) * sizeof(float);  // widest rows: 4 * n_embd
    std::unique_ptr<float, decltype(&std::free)> scratch(static_cast<float*>(std::malloc(size_t(scratch_bytes))),
                                                         &std::free);
    if (!scratch) return out_of_memory(scratch_bytes, "the weight packing", error);
    if (w->format == WeightFormat::int8) {
        int8_t* s = reinterpret_cast<int8_t*>(scratch.get());
        pack_layers(w->wte_q, 1, c.n_vocab, C, s);
        pack_layers(w->qkv_q, L, 3 * C, C, s);
        pack_layers(w->attn_proj_q, L, C, C, s);
        pack_layers(w->fc_q, L, 4 * C, C, s);
        pack_layers(w->mlp_proj_q, L, C, 4 * C, s);
    } else {
        float* s = scratch.get();
        pack_layers(w->wte, 1, c.n_vocab, C, s);
        pack_layers(w->qkv_weight, L, 3 * C, C, s);
        pack_layers(w->attn_proj_weight, L, C, C, s);
        pack_layers(w->fc_weight, L, 4 * C, C, s);
        pack_layers(w->mlp_proj_weight, L, C, 4 * C, s);
    }
    return true;
}

}  // namespace gpt2
